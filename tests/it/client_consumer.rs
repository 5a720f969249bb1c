//! eddy's consumer against a real broker (embedded, or the one `EDDY_TEST_BOOTSTRAP` names):
//! assign, seek and positions, `auto.offset.reset`, `max.poll.records`, the record stream,
//! committed offsets, and `read_committed` over transactions of eddy's own producer.

use std::collections::BTreeMap;
use std::time::Duration;

use eddy::client::{
    ClientError, Consumer, ConsumerConfig, ConsumerRecord, IsolationLevel, OffsetReset, Producer,
    ProducerConfig, ProducerRecord,
};
use eddy_core::log::TopicPartition;
use eddy_tests::{wait_until, TestBroker};
use futures::StreamExt;

/// Sends `count` records `key-i`/`value-i` round-robin over the partitions; returns them.
async fn fill(
    broker: &TestBroker,
    topic: &str,
    partitions: i32,
    count: usize,
) -> Vec<ProducerRecord> {
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    let mut sent = Vec::new();
    for i in 0..count {
        let record = ProducerRecord::new(topic, format!("value-{i}"))
            .key(format!("key-{i}"))
            .partition(i as i32 % partitions)
            .header("n", i.to_string())
            .timestamp(1_700_000_000_000 + i as i64);
        producer.send(record.clone()).await.unwrap();
        sent.push(record);
    }
    producer.close().await.unwrap();
    sent
}

/// Polls until `count` records arrived (or fails after a while).
async fn read(consumer: &mut Consumer, count: usize) -> Vec<ConsumerRecord> {
    let mut records = Vec::new();
    wait_until(
        Duration::from_secs(40),
        format!("not {count} records"),
        async || {
            records.extend(consumer.poll(Duration::from_millis(200)).await.unwrap());
            records.len() >= count
        },
    )
    .await;
    assert_eq!(records.len(), count, "records read");
    records
}

fn config(broker: &TestBroker) -> ConsumerConfig {
    ConsumerConfig::new(broker.bootstrap()).auto_offset_reset(OffsetReset::Earliest)
}

#[tokio::test]
async fn assigned_partitions_are_read_in_order_with_keys_values_headers_and_timestamps() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("assigned", 3).await;
    let sent = fill(&broker, &topic, 3, 300).await;
    let mut consumer = Consumer::new(config(&broker).max_poll_records(7)).unwrap();
    let partitions: Vec<_> = (0..3).map(|p| TopicPartition::new(&topic, p)).collect();
    consumer.assign(&partitions).unwrap();
    let mut records = Vec::new();
    wait_until(Duration::from_secs(40), "not 300 records", async || {
        let batch = consumer.poll(Duration::from_millis(200)).await.unwrap();
        assert!(batch.len() <= 7, "max.poll.records");
        records.extend(batch);
        records.len() >= 300
    })
    .await;
    assert_eq!(records.len(), 300);
    for p in 0..3 {
        let mine: Vec<&ConsumerRecord> = records.iter().filter(|r| r.partition == p).collect();
        let offsets: Vec<i64> = mine.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, (0..100).collect::<Vec<i64>>());
        for (r, s) in mine
            .iter()
            .zip(sent.iter().filter(|s| s.partition == Some(p)))
        {
            assert_eq!(r.key, s.key);
            assert_eq!(r.value, s.value);
            assert_eq!(r.timestamp, s.timestamp.unwrap());
            assert_eq!(r.headers, s.headers);
            assert_eq!(&*r.topic, topic);
        }
    }
    for tp in &partitions {
        assert_eq!(consumer.position(tp).await.unwrap(), 100);
    }
    // Seek back: the same records again, from there.
    consumer.seek(&partitions[1], 95).unwrap();
    let again = read(&mut consumer, 5).await;
    assert!(again.iter().all(|r| r.partition == 1));
    assert_eq!(
        again.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [95, 96, 97, 98, 99]
    );
    consumer.seek_to_beginning(&partitions[..1]).await.unwrap();
    assert_eq!(consumer.position(&partitions[0]).await.unwrap(), 0);
    consumer.seek_to_end(&partitions[..1]).await.unwrap();
    assert_eq!(consumer.position(&partitions[0]).await.unwrap(), 100);
}

