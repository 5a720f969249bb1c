//! OffsetCommit, OffsetFetch (single-group and, from v8, several groups) and OffsetDelete.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{ProtocolError, Reply, RequestContext};
use crate::group::OffsetValue;
use crate::state::{now_ms, BrokerState};

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

pub(super) fn commit(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: OffsetCommitRequest,
) -> Result<Reply, ProtocolError> {
    let now = now_ms();
    // Offsets of partitions the broker does not have are refused one by one, as Kafka does.
    let mut offsets = Vec::new();
    let mut unknown = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            let name = topic.name.0.to_string();
            if state.partition(&name, p.partition_index).is_none() {
                unknown.push((name, p.partition_index));
                continue;
            }
            offsets.push((
                name,
                p.partition_index,
                OffsetValue {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p
                        .committed_metadata
                        .as_deref()
                        .unwrap_or_default()
                        .to_string(),
                    commit_timestamp: now,
                },
            ));
        }
    }
    let groups = Arc::clone(&state.groups);
    let group_id = request.group_id.0.to_string();
    let member_id = request.member_id.to_string();
    let instance_id = request.group_instance_id.as_ref().map(|s| s.to_string());
    let generation = request.generation_id_or_member_epoch;
    ctx.later(async move {
        let keys: Vec<(String, i32)> = offsets.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
        let codes = match groups
            .commit_offsets(
                &group_id,
                generation,
                &member_id,
                instance_id.as_deref(),
                offsets,
            )
            .await
        {
            Ok(codes) => codes,
            Err(group_code) => vec![group_code; keys.len()],
        };
        let mut answers: Vec<(String, i32, i16)> = keys
            .into_iter()
            .zip(codes)
            .map(|((t, p), c)| (t, p, c))
            .collect();
        answers.extend(
            unknown
                .into_iter()
                .map(|(t, p)| (t, p, ResponseError::UnknownTopicOrPartition.code())),
        );
        let mut topics: Vec<OffsetCommitResponseTopic> = Vec::new();
        for (topic, partition, code) in answers {
            let answer = OffsetCommitResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(code);
            match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partitions.push(answer),
                None => topics.push(
                    OffsetCommitResponseTopic::default()
                        .with_name(topic_name(&topic))
                        .with_partitions(vec![answer]),
                ),
            }
        }
        OffsetCommitResponse::default().with_topics(topics)
    })
}

/// (partition, offset, leader epoch, metadata) of one group's wanted offsets, by topic.
type FetchedTopics = Vec<(String, Vec<(i32, i64, i32, Option<String>)>)>;

fn fetch_group(
    state: &BrokerState,
    group: &str,
    wanted: Option<Vec<(String, i32)>>,
) -> FetchedTopics {
    let mut topics: FetchedTopics = Vec::new();
    for (topic, partition, value) in state.groups.fetch_offsets(group, wanted) {
        let row = match value {
            Some(v) => (partition, v.offset, v.leader_epoch, Some(v.metadata)),
            None => (partition, -1, -1, Some(String::new())),
        };
        match topics.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, rows)) => rows.push(row),
            None => topics.push((topic, vec![row])),
        }
    }
    topics
}

pub(super) fn fetch(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: OffsetFetchRequest,
) -> Result<Reply, ProtocolError> {
    let version = ctx.version;
    if version >= 8 {
        let groups = request
            .groups
            .into_iter()
            .map(|g| {
                let wanted = g.topics.map(|ts| {
                    ts.into_iter()
                        .flat_map(|t| {
                            let name = t.name.0.to_string();
                            t.partition_indexes
                                .into_iter()
                                .map(move |p| (name.clone(), p))
                        })
                        .collect()
                });
                let topics = fetch_group(state, &g.group_id.0, wanted)
                    .into_iter()
                    .map(|(topic, rows)| {
                        OffsetFetchResponseTopics::default()
                            .with_name(topic_name(&topic))
                            .with_partitions(
                                rows.into_iter()
                                    .map(|(p, offset, epoch, metadata)| {
                                        OffsetFetchResponsePartitions::default()
                                            .with_partition_index(p)
                                            .with_committed_offset(offset)
                                            .with_committed_leader_epoch(epoch)
                                            .with_metadata(metadata.map(StrBytes::from_string))
                                    })
                                    .collect(),
                            )
                    })
                    .collect();
                OffsetFetchResponseGroup::default()
                    .with_group_id(g.group_id)
                    .with_topics(topics)
            })
            .collect();
        return ctx.reply(&OffsetFetchResponse::default().with_groups(groups));
    }
    let wanted = request.topics.map(|ts| {
        ts.into_iter()
            .flat_map(|t| {
                let name = t.name.0.to_string();
                t.partition_indexes
                    .into_iter()
                    .map(move |p| (name.clone(), p))
            })
            .collect()
    });
    let topics = fetch_group(state, &request.group_id.0, wanted)
        .into_iter()
        .map(|(topic, rows)| {
            OffsetFetchResponseTopic::default()
                .with_name(topic_name(&topic))
                .with_partitions(
                    rows.into_iter()
                        .map(|(p, offset, epoch, metadata)| {
                            let row = OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(offset)
                                .with_metadata(metadata.map(StrBytes::from_string));
                            if version >= 5 {
                                row.with_committed_leader_epoch(epoch)
                            } else {
                                row
                            }
                        })
                        .collect(),
                )
        })
        .collect();
    ctx.reply(&OffsetFetchResponse::default().with_topics(topics))
}

pub(super) fn delete(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: OffsetDeleteRequest,
) -> Result<Reply, ProtocolError> {
    let groups = Arc::clone(&state.groups);
    let partitions: Vec<(String, i32)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index))
        })
        .collect();
    let group_id = request.group_id.0.to_string();
    ctx.later(async move {
        match groups.delete_offsets(&group_id, &partitions).await {
            Err(code) => OffsetDeleteResponse::default().with_error_code(code),
            Ok(codes) => {
                let mut topics: Vec<OffsetDeleteResponseTopic> = Vec::new();
                for ((topic, partition), code) in partitions.into_iter().zip(codes) {
                    let answer = OffsetDeleteResponsePartition::default()
                        .with_partition_index(partition)
                        .with_error_code(code);
                    match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                        Some(t) => t.partitions.push(answer),
                        None => topics.push(
                            OffsetDeleteResponseTopic::default()
                                .with_name(topic_name(&topic))
                                .with_partitions(vec![answer]),
                        ),
                    }
                }
                OffsetDeleteResponse::default().with_topics(topics)
            }
        }
    })
}
