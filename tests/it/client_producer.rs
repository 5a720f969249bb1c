//! eddy's producer against a real broker (embedded, or the one `EDDY_TEST_BOOTSTRAP` names):
//! offsets and partitions of acknowledged records, the Java client's key partitioning,
//! batching, compression, acks, back-pressure, sending many records at once, and idempotence
//! across lost connections.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use eddy::client::{
    Acks, Admin, ClientError, Consumer, ConsumerConfig, OffsetReset, OffsetSpec, Outgoing,
    Producer, ProducerConfig, ProducerRecord, RecordParts,
};
use eddy_core::log::{partition_for_key, TopicPartition};
use eddy_core::wire::compression::Compression;
use eddy_tests::{wait_until, TestBroker};

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
    wait_until(Duration::from_secs(10), "not all written", async || {
        ends(&admin, &topic, 2).await.iter().sum::<i64>() == sent
    })
    .await;
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

#[tokio::test]
async fn send_all_writes_every_record_in_order_with_one_delivery_per_batch() {
    let broker = TestBroker::start().await;
    let (admin, topic) = topic(&broker, "many", 3).await;
    // Small batches and a small buffer: the records span many batches and chunks, and
    // the call waits for memory as `send` does.
    let config = ProducerConfig::new(broker.bootstrap())
        .batch_size(4 * 1024)
        .buffer_memory(1 << 20);
    let producer = Producer::new(config).unwrap();
    let records: Vec<ProducerRecord> = (0..60_000)
        .map(|i| {
            let record =
                ProducerRecord::new(&topic, format!("value {i}")).key(format!("key-{}", i % 101));
            // Some with a partition of their own, some with a timestamp of their own.
            let record = if i % 7 == 0 {
                record.partition(2)
            } else {
                record
            };
            if i % 5 == 0 {
                record.timestamp(1_700_000_000_000 + i64::from(i))
            } else {
                record
            }
        })
        .collect();
    let sent = producer.send_all(records.clone()).await.unwrap();
    assert!(sent.refused.is_empty());
    assert!(
        sent.deliveries.len() > 3 && sent.deliveries.len() < 6_000,
        "{} deliveries for 60,000 records",
        sent.deliveries.len()
    );
    // Where each record should land, and in which order within its partition.
    let mut expected: BTreeMap<i32, Vec<&ProducerRecord>> = BTreeMap::new();
    for record in &records {
        let partition = record
            .partition
            .unwrap_or_else(|| partition_for_key(record.key.as_deref().unwrap(), 3));
        expected.entry(partition).or_default().push(record);
    }
    // The last delivery of each partition reaches its last record.
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    for delivery in sent.deliveries {
        let written = delivery.await.unwrap();
        let reached = last.entry(written.partition).or_insert(-1);
        assert!(
            written.offset > *reached,
            "deliveries in order per partition"
        );
        *reached = written.offset;
    }
    for (partition, records) in &expected {
        assert_eq!(
            last[partition],
            records.len() as i64 - 1,
            "partition {partition}"
        );
    }
    let counts: Vec<i64> = (0..3).map(|p| expected[&p].len() as i64).collect();
    assert_eq!(ends(&admin, &topic, 3).await, counts);
    // Read back: every record, in the order sent per partition, timestamps kept.
    let mut consumer = Consumer::new(
        ConsumerConfig::new(broker.bootstrap()).auto_offset_reset(OffsetReset::Earliest),
    )
    .unwrap();
    let partitions: Vec<_> = (0..3).map(|p| TopicPartition::new(&topic, p)).collect();
    consumer.assign(&partitions).unwrap();
    let mut read: BTreeMap<i32, Vec<_>> = BTreeMap::new();
    let mut total = 0;
    wait_until(Duration::from_secs(60), "not every record", async || {
        for record in consumer.poll(Duration::from_millis(200)).await.unwrap() {
            total += 1;
            read.entry(record.partition).or_default().push(record);
        }
        total >= records.len()
    })
    .await;
    for (partition, sent) in &expected {
        let got = &read[partition];
        assert_eq!(got.len(), sent.len(), "partition {partition}");
        for (offset, (got, sent)) in got.iter().zip(sent).enumerate() {
            assert_eq!(got.offset, offset as i64);
            assert_eq!(got.key, sent.key);
            assert_eq!(got.value, sent.value);
            if let Some(timestamp) = sent.timestamp {
                assert_eq!(got.timestamp, timestamp);
            }
        }
    }
}

