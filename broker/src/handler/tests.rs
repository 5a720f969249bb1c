//! Every served API and version, fed random bodies: each request is answered or refused with
//! a [`ProtocolError`], never a panic.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use proptest::prelude::*;

use super::*;
use crate::config::BrokerConfig;

fn state(dir: &std::path::Path) -> Arc<BrokerState> {
    let config = BrokerConfig {
        data_dir: dir.to_path_buf(),
        ..BrokerConfig::default()
    };
    let state = BrokerState::open(config, ("127.0.0.1".into(), 9092)).unwrap();
    state
        .create_topic("t", 2, Default::default(), false)
        .unwrap();
    Arc::new(state)
}

fn peer() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 5555))
}

const SERVED: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::DescribeConfigs,
    ApiKey::CreatePartitions,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::DeleteGroups,
    ApiKey::OffsetDelete,
    ApiKey::InitProducerId,
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
    ApiKey::TxnOffsetCommit,
    ApiKey::DescribeTransactions,
    ApiKey::ListTransactions,
];

/// Every API key there is, by number: the list above must name each one served.
#[test]
fn the_list_names_every_served_api() {
    for key in 0..100i16 {
        if let Ok(api) = ApiKey::try_from(key) {
            assert_eq!(
                supported_versions(api).is_some(),
                SERVED.contains(&api),
                "{api:?}"
            );
        }
    }
}

fn frame(api: ApiKey, version: i16, rest: &[u8]) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(api as i16);
    buf.put_i16(version);
    buf.put_i32(7);
    buf.extend_from_slice(rest);
    buf.freeze()
}

#[test]
fn every_served_version_is_advertised_and_decodes_an_empty_request_safely() {
    let dir = tempfile::tempdir().unwrap();
    let state = state(dir.path());
    for &api in SERVED {
        let (min, max) = supported_versions(api).unwrap();
        assert!(min <= max);
        for version in min..=max {
            // A client id of -1 and nothing else: most requests are then truncated.
            let _ = handle(&state, frame(api, version, &[0xff, 0xff]), peer());
        }
    }
}

#[test]
fn random_bodies_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let state = state(dir.path());
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 3000,
        ..ProptestConfig::default()
    });
    let strategy = (
        proptest::sample::select(SERVED.to_vec()),
        0u8..16,
        proptest::collection::vec(any::<u8>(), 0..160),
    );
    runner
        .run(&strategy, |(api, version_pick, body)| {
            let (min, max) = supported_versions(api).unwrap();
            let version = min + (version_pick as i16 % (max - min + 1));
            let _ = handle(&state, frame(api, version, &body), peer());
            Ok(())
        })
        .unwrap();
}

/// A request frame (without its length prefix) as a client encodes it.
fn request<R: kafka_protocol::protocol::Encodable + kafka_protocol::protocol::HeaderVersion>(
    api: ApiKey,
    version: i16,
    body: &R,
) -> Bytes {
    use kafka_protocol::protocol::Encodable;
    let header = kafka_protocol::messages::RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(1);
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, api.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    buf.freeze()
}

/// Two commits of one partition pipelined on a connection: however their replies are waited
/// for, the later request's offset is the committed one, as when Kafka serves a connection's
/// requests one at a time.
#[tokio::test]
async fn pipelined_commits_are_stored_in_request_order() {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;

    let dir = tempfile::tempdir().unwrap();
    let state = state(dir.path());
    let commit = |offset: i64| {
        let partition = OffsetCommitRequestPartition::default()
            .with_partition_index(0)
            .with_committed_offset(offset);
        let topic = OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![partition]);
        let body = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![topic]);
        match handle(&state, request(ApiKey::OffsetCommit, 8, &body), peer()) {
            Ok(Reply::Later(reply)) => reply,
            _ => panic!("an offset commit is answered once its records are durable"),
        }
    };
    let first = commit(49);
    let second = commit(50);
    // The second reply is awaited first, as a connection's spawned replies may run.
    assert!(second.await.is_ok());
    assert!(first.await.is_ok());
    let committed = state.groups.fetch_offsets("g", Some(vec![("t".into(), 0)]));
    assert_eq!(committed[0].2.as_ref().map(|v| v.offset), Some(50));
}
