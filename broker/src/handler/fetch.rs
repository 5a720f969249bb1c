//! Fetch: whole stored batches from each requested partition, up to the high watermark,
//! within `max_bytes` (overall) and `partition_max_bytes`, waiting up to `max_wait_ms` for
//! `min_bytes` to arrive.
//!
//! Fetch sessions (KIP-227) are not kept: every response has session id 0, which tells clients
//! to keep sending full fetch requests.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::select_all;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use tokio::time::Instant;

use super::errors::storage_code;
use super::{ProtocolError, Reply, RequestContext};
use crate::state::BrokerState;
use crate::storage::{FetchedBatches, Partition, StorageError};

const READ_COMMITTED: i8 = 1;

/// One requested partition.
struct Wanted {
    index: i32,
    partition: Option<Arc<Partition>>,
    fetch_offset: i64,
    max_bytes: usize,
}

pub(super) fn handle(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: FetchRequest,
) -> Result<Reply, ProtocolError> {
    let topics: Vec<(TopicName, Vec<Wanted>)> = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.topic.0.to_string();
            let wanted = topic
                .partitions
                .into_iter()
                .map(|p| Wanted {
                    index: p.partition,
                    partition: state.partition(&name, p.partition),
                    fetch_offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes.max(0) as usize,
                })
                .collect();
            (topic.topic, wanted)
        })
        .collect();
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let min_bytes = request.min_bytes.max(0) as usize;
    let max_bytes = request.max_bytes.max(0) as usize;
    let read_committed = request.isolation_level == READ_COMMITTED;

    Ok(Reply::Later(Box::pin(async move {
        let deadline = Instant::now() + max_wait;
        loop {
            // Watch first, read second: an append between the two still wakes us.
            let mut watchers: Vec<_> = topics
                .iter()
                .flat_map(|(_, ps)| ps.iter())
                .filter_map(|w| w.partition.as_ref().map(|p| p.watch_high_watermark()))
                .collect();
            let (responses, bytes, failed) = read(&topics, max_bytes, read_committed, ctx.version);
            if bytes >= min_bytes || failed || Instant::now() >= deadline {
                return ctx.encode(&FetchResponse::default().with_responses(responses));
            }
            if watchers.is_empty() {
                tokio::time::sleep_until(deadline).await;
            } else {
                let changed = watchers.iter_mut().map(|w| Box::pin(w.changed()));
                tokio::select! {
                    _ = select_all(changed) => {}
                    _ = tokio::time::sleep_until(deadline) => {}
                }
            }
        }
    })))
}

/// Reads every wanted partition once. Returns the responses, the record bytes they hold and
/// whether any partition failed (a failure is answered at once).
fn read(
    topics: &[(TopicName, Vec<Wanted>)],
    max_bytes: usize,
    read_committed: bool,
    version: i16,
) -> (Vec<FetchableTopicResponse>, usize, bool) {
    let mut total = 0usize;
    let mut failed = false;
    let responses = topics
        .iter()
        .map(|(name, wanted)| {
            let partitions = wanted
                .iter()
                .map(|w| {
                    let data = PartitionData::default()
                        .with_partition_index(w.index)
                        .with_aborted_transactions(read_committed.then(Vec::new));
                    let Some(partition) = &w.partition else {
                        failed = true;
                        return data
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_high_watermark(-1)
                            .with_records(Some(Bytes::new()));
                    };
                    let room = max_bytes.saturating_sub(total).min(w.max_bytes);
                    let result = if room == 0 {
                        // The response is full: report the offsets only.
                        Ok(FetchedBatches {
                            records: Bytes::new(),
                            high_watermark: partition.high_watermark(),
                            log_start_offset: partition.log_start_offset(),
                        })
                    } else {
                        partition.read(w.fetch_offset, room)
                    };
                    match result {
                        Ok(mut fetched) => {
                            // Only the first data of a response may exceed the limits (KIP-74).
                            if total > 0 && fetched.records.len() > room {
                                fetched.records = Bytes::new();
                            }
                            total += fetched.records.len();
                            let mut data = data
                                .with_high_watermark(fetched.high_watermark)
                                .with_last_stable_offset(fetched.high_watermark)
                                .with_records(Some(fetched.records));
                            if version >= 5 {
                                data = data.with_log_start_offset(fetched.log_start_offset);
                            }
                            data
                        }
                        Err(e) => {
                            failed = true;
                            if !matches!(e, StorageError::OffsetOutOfRange { .. }) {
                                tracing::warn!(partition = %partition.topic_partition(), error = %e, "fetch failed");
                            }
                            data.with_error_code(storage_code(&e))
                                .with_high_watermark(-1)
                                .with_records(Some(Bytes::new()))
                        }
                    }
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(name.clone())
                .with_partitions(partitions)
        })
        .collect();
    (responses, total, failed)
}
