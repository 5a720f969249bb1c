//! Produce: append each partition's batches in request order, then answer once they are
//! durable (acks=1 and acks=all; with one replica these mean the same), or not at all
//! (acks=0). A transactional batch that opens its producer's transaction in a partition is
//! refused unless the transaction coordinator has the partition in that transaction (KIP-890).
//! Clients may not write the coordinators' internal topics. The appends run on a blocking
//! thread, never on the async workers, and the connection reads its next request only once
//! they are done.

use std::sync::Arc;

use futures::future::join_all;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::errors::storage_code;
use super::metadata::is_internal;
use super::{ProtocolError, Reply, RequestContext, Response};
use crate::state::BrokerState;
use crate::storage::{off_workers, Origin, Partition, RecordError, StorageError};

/// A partition's answer, and the durability it still waits for.
struct Pending {
    response: PartitionProduceResponse,
    wait_for: Option<(Arc<Partition>, i64)>,
}

fn failed(index: i32, code: i16, message: Option<String>, version: i16) -> Pending {
    let mut response = PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(code)
        .with_base_offset(-1);
    if version >= 8 {
        response = response.with_error_message(message.map(StrBytes::from_string));
    }
    Pending {
        response,
        wait_for: None,
    }
}

/// A refused record as the response carries it (Kafka's `BatchIndexAndErrorMessage`).
fn record_error(error: &RecordError) -> BatchIndexAndErrorMessage {
    BatchIndexAndErrorMessage::default()
        .with_batch_index(error.index)
        .with_batch_index_error_message(Some(StrBytes::from_string(error.message.clone())))
}

/// A partition of the request: answered already, or batches to append.
enum Slot {
    Answered(Pending),
    Append {
        index: i32,
        partition: Arc<Partition>,
        records: bytes::Bytes,
    },
}

pub(super) fn handle(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: ProduceRequest,
) -> Result<Reply, ProtocolError> {
    let acks = request.acks;
    let version = ctx.version;
    let mut topics = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let name = topic.name.0.to_string();
        let mut slots = Vec::with_capacity(topic.partition_data.len());
        for data in topic.partition_data {
            let index = data.index;
            let refuse = |code: ResponseError, message: Option<String>| {
                Slot::Answered(failed(index, code.code(), message, version))
            };
            if !matches!(acks, -1..=1) {
                slots.push(refuse(ResponseError::InvalidRequiredAcks, None));
                continue;
            }
            if is_internal(&name) {
                // Only the coordinators write their topics, as in Kafka.
                slots.push(refuse(
                    ResponseError::InvalidTopicException,
                    Some(format!("Cannot append to internal topic {name}")),
                ));
                continue;
            }
            let Some(partition) = state.partition(&name, index) else {
                slots.push(refuse(
                    ResponseError::UnknownTopicOrPartition,
                    Some(format!("This server does not host {name}-{index}.")),
                ));
                continue;
            };
            let Some(records) = data.records.filter(|r| !r.is_empty()) else {
                slots.push(refuse(
                    ResponseError::InvalidRecord,
                    Some("The produce request holds no record batch.".into()),
                ));
                continue;
            };
            slots.push(Slot::Append {
                index,
                partition,
                records,
            });
        }
        topics.push((topic.name, name, slots));
    }
    // The appends (and any segment roll with its fsyncs) run on a blocking thread; the
    // connection waits for them before its next request.
    let state = Arc::clone(state);
    Ok(Reply::InOrder(Box::pin(async move {
        let appended = off_workers(move || Ok(append_all(&state, topics, version))).await;
        let topics = match appended {
            Ok(topics) => topics,
            Err(e) => {
                return Err(ProtocolError::Internal {
                    api: ctx.api,
                    reason: e.to_string(),
                })
            }
        };
        answer(ctx, acks, topics)
    })))
}

/// Appends each partition's batches, in request order: each partition's answer, and the
/// durability it still waits for.
fn append_all(
    state: &Arc<BrokerState>,
    topics: Vec<(TopicName, String, Vec<Slot>)>,
    version: i16,
) -> Vec<(TopicName, Vec<Pending>)> {
    let now = state.clock.now().wall_ms;
    topics
        .into_iter()
        .map(|(topic, name, slots)| {
            let answers = slots
                .into_iter()
                .map(|slot| match slot {
                    Slot::Answered(pending) => pending,
                    Slot::Append {
                        index,
                        partition,
                        records,
                    } => append(state, &name, index, partition, &records, now, version),
                })
                .collect();
            (topic, answers)
        })
        .collect()
}

fn append(
    state: &BrokerState,
    name: &str,
    index: i32,
    partition: Arc<Partition>,
    records: &[u8],
    now: i64,
    version: i16,
) -> Pending {
    let verify =
        |producer_id: i64, epoch: i16| state.transactions.verify(producer_id, epoch, name, index);
    match partition.append_from(records, now, Origin::Client { verify: &verify }) {
        Ok(info) => {
            let mut response = PartitionProduceResponse::default()
                .with_index(index)
                .with_base_offset(info.base_offset)
                .with_log_append_time_ms(info.log_append_time);
            if version >= 5 {
                response = response.with_log_start_offset(info.log_start_offset);
            }
            Pending {
                response,
                wait_for: Some((partition, info.last_offset)),
            }
        }
        Err(e) => {
            tracing::debug!(partition = %partition.topic_partition(), error = %e, "refused a produce");
            let mut refused = failed(index, storage_code(&e), Some(e.to_string()), version);
            if let (StorageError::RecordsRefused { errors, .. }, 8..) = (&e, version) {
                refused.response.record_errors = errors.iter().map(record_error).collect();
            }
            refused
        }
    }
}

/// Answers once every appended batch is durable (or, with acks=0, not at all).
fn answer(
    ctx: RequestContext,
    acks: i16,
    topics: Vec<(TopicName, Vec<Pending>)>,
) -> Result<Reply, ProtocolError> {
    if acks == 0 {
        // Nobody waits, but the records must still become durable, and so visible.
        for (_, partitions) in topics {
            for (partition, last_offset) in partitions.into_iter().filter_map(|p| p.wait_for) {
                tokio::spawn(async move {
                    if let Err(e) = partition.wait_durable(last_offset).await {
                        tracing::error!(partition = %partition.topic_partition(), error = %e, "fsync failed");
                    }
                });
            }
        }
        return Ok(Reply::Nothing);
    }
    Ok(Reply::Later(Box::pin(async move {
        let mut responses = Vec::with_capacity(topics.len());
        for (name, partitions) in topics {
            let answered = join_all(partitions.into_iter().map(|p| async move {
                match p.wait_for {
                    None => p.response,
                    Some((partition, last_offset)) => match partition.wait_durable(last_offset).await {
                        Ok(()) => p.response,
                        Err(e) => {
                            tracing::error!(partition = %partition.topic_partition(), error = %e, "fsync failed");
                            p.response
                                .with_error_code(storage_code(&e))
                                .with_base_offset(-1)
                        }
                    },
                }
            }))
            .await;
            responses.push(
                TopicProduceResponse::default()
                    .with_name(name)
                    .with_partition_responses(answered),
            );
        }
        ctx.encode(&ProduceResponse::default().with_responses(responses))
            .map(Response::Frame)
    })))
}
