//! eddy's admin client against a real broker (embedded, or the one `EDDY_TEST_BOOTSTRAP`
//! names): topics created with configs, described, grown, listed and deleted; offsets by
//! position and by time; groups listed and described with their members; a group's offsets
//! altered from outside it. Also pause and resume of a consumer's partitions.

use std::collections::BTreeMap;
use std::time::Duration;

use eddy::client::{
    Admin, ClientError, Consumer, ConsumerConfig, GroupState, NewTopic, OffsetReset, OffsetSpec,
    Producer, ProducerConfig, ProducerRecord,
};
use eddy_core::log::TopicPartition;
use eddy_tests::{wait_until, TestBroker};

#[tokio::test]
async fn topics_are_created_described_grown_listed_and_deleted() {
    let broker = TestBroker::start().await;
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    let topic = broker.unique("admin-topic");
    admin
        .create_topics(&[NewTopic::new(&topic, 2)
            .config("cleanup.policy", "compact")
            .config("retention.ms", "3600000")])
        .await
        .unwrap();
    // A second creation is refused with TOPIC_ALREADY_EXISTS.
    let again = admin.create_topics(&[NewTopic::new(&topic, 2)]).await;
    assert_eq!(again.unwrap_err().code(), Some(36));
    // A bad config is refused.
    let bad = admin
        .create_topics(&[
            NewTopic::new(broker.unique("admin-bad"), 1).config("cleanup.policy", "sideways")
        ])
        .await;
    assert!(bad.is_err());

    let described = admin.describe_topics(&[&topic]).await.unwrap();
    assert_eq!(described.len(), 1);
    assert_eq!(described[0].name, topic);
    assert!(!described[0].internal);
    let partitions: Vec<i32> = described[0]
        .partitions
        .iter()
        .map(|p| p.partition)
        .collect();
    assert_eq!(partitions, [0, 1]);
    assert!(described[0]
        .partitions
        .iter()
        .all(|p| p.leader >= 0 && p.replicas.len() == 1));

    admin.create_partitions(&topic, 5).await.unwrap();
    assert_eq!(admin.partition_count(&topic).await.unwrap(), 5);
    // Shrinking is refused.
    assert!(admin.create_partitions(&topic, 3).await.is_err());

    assert!(admin.list_topics(false).await.unwrap().contains(&topic));
    assert!(!admin
        .list_topics(false)
        .await
        .unwrap()
        .iter()
        .any(|t| t.starts_with("__")));
    assert!(admin
        .list_topics(true)
        .await
        .unwrap()
        .contains(&"__consumer_offsets".to_string()));

    admin.delete_topics(&[&topic]).await.unwrap();
    wait_until(
        Duration::from_secs(30),
        "the topic is still listed",
        async || !admin.list_topics(false).await.unwrap().contains(&topic),
    )
    .await;
    let unknown = admin.describe_topics(&[&topic]).await;
    assert_eq!(unknown.unwrap_err().code(), Some(3));
}

#[tokio::test]
async fn offsets_are_found_by_position_and_by_time() {
    let broker = TestBroker::start().await;
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    let topic = broker.create_topic("admin-offsets", 1).await;
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    let base = 1_700_000_000_000;
    for i in 0..10 {
        producer
            .send(ProducerRecord::new(&topic, format!("{i}")).timestamp(base + i * 1_000))
            .await
            .unwrap();
    }
    producer.close().await.unwrap();
    let tp = TopicPartition::new(&topic, 0);
    let at = |spec| {
        let (admin, tp) = (admin.clone(), tp.clone());
        async move {
            admin
                .list_offsets(std::slice::from_ref(&tp), spec)
                .await
                .unwrap()[&tp]
        }
    };
    assert_eq!(at(OffsetSpec::Earliest).await, 0);
    assert_eq!(at(OffsetSpec::Latest).await, 10);
    assert_eq!(at(OffsetSpec::Timestamp(base + 3_000)).await, 3);
    assert_eq!(at(OffsetSpec::Timestamp(base + 3_500)).await, 4);
    // Later than every record: the end, as Kafka's tools take it.
    assert_eq!(at(OffsetSpec::Timestamp(base + 60_000)).await, 10);
}

