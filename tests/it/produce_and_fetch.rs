//! Produce and fetch semantics seen on the wire: acks=0 gets no response, a fetch waits for
//! data up to max_wait_ms and wakes as soon as it arrives, byte limits hold except for the
//! first batch (KIP-74), and bad offsets or topics get Kafka's error codes.

use std::time::Duration;

use bytes::Bytes;
use eddy::embedded::EmbeddedBroker;
use eddy_core::log::Record;
use eddy_core::wire::batch::{BatchBuilder, Batches};
use eddy_core::wire::compression::Compression;
use eddy_tests::WireConnection;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiVersionsRequest, CreateTopicsRequest, FetchRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str("events"))
}

async fn setup() -> (EmbeddedBroker, WireConnection) {
    let broker = EmbeddedBroker::start().await.unwrap();
    let mut conn = WireConnection::connect(&broker.bootstrap()).await.unwrap();
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic())
        .with_num_partitions(2)
        .with_replication_factor(1)]);
    assert_eq!(
        conn.request(7, &create).await.unwrap().topics[0].error_code,
        0
    );
    (broker, conn)
}

/// A batch of `count` records of 100-byte values.
fn batch(count: usize) -> Bytes {
    let mut builder = BatchBuilder::new(Compression::None);
    for i in 0..count {
        builder.append(&Record::new(format!("k{i}"), vec![b'x'; 100], i as i64));
    }
    Bytes::from(builder.build(0).unwrap())
}

fn produce(acks: i16, partition: i32, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic())
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

fn fetch(partitions: &[(i32, i64, i32)], max_bytes: i32, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic())
            .with_partitions(
                partitions
                    .iter()
                    .map(|&(p, offset, max)| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(max)
                    })
                    .collect(),
            )])
}

#[tokio::test]
async fn acks_zero_gets_no_response_and_the_next_request_is_answered() {
    let (broker, mut conn) = setup().await;
    // No response comes for acks=0; the ApiVersions after it gets its own.
    conn.request_without_response(9, &produce(0, 0, batch(3)))
        .await
        .unwrap();
    let versions = conn
        .request(3, &ApiVersionsRequest::default())
        .await
        .unwrap();
    assert_eq!(versions.error_code, 0);
    // The records were written and become durable, so visible, all the same: a fetch waiting
    // for them gets them.
    let fetched = conn
        .request(12, &fetch(&[(0, 0, 1 << 20)], 1 << 20, 10_000))
        .await
        .unwrap();
    assert_eq!(fetched.responses[0].partitions[0].high_watermark, 3);
    broker.shutdown().await.unwrap();
}

/// On paused time (the broker runs in the test's runtime): the waits are measured on the
/// broker's own clock, exactly, and cost nothing.
#[tokio::test(start_paused = true)]
async fn a_fetch_at_the_end_waits_and_wakes_when_data_arrives() {
    let (broker, mut conn) = setup().await;
    let mut producer = WireConnection::connect(&broker.bootstrap()).await.unwrap();
    let started = Instant::now();
    let waiting = tokio::spawn(async move {
        let response = conn
            .request(12, &fetch(&[(0, 0, 1 << 20)], 1 << 20, 10_000))
            .await
            .unwrap();
        (response, started.elapsed())
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    producer
        .request(9, &produce(-1, 0, batch(5)))
        .await
        .unwrap();
    let (response, waited) = waiting.await.unwrap();
    let records = response.responses[0].partitions[0].records.clone().unwrap();
    assert!(
        !records.is_empty(),
        "the fetch returned without the new records"
    );
    assert!(
        waited >= Duration::from_secs(3),
        "it did not wait for data: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(10),
        "it slept to its deadline: {waited:?}"
    );

    // With nothing arriving it answers empty once max_wait_ms has passed.
    let started = Instant::now();
    let empty = producer
        .request(12, &fetch(&[(1, 0, 1 << 20)], 1 << 20, 4_000))
        .await
        .unwrap();
    assert!(empty.responses[0].partitions[0]
        .records
        .as_ref()
        .unwrap()
        .is_empty());
    let waited = started.elapsed();
    assert!(
        (Duration::from_secs(4)..Duration::from_secs(5)).contains(&waited),
        "{waited:?}"
    );
    broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn byte_limits_hold_except_for_the_first_batch() {
    let (broker, mut conn) = setup().await;
    for _ in 0..10 {
        conn.request(9, &produce(-1, 0, batch(20))).await.unwrap(); // ~2.3 KB per batch
        conn.request(9, &produce(-1, 1, batch(20))).await.unwrap();
    }
    let batch_size = batch(20).len() as i32;
    // partition_max_bytes below one batch: still one whole batch (KIP-74).
    let one = conn
        .request(12, &fetch(&[(0, 0, 10)], 1 << 20, 0))
        .await
        .unwrap();
    let records = one.responses[0].partitions[0].records.clone().unwrap();
    assert_eq!(records.len() as i32, batch_size);
    // Three and a half batches' worth: three whole batches.
    let three = conn
        .request(12, &fetch(&[(0, 0, batch_size * 7 / 2)], 1 << 20, 0))
        .await
        .unwrap();
    let records = three.responses[0].partitions[0].records.clone().unwrap();
    assert_eq!(Batches::new(&records).count(), 3);
    // The response's max_bytes caps the sum over partitions, but the first batch goes anyway.
    let capped = conn
        .request(
            12,
            &fetch(&[(0, 0, 1 << 20), (1, 0, 1 << 20)], batch_size * 2, 0),
        )
        .await
        .unwrap();
    let sizes: Vec<usize> = capped.responses[0]
        .partitions
        .iter()
        .map(|p| p.records.as_ref().unwrap().len())
        .collect();
    assert_eq!(sizes, vec![2 * batch_size as usize, 0]);
    assert_eq!(
        capped.responses[0].partitions[1].high_watermark, 200,
        "offsets are still reported"
    );
    broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn bad_offsets_and_topics_get_kafkas_error_codes() {
    let (broker, mut conn) = setup().await;
    conn.request(9, &produce(-1, 0, batch(4))).await.unwrap();
    let response = conn
        .request(12, &fetch(&[(0, 99, 1 << 20), (0, 4, 1 << 20)], 1 << 20, 0))
        .await
        .unwrap();
    assert_eq!(
        response.responses[0].partitions[0].error_code, 1,
        "OFFSET_OUT_OF_RANGE"
    );
    assert_eq!(
        response.responses[0].partitions[1].error_code, 0,
        "the end is in range"
    );
    let unknown = conn
        .request(12, &fetch(&[(7, 0, 1 << 20)], 1 << 20, 0))
        .await
        .unwrap();
    assert_eq!(
        unknown.responses[0].partitions[0].error_code, 3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    let produced = conn.request(9, &produce(-1, 9, batch(1))).await.unwrap();
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 3);
    let bad_acks = conn.request(9, &produce(2, 0, batch(1))).await.unwrap();
    assert_eq!(
        bad_acks.responses[0].partition_responses[0].error_code, 21,
        "INVALID_REQUIRED_ACKS"
    );
    broker.shutdown().await.unwrap();
}
