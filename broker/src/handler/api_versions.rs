//! ApiVersions: which APIs and versions this broker serves. Only what is really served is
//! advertised: clients pick their versions from this list (librdkafka, for one, switches to
//! KIP-848 consumer groups if ConsumerGroupHeartbeat is advertised).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use super::{ProtocolError, Reply, RequestContext};

/// Every API served, with the lowest and highest version served.
const SERVED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 12),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 6),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 8),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 4),
    (ApiKey::TxnOffsetCommit, 0, 4),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 1),
];

/// The (lowest, highest) version served of `api`, if it is served.
pub(crate) fn supported_versions(api: ApiKey) -> Option<(i16, i16)> {
    SERVED
        .iter()
        .find(|(k, _, _)| *k == api)
        .map(|&(_, min, max)| (min, max))
}

fn response(error_code: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(
            SERVED
                .iter()
                .map(|&(key, min, max)| {
                    ApiVersion::default()
                        .with_api_key(key as i16)
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect(),
        )
}

pub(super) fn handle(
    ctx: &RequestContext,
    _request: ApiVersionsRequest,
) -> Result<Reply, ProtocolError> {
    ctx.reply(&response(0))
}

/// The answer to an ApiVersions request of a version we do not serve: version 0, with
/// UNSUPPORTED_VERSION and our ranges.
pub(super) fn unsupported(ctx: &RequestContext) -> Result<Reply, ProtocolError> {
    let v0 = RequestContext {
        version: 0,
        ..ctx.clone()
    };
    v0.reply(&response(ResponseError::UnsupportedVersion.code()))
}
