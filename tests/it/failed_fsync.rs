//! A failed fsync takes its partition offline until the broker restarts, as Kafka takes a
//! failed log directory offline: the produce that met it and every later produce and fetch
//! of that partition answer KAFKA_STORAGE_ERROR (even once the disk works again, since a
//! retried fsync could succeed without the pages the kernel dropped), other partitions go on,
//! and after a restart the partition serves what reached the disk and takes appends again.

use bytes::Bytes;
use eddy::client::{Admin, NewTopic};
use eddy::embedded::EmbeddedBroker;
use eddy_core::log::Record;
use eddy_core::wire::batch::BatchBuilder;
use eddy_core::wire::compression::Compression;
use eddy_tests::{fetch_from_start, WireConnection};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

const STORAGE_ERROR: i16 = 56;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn batch(value: &'static str) -> Bytes {
    let mut builder = BatchBuilder::new(Compression::None);
    builder.append(&Record::new("k", value, 0));
    Bytes::from(builder.build(0).unwrap())
}

/// Produces one record to partition 0 of `topic` with acks=all: (error code, base offset).
async fn produce(bootstrap: &str, topic: &str, value: &'static str) -> (i16, i64) {
    let mut conn = WireConnection::connect(bootstrap).await.unwrap();
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(text(topic)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch(value)))])]);
    let response = conn.request(9, &request).await.unwrap();
    let answer = &response.responses[0].partition_responses[0];
    (answer.error_code, answer.base_offset)
}

/// Fetches partition 0 of `topic` from offset 0: (error code, high watermark).
async fn fetch(bootstrap: &str, topic: &str) -> (i16, i64) {
    let mut conn = WireConnection::connect(bootstrap).await.unwrap();
    let response = conn.request(12, &fetch_from_start(topic)).await.unwrap();
    let answer = &response.responses[0].partitions[0];
    (answer.error_code, answer.high_watermark)
}

#[tokio::test]
async fn a_failed_fsync_takes_the_partition_offline_until_the_broker_restarts() {
    assert_eq!(ResponseError::KafkaStorageError.code(), STORAGE_ERROR);
    let dir = tempfile::tempdir().unwrap();
    let broker = EmbeddedBroker::builder(dir.path().to_path_buf())
        .start()
        .await
        .unwrap();
    let bootstrap = broker.bootstrap();
    let admin = Admin::connect(&bootstrap).await.unwrap();
    admin
        .create_topics(&[NewTopic::new("failing", 1), NewTopic::new("healthy", 1)])
        .await
        .unwrap();
    assert_eq!(produce(&bootstrap, "failing", "durable").await, (0, 0));

    broker.storage_faults().fail_fsyncs(true);
    assert_eq!(
        produce(&bootstrap, "failing", "unsure").await.0,
        STORAGE_ERROR
    );
    broker.storage_faults().fail_fsyncs(false);
    assert_eq!(
        produce(&bootstrap, "failing", "later").await.0,
        STORAGE_ERROR
    );
    assert_eq!(fetch(&bootstrap, "failing").await.0, STORAGE_ERROR);
    // Other partitions never met the failed fsync.
    assert_eq!(produce(&bootstrap, "healthy", "fine").await, (0, 0));
    assert_eq!(fetch(&bootstrap, "healthy").await, (0, 1));
    broker.shutdown().await.unwrap();

    let broker = EmbeddedBroker::builder(dir.path().to_path_buf())
        .start()
        .await
        .unwrap();
    let bootstrap = broker.bootstrap();
    // The record whose fsync failed did reach the disk here: it is served, and appends go on
    // after it.
    assert_eq!(fetch(&bootstrap, "failing").await, (0, 2));
    assert_eq!(produce(&bootstrap, "failing", "after").await, (0, 2));
    broker.shutdown().await.unwrap();
}