#[tokio::test]
async fn groups_are_listed_and_described_and_their_offsets_altered() {
    let broker = TestBroker::start().await;
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    let topic = broker.create_topic("admin-groups", 2).await;
    let group = broker.unique("admin-group");
    let mut consumer = Consumer::new(
        ConsumerConfig::new(broker.bootstrap())
            .group_id(&group)
            .client_id("described-member")
            .auto_offset_reset(OffsetReset::Earliest),
    )
    .unwrap();
    consumer.subscribe(&[&topic]).unwrap();
    wait_until(Duration::from_secs(30), "no assignment", async || {
        consumer.poll(Duration::from_millis(100)).await.unwrap();
        consumer.assignment().len() == 2
    })
    .await;
    let listed = admin.list_groups().await.unwrap();
    assert!(listed
        .iter()
        .any(|g| g.group_id == group && g.protocol_type == "consumer"));
    let described = admin.describe_group(&group).await.unwrap();
    assert_eq!(described.state, GroupState::Stable);
    assert_eq!(described.members.len(), 1);
    assert_eq!(described.members[0].client_id, "described-member");
    let mut held = described.members[0].assignment.clone();
    held.sort();
    assert_eq!(held, consumer.assignment());
    // While the member is there, altering offsets from outside is refused.
    let offsets = BTreeMap::from([(TopicPartition::new(&topic, 0), 7)]);
    assert!(admin.alter_group_offsets(&group, &offsets).await.is_err());
    consumer.close().await.unwrap();
    admin.alter_group_offsets(&group, &offsets).await.unwrap();
    assert_eq!(admin.committed_offsets(&group).await.unwrap(), offsets);
}

#[tokio::test]
async fn paused_partitions_are_not_read_until_resumed() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("paused", 2).await;
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    for i in 0..20 {
        producer
            .send(ProducerRecord::new(&topic, format!("{i}")).partition(i % 2))
            .await
            .unwrap();
    }
    producer.close().await.unwrap();
    let mut consumer = Consumer::new(
        ConsumerConfig::new(broker.bootstrap()).auto_offset_reset(OffsetReset::Earliest),
    )
    .unwrap();
    let (p0, p1) = (
        TopicPartition::new(&topic, 0),
        TopicPartition::new(&topic, 1),
    );
    consumer.assign(&[p0.clone(), p1.clone()]).unwrap();
    consumer.pause(std::slice::from_ref(&p1)).unwrap();
    let mut read = Vec::new();
    wait_until(Duration::from_secs(10), "not 10 records", async || {
        read.extend(consumer.poll(Duration::from_millis(100)).await.unwrap());
        read.len() >= 10
    })
    .await;
    // Nothing of the paused partition, even polled again.
    read.extend(consumer.poll(Duration::from_millis(300)).await.unwrap());
    assert_eq!(read.len(), 10);
    assert!(read.iter().all(|r| r.partition == 0));
    consumer.resume(std::slice::from_ref(&p1)).unwrap();
    wait_until(Duration::from_secs(10), "not 20 records", async || {
        read.extend(consumer.poll(Duration::from_millis(100)).await.unwrap());
        read.len() >= 20
    })
    .await;
    assert_eq!(read.iter().filter(|r| r.partition == 1).count(), 10);
    // A partition that is not assigned cannot be paused.
    let stranger = TopicPartition::new(&topic, 7);
    assert!(matches!(
        consumer.pause(&[stranger]),
        Err(ClientError::State(_))
    ));
}

#[tokio::test]
async fn a_deleted_topics_committed_offsets_go_with_it() {
    let broker = TestBroker::start().await;
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    let doomed = broker.create_topic("admin-doomed", 2).await;
    let kept = broker.create_topic("admin-kept", 1).await;
    let group = broker.unique("admin-deleted-topic");
    let offsets = BTreeMap::from([
        (TopicPartition::new(&doomed, 0), 3),
        (TopicPartition::new(&doomed, 1), 4),
        (TopicPartition::new(&kept, 0), 5),
    ]);
    admin.alter_group_offsets(&group, &offsets).await.unwrap();
    assert_eq!(admin.committed_offsets(&group).await.unwrap(), offsets);
    admin.delete_topics(&[&doomed]).await.unwrap();
    // Kafka deletes them shortly after it answers; eddy before.
    let left = BTreeMap::from([(TopicPartition::new(&kept, 0), 5)]);
    wait_until(
        Duration::from_secs(30),
        "the deleted topic's offsets stay",
        async || admin.committed_offsets(&group).await.unwrap() == left,
    )
    .await;
}