#[tokio::test]
async fn send_all_gives_back_the_records_it_refuses_and_sends_the_rest() {
    let broker = TestBroker::start().await;
    let (admin, topic) = topic(&broker, "some-too-big", 1).await;
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    let records = vec![
        ProducerRecord::new(&topic, "small"),
        ProducerRecord::new(&topic, vec![0u8; 2 << 20]).key("too big"),
        ProducerRecord::new(&topic, "small too"),
    ];
    let sent = producer.send_all(records).await.unwrap();
    assert_eq!(sent.refused.len(), 1);
    let (refused, error) = &sent.refused[0];
    assert_eq!(refused.key.as_deref(), Some(&b"too big"[..]));
    assert!(
        matches!(error, ClientError::RecordTooLarge { .. }),
        "{error}"
    );
    let reached = sent.deliveries.into_iter().last().unwrap().await.unwrap();
    assert_eq!(reached.offset, 1);
    assert_eq!(ends(&admin, &topic, 1).await, vec![2]);
    // Records that together need more than the whole buffer go in turns.
    let mut tight = ProducerConfig::new(broker.bootstrap()).buffer_memory(1 << 20);
    tight.max_block = Duration::from_secs(5);
    let producer = Producer::new(tight).unwrap();
    let large: Vec<_> = (0..3)
        .map(|_| ProducerRecord::new(&topic, vec![1u8; 600_000]))
        .collect();
    let sent = producer.send_all(large).await.unwrap();
    assert!(sent.refused.is_empty());
    for delivery in sent.deliveries {
        delivery.await.unwrap();
    }
    assert_eq!(ends(&admin, &topic, 1).await, vec![5]);
    // Nothing to send is no error, even where sending would be one.
    let transactional = Producer::new(
        ProducerConfig::new(broker.bootstrap()).transactional_id(broker.unique("txn")),
    )
    .unwrap();
    let none = transactional
        .send_all(Vec::<ProducerRecord>::new())
        .await
        .unwrap();
    assert!(none.deliveries.is_empty() && none.refused.is_empty());
    let outside = transactional
        .send_all(vec![ProducerRecord::new(&topic, "outside a transaction")])
        .await;
    assert!(outside.is_err());
}

/// A record kept as ranges of one buffer the test owns, as a stream task keeps its output.
struct View<'a> {
    topic: &'a str,
    buffer: &'a [u8],
    key: std::ops::Range<usize>,
    value: Option<std::ops::Range<usize>>,
}

impl Outgoing for View<'_> {
    fn parts(&self) -> RecordParts<'_> {
        RecordParts {
            topic: self.topic,
            partition: None,
            key: Some(&self.buffer[self.key.clone()]),
            value: self.value.clone().map(|v| &self.buffer[v]),
            headers: &[],
            timestamp: Some(1_700_000_000_000),
        }
    }
}

#[tokio::test]
async fn send_all_sends_records_borrowed_from_the_callers_buffer_and_gives_back_refused_ones() {
    let broker = TestBroker::start().await;
    let (admin, topic) = topic(&broker, "borrowed", 2).await;
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    // Keys and values side by side in one buffer; a tombstone; one value too large.
    let mut buffer = Vec::new();
    let mut views = Vec::new();
    for i in 0..1_000u32 {
        let key = buffer.len()..buffer.len() + 4;
        buffer.extend_from_slice(&i.to_be_bytes());
        let value = match i {
            7 => None,
            500 => {
                let start = buffer.len();
                buffer.resize(start + (2 << 20), b'x');
                Some(start..buffer.len())
            }
            _ => {
                let start = buffer.len();
                buffer.extend_from_slice(format!("value {i}").as_bytes());
                Some(start..buffer.len())
            }
        };
        views.push((key, value));
    }
    let records = views.iter().map(|(key, value)| View {
        topic: &topic,
        buffer: &buffer,
        key: key.clone(),
        value: value.clone(),
    });
    let sent = producer.send_all(records).await.unwrap();
    assert_eq!(sent.refused.len(), 1);
    let (refused, error) = &sent.refused[0];
    assert_eq!(refused.parts().key, Some(&500u32.to_be_bytes()[..]));
    assert!(
        matches!(error, ClientError::RecordTooLarge { .. }),
        "{error}"
    );
    for delivery in sent.deliveries {
        delivery.await.unwrap();
    }
    assert_eq!(ends(&admin, &topic, 2).await.iter().sum::<i64>(), 999);
    let mut consumer = Consumer::new(
        ConsumerConfig::new(broker.bootstrap()).auto_offset_reset(OffsetReset::Earliest),
    )
    .unwrap();
    let partitions: Vec<_> = (0..2).map(|p| TopicPartition::new(&topic, p)).collect();
    consumer.assign(&partitions).unwrap();
    let mut read = BTreeMap::new();
    wait_until(Duration::from_secs(20), "not 999 keys", async || {
        for record in consumer.poll(Duration::from_millis(200)).await.unwrap() {
            let key = u32::from_be_bytes(record.key.as_deref().unwrap().try_into().unwrap());
            assert_eq!(record.partition, partition_for_key(&key.to_be_bytes(), 2));
            assert_eq!(record.timestamp, 1_700_000_000_000);
            read.insert(key, record.value);
        }
        read.len() >= 999
    })
    .await;
    assert_eq!(read.len(), 999);
    assert_eq!(read[&7], None, "the tombstone");
    assert_eq!(read[&8].as_deref(), Some(&b"value 8"[..]));
    assert!(!read.contains_key(&500));
}
