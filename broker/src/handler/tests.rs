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
