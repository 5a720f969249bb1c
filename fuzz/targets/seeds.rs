//! Writes the seed inputs of every target into `corpus/<target>/`: a well-formed example of
//! each thing the target decodes, for the fuzzer to start from.
//!
//! ```sh
//! cargo run --release --bin seeds   # in fuzz/
//! ```

use std::fs;
use std::path::Path;

use bytes::{Bytes, BytesMut};
use eddy_core::log::Record;
use eddy_core::wire::batch::BatchBuilder;
use eddy_core::wire::compression::Compression;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A request frame without its size: header and body.
fn request<R: Encodable + HeaderVersion>(key: ApiKey, version: i16, body: &R) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(text("seed")));
    let mut out = BytesMut::new();
    header
        .encode(&mut out, key.request_header_version(version))
        .unwrap();
    body.encode(&mut out, version).unwrap();
    out.to_vec()
}

fn batch(codec: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(codec);
    builder.append(&Record::new("order-1", "placed", 1_000));
    builder.append(&Record::new("order-1", "paid", 1_001));
    builder.build(0).unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join(name), bytes).unwrap();
}

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let topic = || TopicName(text("t"));
    let group = || GroupId(text("g"));

    let requests = corpus.join("request");
    write(
        &requests,
        "api_versions",
        &request(
            ApiKey::ApiVersions,
            3,
            &ApiVersionsRequest::default()
                .with_client_software_name(text("seed"))
                .with_client_software_version(text("1")),
        ),
    );
    write(
        &requests,
        "metadata",
        &request(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic())),
            ])),
        ),
    );
    let produce = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(1_000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(topic())
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(Bytes::from(batch(Compression::None)))),
            ])]);
    write(&requests, "produce", &request(ApiKey::Produce, 9, &produce));
    write(
        &requests,
        "fetch",
        &request(
            ApiKey::Fetch,
            12,
            &FetchRequest::default()
                .with_max_bytes(1 << 20)
                .with_topics(vec![fetch_request::FetchTopic::default()
                    .with_topic(topic())
                    .with_partitions(vec![
                        fetch_request::FetchPartition::default().with_partition_max_bytes(1 << 20)
                    ])]),
        ),
    );
    write(
        &requests,
        "join_group",
        &request(
            ApiKey::JoinGroup,
            9,
            &JoinGroupRequest::default()
                .with_group_id(group())
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(10_000)
                .with_protocol_type(text("consumer"))
                .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
                )
                .with_name(text("range"))
                .with_metadata(Bytes::from_static(b"\x00\x01"))]),
        ),
    );
    write(
        &requests,
        "offset_commit",
        &request(
            ApiKey::OffsetCommit,
            8,
            &OffsetCommitRequest::default()
                .with_group_id(group())
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_committed_offset(1),
                        ]),
                ]),
        ),
    );
    write(
        &requests,
        "offset_fetch",
        &request(
            ApiKey::OffsetFetch,
            8,
            &OffsetFetchRequest::default().with_groups(vec![
                offset_fetch_request::OffsetFetchRequestGroup::default().with_group_id(group()),
            ]),
        ),
    );
    write(
        &requests,
        "init_producer_id",
        &request(
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(text("tx"))))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ),
    );
    write(
        &requests,
        "txn_offset_commit",
        &request(
            ApiKey::TxnOffsetCommit,
            3,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(text("tx")))
                .with_group_id(group())
                .with_generation_id(-1)
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                                .with_committed_offset(1),
                        ]),
                ]),
        ),
    );
    write(
        &requests,
        "create_topics",
        &request(
            ApiKey::CreateTopics,
            7,
            &CreateTopicsRequest::default().with_topics(vec![
                create_topics_request::CreatableTopic::default()
                    .with_name(TopicName(text("u")))
                    .with_num_partitions(1)
                    .with_replication_factor(1),
            ]),
        ),
    );

    let batches = corpus.join("record_batch");
    for (name, codec) in [
        ("none", Compression::None),
        ("gzip", Compression::Gzip),
        ("snappy", Compression::Snappy),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd),
    ] {
        write(&batches, name, &batch(codec));
    }

    let frames = corpus.join("frame");
    let mut stream = vec![40, 6];
    for body in [&b"abc"[..], b"", &[7; 100]] {
        stream.extend_from_slice(&i32::try_from(body.len()).unwrap().to_be_bytes());
        stream.extend_from_slice(body);
    }
    write(&frames, "three", &stream);

    let records = corpus.join("coordinator_records");
    // An offset commit record: key version 1 (group, topic, partition), value version 3.
    let mut offset = vec![14u8];
    offset.extend_from_slice(&[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 0]);
    offset.extend_from_slice(&[0, 3]);
    offset.extend_from_slice(&42i64.to_be_bytes());
    offset.extend_from_slice(&(-1i32).to_be_bytes());
    offset.extend_from_slice(&[0, 0]);
    offset.extend_from_slice(&7i64.to_be_bytes());
    write(&records, "offset", &offset);
    // A transaction record: key version 0 (id), value version 0, ongoing in t-0.
    let mut txn = vec![6u8, 0, 0, 0, 2, b't', b'x'];
    txn.extend_from_slice(&[0, 0]);
    txn.extend_from_slice(&1000i64.to_be_bytes());
    txn.extend_from_slice(&5i16.to_be_bytes());
    txn.extend_from_slice(&60_000i32.to_be_bytes());
    txn.push(1);
    txn.extend_from_slice(&1i32.to_be_bytes());
    txn.extend_from_slice(&[0, 1, b't']);
    txn.extend_from_slice(&1i32.to_be_bytes());
    txn.extend_from_slice(&0i32.to_be_bytes());
    txn.extend_from_slice(&2000i64.to_be_bytes());
    txn.extend_from_slice(&1000i64.to_be_bytes());
    write(&records, "transaction", &txn);
}
