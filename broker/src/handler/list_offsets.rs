//! ListOffsets: the earliest offset, the latest, or the first offset at or after a timestamp.
//! "Latest" is the high watermark, or for `read_committed` the last stable offset; neither
//! answer reaches past what the isolation level lets a consumer read. The answer is found on a
//! blocking thread: a search by timestamp reads the segments' indexes and batch headers.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::errors::storage_code;
use super::{ProtocolError, Reply, RequestContext, Response};
use crate::state::BrokerState;
use crate::storage::off_workers;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

pub(super) fn handle(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: ListOffsetsRequest,
) -> Result<Reply, ProtocolError> {
    // A search by timestamp reads indexes and batch headers: not on the async workers.
    let state = Arc::clone(state);
    let version = ctx.version;
    Ok(Reply::Later(Box::pin(async move {
        let answered = off_workers(move || Ok(answer(&state, version, request))).await;
        let response = answered.map_err(|e| ProtocolError::Internal {
            api: ctx.api,
            reason: e.to_string(),
        })?;
        ctx.encode(&response).map(Response::Frame)
    })))
}

fn answer(state: &BrokerState, version: i16, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let read_committed = request.isolation_level == 1;
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.to_string();
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1);
                    let Some(partition) = state.partition(&name, p.partition_index) else {
                        return response
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code());
                    };
                    let visible_end = if read_committed {
                        partition.last_stable_offset()
                    } else {
                        partition.high_watermark()
                    };
                    let found = match p.timestamp {
                        LATEST => Ok(Some((visible_end, -1))),
                        EARLIEST => Ok(Some((partition.log_start_offset(), -1))),
                        t if t >= 0 => partition.offset_for_timestamp(t, visible_end),
                        _ => {
                            return response.with_error_code(ResponseError::InvalidRequest.code());
                        }
                    };
                    match found {
                        Ok(Some((offset, timestamp))) => {
                            let response = response.with_offset(offset).with_timestamp(timestamp);
                            if version >= 4 {
                                response.with_leader_epoch(0)
                            } else {
                                response
                            }
                        }
                        Ok(None) => response,
                        Err(e) => response.with_error_code(storage_code(&e)),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
