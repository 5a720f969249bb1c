//! eddy's producer against a real broker (embedded, or the one `EDDY_TEST_BOOTSTRAP` names):
//! offsets and partitions of acknowledged records, the Java client's key partitioning,
//! batching, compression, acks, back-pressure, and idempotence across lost connections.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use eddy::client::{Acks, Admin, OffsetSpec, Producer, ProducerConfig, ProducerRecord};
use eddy_core::log::{partition_for_key, TopicPartition};
use eddy_core::wire::compression::Compression;
use eddy_tests::TestBroker;

async fn topic(broker: &TestBroker, name: &str, partitions: i32) -> (Admin, String) {
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    (admin, broker.create_topic(name, partitions).await)
}

async fn ends(admin: &Admin, topic: &str, partitions: i32) -> Vec<i64> {
    let all: Vec<_> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    let latest = admin.list_offsets(&all, OffsetSpec::Latest).await.unwrap();
    latest.values().copied().collect()
}

#[tokio::test]
async fn keyed_records_land_where_the_java_client_puts_them_with_dense_offsets() {
    let broker = TestBroker::start().await;
    let (admin, topic) = topic(&broker, "orders", 6).await;
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    let mut deliveries = Vec::new();
    for i in 0..5_000 {
        let key = format!("order-{}", i % 97);
        let record = ProducerRecord::new(&topic, format!("event {i}")).key(key.clone());
        deliveries.push((key, producer.send(record).await.unwrap()));
    }
    let mut offsets: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for (key, delivery) in deliveries {
        let written = delivery.await.unwrap();
        assert_eq!(
            written.partition,
            partition_for_key(key.as_bytes(), 6),
            "{key}"
        );
        offsets
            .entry(written.partition)
            .or_default()
            .push(written.offset);
    }
    // Per partition, offsets 0.. in the order the records were sent.
    for (partition, written) in &offsets {
        let expected: Vec<i64> = (0..written.len() as i64).collect();
        assert_eq!(written, &expected, "partition {partition}");
    }
    let counts: Vec<i64> = (0..6)
        .map(|p| offsets.get(&p).map_or(0, |o| o.len() as i64))
        .collect();
    assert_eq!(ends(&admin, &topic, 6).await, counts);
}

#[tokio::test]
async fn every_compression_and_acks_setting_writes_every_record() {
    let broker = TestBroker::start().await;
    let (admin, topic) = topic(&broker, "codecs", 2).await;
    let settings = [
        (Compression::None, Acks::All, true),
        (Compression::Gzip, Acks::All, true),
        (Compression::Snappy, Acks::Leader, false),
        (Compression::Lz4, Acks::All, true),
        (Compression::Zstd, Acks::None, false),
    ];
    let mut sent = 0;
    for (compression, acks, idempotence) in settings {
        let config = ProducerConfig::new(broker.bootstrap())
            .compression(compression)
            .acks(acks)
            .idempotence(idempotence);
        let producer = Producer::new(config).unwrap();
        let mut deliveries = Vec::new();
        for i in 0..1_000 {
            let record = ProducerRecord::new(&topic, vec![b'x'; i % 300]).partition(i as i32 % 2);
            deliveries.push(producer.send(record).await.unwrap());
        }
        for d in deliveries {
            let written = d.await.unwrap();
            assert_eq!(written.offset < 0, acks == Acks::None, "{compression:?}");
        }
        producer.close().await.unwrap();
        sent += 1_000;
    }
    // acks=0 learns nothing: wait for its records to be written.
    for _ in 0..100 {
        if ends(&admin, &topic, 2).await.iter().sum::<i64>() == sent {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ends(&admin, &topic, 2).await, vec![sent / 2, sent / 2]);
}

#[tokio::test]
async fn records_without_keys_stick_to_a_partition_per_batch() {
    let broker = TestBroker::start().await;
    let (_admin, topic) = topic(&broker, "sticky", 4).await;
    let config = ProducerConfig::new(broker.bootstrap())
        .batch_size(1_000)
        .linger(Duration::from_secs(5));
    let producer = Producer::new(config).unwrap();
    let mut partitions = Vec::new();
    let mut deliveries = Vec::new();
    for _ in 0..400 {
        deliveries.push(
            producer
                .send(ProducerRecord::new(&topic, vec![b'v'; 40]))
                .await
                .unwrap(),
        );
    }
    producer.flush().await.unwrap();
    for d in deliveries {
        partitions.push(d.await.unwrap().partition);
    }
    // Runs of one partition, each about a batch (1,000 bytes: ~15 records), and more than
    // one partition used.
    let runs = partitions.chunk_by(|a, b| a == b).count();
    assert!(runs > 4 && runs < 100, "{runs} runs");
    assert!(partitions.iter().collect::<BTreeSet<_>>().len() > 1);
}

#[tokio::test]
async fn a_full_buffer_makes_send_wait_instead_of_growing() {
    let broker = TestBroker::start().await;
    let (admin, topic) = topic(&broker, "pressure", 1).await;
    let config = ProducerConfig::new(broker.bootstrap())
        .buffer_memory(1 << 20)
        .batch_size(64 * 1024);
    let producer = Producer::new(config).unwrap();
    // 40 MB through a 1 MB buffer: send waits for acknowledgements to make room.
    let value = vec![b'p'; 10_000];
    let mut last = None;
    for _ in 0..4_000 {
        last = Some(
            producer
                .send(ProducerRecord::new(&topic, value.clone()))
                .await
                .unwrap(),
        );
    }
    last.unwrap().await.unwrap();
    producer.close().await.unwrap();
    assert_eq!(ends(&admin, &topic, 1).await, vec![4_000]);
    // A record larger than a request is refused at once.
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    let too_big = producer
        .send(ProducerRecord::new(&topic, vec![0u8; 2 << 20]))
        .await;
    assert!(too_big.is_err());
}
