//! Fetch: whole stored batches from each requested partition, up to the high watermark (or,
//! for `read_committed`, the last stable offset, with the aborted transactions among the
//! batches so the client can drop their records), within `max_bytes` (overall) and `partition_max_bytes`, waiting up to `max_wait_ms` for
//! `min_bytes` to arrive. The batches are not read: the response names their file ranges and
//! the connection sends them with `sendfile`. Finding them (which reads batch headers) runs on
//! a blocking thread, never on the async workers.
//!
//! Fetch sessions (KIP-227) are not kept: every response has session id 0, which tells clients
//! to keep sending full fetch requests.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::select_all;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::FetchRequest;
use tokio::time::Instant;

use super::errors::storage_code;
use super::fetch_response::{self, PartitionAnswer, Records, TopicAnswer};
use super::{ProtocolError, Reply, RequestContext, Response};
use crate::state::BrokerState;
use crate::storage::{off_workers, Partition, StorageError};

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
    let topics: Vec<(Bytes, Vec<Wanted>)> = request
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
            (topic.topic.0.into_bytes(), wanted)
        })
        .collect();
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let min_bytes = request.min_bytes.max(0) as usize;
    let max_bytes = request.max_bytes.max(0) as usize;
    let read_committed = request.isolation_level == READ_COMMITTED;

    let topics = Arc::new(topics);
    Ok(Reply::Later(Box::pin(async move {
        let deadline = Instant::now() + max_wait;
        loop {
            // Watch first, read second: an append between the two still wakes us.
            let mut watchers: Vec<_> = topics
                .iter()
                .flat_map(|(_, ps)| ps.iter())
                .filter_map(|w| w.partition.as_ref().map(|p| p.watch_high_watermark()))
                .collect();
            // Locating batches reads their headers from the segment files: not on the
            // async workers.
            let wanted = Arc::clone(&topics);
            let (answers, bytes, failed) =
                off_workers(move || Ok(locate(&wanted, max_bytes, read_committed)))
                    .await
                    .map_err(|e| ProtocolError::Internal {
                        api: ctx.api,
                        reason: e.to_string(),
                    })?;
            if bytes >= min_bytes || failed || Instant::now() >= deadline {
                return Ok(Response::Parts(fetch_response::encode(
                    ctx.correlation_id,
                    ctx.version,
                    &answers,
                )));
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

/// Finds every wanted partition's batches. Returns the answers, the record bytes they hold
/// and whether any partition failed (a failure is answered at once).
fn locate(
    topics: &[(Bytes, Vec<Wanted>)],
    max_bytes: usize,
    read_committed: bool,
) -> (Vec<TopicAnswer>, usize, bool) {
    let mut total = 0usize;
    let mut failed = false;
    let answers = topics
        .iter()
        .map(|(name, wanted)| TopicAnswer {
            name: name.clone(),
            partitions: wanted
                .iter()
                .map(|w| {
                    let mut answer = PartitionAnswer {
                        index: w.index,
                        error_code: 0,
                        high_watermark: -1,
                        last_stable_offset: -1,
                        log_start_offset: -1,
                        aborted_transactions: read_committed.then(Vec::new),
                        records: Records::Bytes(Bytes::new()),
                    };
                    let Some(partition) = &w.partition else {
                        failed = true;
                        answer.error_code = ResponseError::UnknownTopicOrPartition.code();
                        return answer;
                    };
                    let room = max_bytes.saturating_sub(total).min(w.max_bytes);
                    // Taken before the read: it never exceeds the high watermark the read sees.
                    let last_stable_offset = partition.last_stable_offset();
                    answer.last_stable_offset = last_stable_offset;
                    if room == 0 {
                        // The response is full: report the offsets only.
                        answer.high_watermark = partition.high_watermark();
                        answer.log_start_offset = partition.log_start_offset();
                        return answer;
                    }
                    let upper_bound = if read_committed { last_stable_offset } else { i64::MAX };
                    match partition.locate_below(w.fetch_offset, room, upper_bound) {
                        Ok(located) => {
                            answer.high_watermark = located.high_watermark;
                            answer.log_start_offset = located.log_start_offset;
                            // Only the first data of a response may exceed the limits (KIP-74).
                            if let Some(range) = located.range {
                                if total == 0 || range.len as usize <= room {
                                    total += range.len as usize;
                                    if read_committed {
                                        // The aborted transactions among the batches sent.
                                        answer.aborted_transactions = Some(
                                            partition
                                                .aborted_transactions(w.fetch_offset, range.end_offset)
                                                .iter()
                                                .map(|a| (a.producer_id, a.first_offset))
                                                .collect(),
                                        );
                                    }
                                    answer.records = Records::File(range);
                                }
                            }
                        }
                        Err(e) => {
                            failed = true;
                            if !matches!(e, StorageError::OffsetOutOfRange { .. }) {
                                tracing::warn!(partition = %partition.topic_partition(), error = %e, "fetch failed");
                            }
                            answer.error_code = storage_code(&e);
                        }
                    }
                    answer
                })
                .collect(),
        })
        .collect();
    (answers, total, failed)
}
