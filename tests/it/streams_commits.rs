//! What a stream thread's commits commit: a commit interval that passes with nothing
//! processed commits nothing (no transaction exactly-once, no offsets at-least-once) and is
//! not counted, as Kafka Streams commits only the tasks that need it; the next record
//! processed is committed as before.

use std::collections::BTreeMap;
use std::time::Duration;

use eddy::app::ProcessingGuarantee;
use eddy::client::{Admin, OffsetSpec};
use eddy::log::TopicPartition;
use eddy_tests::{wait_until, TestBroker};

use crate::streams_app::{config, latest_counts, produce, run_on, running};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_an_idle_interval_commits_nothing() {
    idle_intervals_commit_nothing(ProcessingGuarantee::ExactlyOnceV2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_once_an_idle_interval_commits_nothing() {
    idle_intervals_commit_nothing(ProcessingGuarantee::AtLeastOnce).await;
}

async fn idle_intervals_commit_nothing(guarantee: ProcessingGuarantee) {
    let broker = TestBroker::start().await;
    let input = broker.create_topic(&broker.unique("clicks"), 2).await;
    let output = broker.create_topic(&broker.unique("click-counts"), 2).await;
    let app = broker.unique("idle-app");
    let state = tempfile::tempdir().unwrap();
    let mut config = config(&app, &broker, state.path(), guarantee);
    config.commit_interval_ms = Some(Duration::from_millis(20));
    let mut streams = running(&input, &output, config).await;
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();

    produce(&broker, &input, &["a", "b", "c", "d"]).await;
    let expected: BTreeMap<String, i64> = ["a", "b", "c", "d"]
        .into_iter()
        .map(|k| (k.to_string(), 1))
        .collect();
    assert_eq!(latest_counts(&broker, &output, &expected).await, expected);
    let ends = end_offsets(&admin, &input).await;
    committed_to(&admin, &app, &ends).await;
    // The commit that took the offsets is settled well within this.
    run_on(&streams, Duration::from_millis(300)).await;

    // Fifty commit intervals pass with nothing to process.
    let before = streams.metrics().commits;
    run_on(&streams, Duration::from_secs(1)).await;
    let after = streams.metrics().commits;
    assert_eq!(after, before, "idle intervals were counted as commits");
    assert_eq!(admin.committed_offsets(&app).await.unwrap(), ends);

    // The next record is processed and committed.
    produce(&broker, &input, &["a"]).await;
    let mut expected = expected;
    expected.insert("a".into(), 2);
    assert_eq!(latest_counts(&broker, &output, &expected).await, expected);
    committed_to(&admin, &app, &end_offsets(&admin, &input).await).await;
    wait_until(Duration::from_secs(30), "the commit counted", async || {
        let now = streams.metrics().commits;
        if now > after {
            return Ok(());
        }
        Err(format!("{now} commits"))
    })
    .await;
    streams.close(Duration::from_secs(30)).await.unwrap();
}

/// Where each partition of `topic` ends.
async fn end_offsets(admin: &Admin, topic: &str) -> BTreeMap<TopicPartition, i64> {
    let partitions: Vec<TopicPartition> = (0..2).map(|p| TopicPartition::new(topic, p)).collect();
    admin
        .list_offsets(&partitions, OffsetSpec::Latest)
        .await
        .unwrap()
}

/// Waits until `group` has committed `offsets`.
async fn committed_to(admin: &Admin, group: &str, offsets: &BTreeMap<TopicPartition, i64>) {
    wait_until(
        Duration::from_secs(30),
        "the offsets committed",
        async || {
            let committed = admin.committed_offsets(group).await.unwrap();
            if &committed == offsets {
                return Ok(());
            }
            Err(format!("{committed:?}"))
        },
    )
    .await;
}
