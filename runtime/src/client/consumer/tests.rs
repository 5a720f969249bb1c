//! The consumer's waker, against the embedded broker: a woken poll returns at once.

use std::time::Duration;

use eddy_core::log::TopicPartition;

use super::Consumer;
use crate::client::{Admin, ConsumerConfig, NewTopic, OffsetReset};
use crate::embedded::EmbeddedBroker;

/// Far longer than the test may take: a poll that waits it out fails the test.
const LONG_POLL: Duration = Duration::from_secs(600);
const TEST_LIMIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_woken_poll_returns_at_once_with_no_records() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let admin = Admin::connect(&broker.bootstrap()).await.unwrap();
    admin
        .ensure_topic(&NewTopic::new("quiet", 1))
        .await
        .unwrap();
    let config = ConsumerConfig::new(&broker.bootstrap()).auto_offset_reset(OffsetReset::Earliest);
    let mut consumer = Consumer::new(config).unwrap();
    consumer.assign(&[TopicPartition::new("quiet", 0)]).unwrap();
    let waker = consumer.waker();

    // Woken while it waits for records that do not come.
    let wake = tokio::spawn({
        let waker = waker.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            waker.notify_one();
        }
    });
    let polled = tokio::time::timeout(TEST_LIMIT, consumer.poll(LONG_POLL)).await;
    assert!(polled.expect("woken while waiting").unwrap().is_empty());
    wake.await.unwrap();

    // Woken before it polls: the next poll does not wait.
    waker.notify_one();
    let polled = tokio::time::timeout(TEST_LIMIT, consumer.poll(LONG_POLL)).await;
    assert!(polled.expect("woken before the poll").unwrap().is_empty());
}
