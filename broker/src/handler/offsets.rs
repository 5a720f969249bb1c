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

use super::errors::{group_code, group_result_code};
use super::{topic_name, ProtocolError, Reply, RequestContext};
use crate::group::{CommitResult, OffsetValue};
use crate::state::BrokerState;

/// The (topic, partition, offset, leader epoch, metadata) rows of an OffsetCommit or a
/// TxnOffsetCommit request's topics, whose generated types name their fields alike.
macro_rules! commit_rows {
    ($topics:expr) => {
        $topics.iter().flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    t.name.0.as_str(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.committed_metadata.as_deref(),
                )
            })
        })
    };
}
pub(super) use commit_rows;

/// The offsets a commit asks for: those of partitions the broker has, and those it does not
/// have, which are refused one by one, as Kafka does.
pub(super) struct OffsetsToCommit {
    pub(super) offsets: Vec<(String, i32, OffsetValue)>,
    unknown: Vec<(String, i32)>,
}

impl OffsetsToCommit {
    /// Sorts the requested (topic, partition, offset, leader epoch, metadata) rows.
    pub(super) fn new<'a>(
        state: &BrokerState,
        rows: impl Iterator<Item = (&'a str, i32, i64, i32, Option<&'a str>)>,
    ) -> Self {
        let now = state.clock.now().wall_ms;
        let (mut offsets, mut unknown) = (Vec::new(), Vec::new());
        for (topic, partition, offset, leader_epoch, metadata) in rows {
            if state.partition(topic, partition).is_none() {
                unknown.push((topic.to_string(), partition));
                continue;
            }
            let value = OffsetValue {
                offset,
                leader_epoch,
                metadata: metadata.unwrap_or_default().to_string(),
                commit_timestamp: now,
            };
            offsets.push((topic.to_string(), partition, value));
        }
        Self { offsets, unknown }
    }

    /// Commits with `commit` (the coordinator's call, which checks and queues the commit
    /// when called: now, in the connection's request order), and gives a future that answers
    /// each partition's code by topic, in the response's types: `topic(name, partitions)` and
    /// `partition(index, code)` build them. `commit` answers each offset's code or one code
    /// for all.
    pub(super) fn commit<F, T, P>(
        self,
        commit: impl FnOnce(Vec<(String, i32, OffsetValue)>) -> F,
        topic: impl Fn(TopicName, Vec<P>) -> T + Send + 'static,
        partition: impl Fn(i32, i16) -> P + Send + 'static,
    ) -> impl std::future::Future<Output = Vec<T>> + Send + 'static
    where
        F: std::future::Future<Output = CommitResult> + Send + 'static,
    {
        let keys: Vec<(String, i32)> = self
            .offsets
            .iter()
            .map(|(t, p, _)| (t.clone(), *p))
            .collect();
        let committed = commit(self.offsets);
        let unknown_partitions = self.unknown;
        async move {
            let codes = match committed.await {
                Ok(results) => results.iter().map(group_result_code).collect(),
                Err(error) => vec![group_code(&error); keys.len()],
            };
            let unknown = ResponseError::UnknownTopicOrPartition.code();
            let answers = keys
                .into_iter()
                .zip(codes)
                .chain(unknown_partitions.into_iter().map(|key| (key, unknown)))
                .map(|((topic, partition), code)| (topic, partition, code))
                .collect();
            by_topic(answers)
                .into_iter()
                .map(|(name, codes)| {
                    let partitions = codes.into_iter().map(|(p, code)| partition(p, code));
                    topic(topic_name(&name), partitions.collect())
                })
                .collect()
        }
    }
}

/// Groups (topic, partition, code) answers by topic, keeping their order.
pub(super) fn by_topic(answers: Vec<(String, i32, i16)>) -> Vec<(String, Vec<(i32, i16)>)> {
    let mut topics: Vec<(String, Vec<(i32, i16)>)> = Vec::new();
    for (topic, partition, code) in answers {
        match topics.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, ps)) => ps.push((partition, code)),
            None => topics.push((topic, vec![(partition, code)])),
        }
    }
    topics
}

pub(super) fn commit(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: OffsetCommitRequest,
) -> Result<Reply, ProtocolError> {
    let to_commit = OffsetsToCommit::new(state, commit_rows!(request.topics));
    let groups = &state.groups;
    let instance_id = request.group_instance_id.as_deref();
    let topics = to_commit.commit(
        |offsets| {
            groups.commit_offsets(
                &request.group_id.0,
                request.generation_id_or_member_epoch,
                &request.member_id,
                instance_id,
                offsets,
            )
        },
        |name, partitions| {
            OffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        },
        |index, code| {
            OffsetCommitResponsePartition::default()
                .with_partition_index(index)
                .with_error_code(code)
        },
    );
    ctx.later(async move { OffsetCommitResponse::default().with_topics(topics.await) })
}

/// (partition, offset, leader epoch, metadata, error code) of one group's wanted offsets, by
/// topic.
type FetchedTopics = Vec<(String, Vec<(i32, i64, i32, Option<String>, i16)>)>;

/// A group's offsets. With `require_stable` (KIP-447), a partition whose offset a transaction
/// not yet ended holds answers UNSTABLE_OFFSET_COMMIT, and the client asks again.
fn fetch_group(
    state: &BrokerState,
    group: &str,
    wanted: Option<Vec<(String, i32)>>,
    require_stable: bool,
) -> FetchedTopics {
    let mut topics: FetchedTopics = Vec::new();
    for (topic, partition, value) in state.groups.fetch_offsets(group, wanted) {
        let row = if require_stable && state.groups.has_pending_offset(group, &topic, partition) {
            let unstable = ResponseError::UnstableOffsetCommit.code();
            (partition, -1, -1, None, unstable)
        } else {
            match value {
                Some(v) => (partition, v.offset, v.leader_epoch, Some(v.metadata), 0),
                None => (partition, -1, -1, Some(String::new()), 0),
            }
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
                let topics = fetch_group(state, &g.group_id.0, wanted, request.require_stable)
                    .into_iter()
                    .map(|(topic, rows)| {
                        OffsetFetchResponseTopics::default()
                            .with_name(topic_name(&topic))
                            .with_partitions(
                                rows.into_iter()
                                    .map(|(p, offset, epoch, metadata, code)| {
                                        OffsetFetchResponsePartitions::default()
                                            .with_partition_index(p)
                                            .with_error_code(code)
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
    let require_stable = version >= 7 && request.require_stable;
    let topics = fetch_group(state, &request.group_id.0, wanted, require_stable)
        .into_iter()
        .map(|(topic, rows)| {
            OffsetFetchResponseTopic::default()
                .with_name(topic_name(&topic))
                .with_partitions(
                    rows.into_iter()
                        .map(|(p, offset, epoch, metadata, code)| {
                            let row = OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(code)
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
            Err(error) => OffsetDeleteResponse::default().with_error_code(group_code(&error)),
            Ok(codes) => {
                let mut topics: Vec<OffsetDeleteResponseTopic> = Vec::new();
                for ((topic, partition), code) in partitions.into_iter().zip(codes) {
                    let answer = OffsetDeleteResponsePartition::default()
                        .with_partition_index(partition)
                        .with_error_code(group_result_code(&code));
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