#[tokio::test]
async fn offset_reset_earliest_latest_and_none() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("reset", 1).await;
    fill(&broker, &topic, 1, 10).await;
    let tp = TopicPartition::new(&topic, 0);
    let position = |reset| {
        let tp = tp.clone();
        let bootstrap = broker.bootstrap().to_string();
        async move {
            let mut consumer =
                Consumer::new(ConsumerConfig::new(&bootstrap).auto_offset_reset(reset)).unwrap();
            consumer.assign(std::slice::from_ref(&tp)).unwrap();
            consumer.position(&tp).await
        }
    };
    assert_eq!(position(OffsetReset::Earliest).await.unwrap(), 0);
    assert_eq!(position(OffsetReset::Latest).await.unwrap(), 10);
    assert!(matches!(
        position(OffsetReset::None).await,
        Err(ClientError::State(_))
    ));
    // With a committed offset, the reset policy does not matter.
    let group = broker.unique("reset-group");
    let mut consumer = Consumer::new(
        ConsumerConfig::new(broker.bootstrap())
            .group_id(&group)
            .auto_offset_reset(OffsetReset::None),
    )
    .unwrap();
    consumer.assign(std::slice::from_ref(&tp)).unwrap();
    consumer
        .commit(&BTreeMap::from([(tp.clone(), 4)]))
        .await
        .unwrap();
    assert_eq!(consumer.position(&tp).await.unwrap(), 4);
    assert_eq!(
        consumer.committed(std::slice::from_ref(&tp)).await.unwrap()[&tp],
        4
    );
}

#[tokio::test]
async fn the_stream_yields_every_record_then_waits_for_more() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("stream", 2).await;
    fill(&broker, &topic, 2, 50).await;
    let mut consumer = Consumer::new(config(&broker)).unwrap();
    consumer
        .assign(&[
            TopicPartition::new(&topic, 0),
            TopicPartition::new(&topic, 1),
        ])
        .unwrap();
    let records: Vec<_> = consumer.stream().take(50).collect().await;
    let mut values: Vec<String> = records
        .into_iter()
        .map(|r| String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap())
        .collect();
    values.sort_by_key(|v| v[6..].parse::<u32>().unwrap());
    assert_eq!(
        values,
        (0..50).map(|i| format!("value-{i}")).collect::<Vec<_>>()
    );
    // Nothing more: a poll comes back empty when its time is up.
    assert!(consumer
        .poll(Duration::from_millis(300))
        .await
        .unwrap()
        .is_empty());
}

/// A partition with records still to fetch is not kept waiting behind a fetch of caught-up
/// partitions: with `fetch.max.wait.ms` far beyond a poll's timeout, every poll hands out
/// records until all are read.
#[tokio::test]
async fn a_partition_behind_is_not_held_up_by_a_fetch_of_caught_up_partitions() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("uneven", 2).await;
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    // One record on partition 0, which is read first; batches of 5 records on partition 1.
    producer
        .send(ProducerRecord::new(&topic, "alone").partition(0))
        .await
        .unwrap();
    for batch in 0..12 {
        let records =
            (0..5).map(|i| ProducerRecord::new(&topic, format!("value-{batch}-{i}")).partition(1));
        producer.send_all(records).await.unwrap();
        producer.flush().await.unwrap();
    }
    producer.close().await.unwrap();
    let mut config = config(&broker).max_poll_records(1);
    // Each answer carries one batch, and polls take one record: partition 1 is fetched
    // many times, and often has two answers waiting while partition 0 is at its end.
    config.max_partition_fetch_bytes = 1;
    config.fetch_max_wait = Duration::from_secs(60);
    let mut consumer = Consumer::new(config).unwrap();
    consumer
        .assign(&[
            TopicPartition::new(&topic, 0),
            TopicPartition::new(&topic, 1),
        ])
        .unwrap();
    let mut read = 0;
    while read < 61 {
        let records = consumer.poll(Duration::from_secs(5)).await.unwrap();
        assert!(
            !records.is_empty(),
            "a poll came back empty after {read} of 61 records"
        );
        read += records.len();
        // Work on them a little: the next answer arrives meanwhile.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(read, 61);
}

