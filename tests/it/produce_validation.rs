//! Batches whose records are not what their header says, against a real broker (embedded, or
//! the one `EDDY_TEST_BOOTSTRAP` names, as `.ci/run` does with Apache Kafka): each is refused
//! with Kafka's error code, and nothing of it is stored (the log end offset does not move).
//! Where eddy is deliberately stricter than Kafka (see the book's chapter on the log), the
//! check runs against the embedded broker only.

use bytes::Bytes;
use eddy::client::{Admin, NewTopic, OffsetSpec};
use eddy_core::log::{Record, TopicPartition};
use eddy_core::wire::batch::BatchBuilder;
use eddy_core::wire::compression::Compression;
use eddy_tests::{TestBroker, WireConnection};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

const INVALID_RECORD: i16 = 87;

fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

fn record(key: Option<&'static [u8]>, timestamp: i64) -> Record {
    Record {
        key: key.map(Bytes::from_static),
        value: Some(Bytes::from_static(b"value")),
        headers: Vec::new(),
        timestamp,
    }
}

fn batch_of(records: &[Record], codec: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(codec);
    for r in records {
        builder.append(r);
    }
    builder.build(0).unwrap()
}

/// Sets the record count and last offset delta a header claims.
fn claiming(mut batch: Vec<u8>, count: i32) -> Vec<u8> {
    batch[57..61].copy_from_slice(&count.to_be_bytes());
    batch[23..27].copy_from_slice(&(count - 1).to_be_bytes());
    resealed(batch)
}

/// Rewrites the CRC after a change, so that only the change is wrong.
fn resealed(mut batch: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// Produces `batch` to partition 0 of `topic` with acks=all: the partition's answer.
async fn produce(bootstrap: &str, topic: &str, batch: Vec<u8>) -> PartitionProduceResponse {
    let mut conn = WireConnection::connect(bootstrap).await.unwrap();
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(batch)))])]);
    let mut response = conn.request(9, &request).await.unwrap();
    response.responses.remove(0).partition_responses.remove(0)
}

async fn end_offset(admin: &Admin, topic: &str) -> i64 {
    let partition = TopicPartition::new(topic, 0);
    let ends = admin
        .list_offsets(std::slice::from_ref(&partition), OffsetSpec::Latest)
        .await
        .unwrap();
    ends[&partition]
}

/// A topic with `config` set, created for this test.
async fn topic(broker: &TestBroker, admin: &Admin, name: &str, config: &[(&str, &str)]) -> String {
    let name = broker.unique(name);
    let mut topic = NewTopic::new(&name, 1);
    for (key, value) in config {
        topic = topic.config(*key, *value);
    }
    admin.create_topics(&[topic]).await.unwrap();
    name
}

#[tokio::test]
async fn batches_whose_records_do_not_fill_them_are_refused_and_not_stored() {
    let broker = TestBroker::start().await;
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    let topic = topic(&broker, &admin, "framing", &[]).await;
    let now = now_ms();
    let good = || batch_of(&[record(Some(b"k"), now)], Compression::None);
    assert_eq!(
        produce(broker.bootstrap(), &topic, good()).await.error_code,
        0
    );

    let mut trailing = good();
    trailing.extend_from_slice(&[0, 0]);
    let length = i32::try_from(trailing.len() - 12).unwrap();
    trailing[8..12].copy_from_slice(&length.to_be_bytes());
    let mut past_the_end = batch_of(
        &[Record {
            value: None,
            ..record(Some(b"k"), now)
        }],
        Compression::None,
    );
    let at = past_the_end.len() - 2; // the value length: null, as zigzag 1
    past_the_end[at] = 40; // 20 bytes, past the record's end
    let refused = [
        ("a count of 2 over one record", claiming(good(), 2)),
        (
            "a count of 2^31-1 over one record",
            claiming(good(), i32::MAX),
        ),
        (
            "a compressed count of 2 over one record",
            claiming(batch_of(&[record(Some(b"k"), now)], Compression::Lz4), 2),
        ),
        ("bytes after the last record", resealed(trailing)),
        ("a value longer than its record", resealed(past_the_end)),
    ];
    for (what, batch) in refused {
        let answer = produce(broker.bootstrap(), &topic, batch).await;
        assert_eq!(answer.error_code, INVALID_RECORD, "{what}");
        assert_eq!(answer.base_offset, -1, "{what}");
    }
    assert_eq!(
        end_offset(&admin, &topic).await,
        1,
        "nothing refused was stored"
    );
    assert_eq!(
        produce(broker.bootstrap(), &topic, good())
            .await
            .base_offset,
        1
    );
}

#[tokio::test]
async fn records_a_topic_cannot_take_are_refused_one_by_one() {
    let broker = TestBroker::start().await;
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    let compacted = topic(
        &broker,
        &admin,
        "compacted",
        &[("cleanup.policy", "compact")],
    )
    .await;
    let plain = topic(&broker, &admin, "timestamps", &[]).await;
    let now = now_ms();

    let keyless = batch_of(
        &[record(Some(b"a"), now), record(None, now)],
        Compression::None,
    );
    let answer = produce(broker.bootstrap(), &compacted, keyless).await;
    assert_eq!(answer.error_code, INVALID_RECORD);
    let refused: Vec<i32> = answer.record_errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(
        refused,
        [1],
        "the keyless record, by its place in the batch"
    );

    let hour = 3_600_000;
    let future = batch_of(
        &[record(Some(b"a"), now), record(Some(b"b"), now + 2 * hour)],
        Compression::Gzip,
    );
    let answer = produce(broker.bootstrap(), &plain, future).await;
    assert_eq!(answer.error_code, ResponseError::InvalidTimestamp.code());
    let refused: Vec<i32> = answer.record_errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(refused, [1]);
    // Old timestamps are taken: message.timestamp.before.max.ms has no limit by default.
    let old = batch_of(
        &[
            record(Some(b"a"), now - 365 * 24 * hour),
            record(Some(b"b"), -5),
        ],
        Compression::None,
    );
    assert_eq!(produce(broker.bootstrap(), &plain, old).await.error_code, 0);
    assert_eq!(end_offset(&admin, &compacted).await, 0);
    assert_eq!(end_offset(&admin, &plain).await, 2);
}

#[tokio::test]
async fn eddy_refuses_offset_deltas_out_of_order_and_negative_lengths() {
    let broker = TestBroker::start().await;
    if !broker.is_embedded() {
        // Kafka takes both in uncompressed batches (the book lists this difference).
        return;
    }
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    let topic = topic(&broker, &admin, "strict", &[]).await;
    let now = now_ms();
    for codec in [Compression::None, Compression::Gzip] {
        let mut builder = BatchBuilder::new(codec);
        builder.append_at(0, &record(Some(b"a"), now));
        builder.append_at(2, &record(Some(b"b"), now));
        let mut batch = builder.build(0).unwrap();
        batch[23..27].copy_from_slice(&1i32.to_be_bytes());
        let answer = produce(broker.bootstrap(), &topic, resealed(batch)).await;
        assert_eq!(answer.error_code, INVALID_RECORD, "{codec:?}");
    }
    let mut negative = batch_of(
        &[Record {
            value: None,
            ..record(Some(b"k"), now)
        }],
        Compression::None,
    );
    let at = negative.len() - 2;
    negative[at] = 13; // a value length of -7
    let answer = produce(broker.bootstrap(), &topic, resealed(negative)).await;
    assert_eq!(answer.error_code, INVALID_RECORD);
    assert_eq!(end_offset(&admin, &topic).await, 0);
}