/// Offsets commit while a fetch waits at the broker for new records: the coordinator's
/// requests do not queue behind it (a broker answers one connection's requests in order).
#[tokio::test]
async fn a_commit_does_not_wait_behind_a_fetch_held_at_the_broker() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("held", 1).await;
    fill(&broker, &topic, 1, 5).await;
    let mut config = config(&broker).group_id(format!("{topic}-group"));
    config.fetch_max_wait = Duration::from_secs(60);
    let mut consumer = Consumer::new(config).unwrap();
    let tp = TopicPartition::new(&topic, 0);
    consumer.assign(std::slice::from_ref(&tp)).unwrap();
    read(&mut consumer, 5).await;
    // Caught up: a fetch now waits at the broker for records that do not come.
    assert!(consumer
        .poll(Duration::from_millis(100))
        .await
        .unwrap()
        .is_empty());
    let offsets = BTreeMap::from([(tp.clone(), 5)]);
    tokio::time::timeout(Duration::from_secs(20), consumer.commit(&offsets))
        .await
        .expect("the commit waited behind the fetch")
        .unwrap();
    assert_eq!(
        consumer.committed(std::slice::from_ref(&tp)).await.unwrap()[&tp],
        5
    );
}

#[tokio::test]
async fn read_committed_sees_committed_transactions_only() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("isolation", 2).await;
    let producer = Producer::new(
        ProducerConfig::new(broker.bootstrap()).transactional_id(broker.unique("isolation-txn")),
    )
    .unwrap();
    producer.init_transactions().await.unwrap();
    for (round, commit) in [(0, true), (1, false), (2, true)] {
        producer.begin_transaction().unwrap();
        for i in 0..20 {
            let value = format!("{round}-{i}");
            producer
                .send(ProducerRecord::new(&topic, value).partition(i % 2))
                .await
                .unwrap();
        }
        if commit {
            producer.commit_transaction().await.unwrap();
        } else {
            producer.flush().await.unwrap();
            producer.abort_transaction().await.unwrap();
        }
    }
    // A transaction left open holds read_committed back, not read_uncommitted.
    producer.begin_transaction().unwrap();
    producer
        .send(ProducerRecord::new(&topic, "open").partition(0))
        .await
        .unwrap();
    producer.flush().await.unwrap();
    let partitions = [
        TopicPartition::new(&topic, 0),
        TopicPartition::new(&topic, 1),
    ];
    let values = |records: Vec<ConsumerRecord>| -> Vec<String> {
        let mut v: Vec<String> = records
            .into_iter()
            .map(|r| String::from_utf8(r.value.unwrap().to_vec()).unwrap())
            .collect();
        v.sort();
        v
    };
    let mut committed =
        Consumer::new(config(&broker).isolation_level(IsolationLevel::ReadCommitted)).unwrap();
    committed.assign(&partitions).unwrap();
    let seen = values(read(&mut committed, 40).await);
    assert!(
        seen.iter()
            .all(|v| v.starts_with("0-") || v.starts_with("2-")),
        "{seen:?}"
    );
    assert!(committed
        .poll(Duration::from_millis(300))
        .await
        .unwrap()
        .is_empty());
    let mut everything = Consumer::new(config(&broker)).unwrap();
    everything.assign(&partitions).unwrap();
    let seen = values(read(&mut everything, 61).await);
    assert_eq!(seen.iter().filter(|v| v.starts_with("1-")).count(), 20);
    assert!(seen.contains(&"open".to_string()));
    producer.abort_transaction().await.unwrap();
}

#[tokio::test]
async fn commit_async_runs_apart_from_the_consumer() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("async-commit", 1).await;
    fill(&broker, &topic, 1, 5).await;
    let group = broker.unique("async-commit-group");
    let tp = TopicPartition::new(&topic, 0);
    let mut consumer = Consumer::new(config(&broker).group_id(&group)).unwrap();
    consumer.assign(std::slice::from_ref(&tp)).unwrap();
    read(&mut consumer, 5).await;
    let commit = tokio::spawn(consumer.commit_async(&BTreeMap::from([(tp.clone(), 5)])));
    commit.await.unwrap().unwrap();
    assert_eq!(
        consumer.committed(std::slice::from_ref(&tp)).await.unwrap()[&tp],
        5
    );
}
