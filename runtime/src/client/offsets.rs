//! Offsets, as the consumer and the admin client both need them: a group's committed offsets
//! (OffsetFetch and OffsetCommit at the group's coordinator; the consumer commits as a
//! member of its generation, the admin client from outside the group), and offsets by
//! position or time (ListOffsets at each partition's leader).

use std::collections::BTreeMap;

use eddy_core::log::TopicPartition;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    GroupId, ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::cluster::{Cluster, CoordinatorType};
use super::ClientError;
use crate::time::Instant;

/// Who commits: a member of a generation, or nobody (-1, empty member id) from outside.
#[derive(Debug, Clone, Default)]
pub(crate) struct Committer<'a> {
    pub(crate) generation_id: i32,
    pub(crate) member_id: &'a str,
    pub(crate) group_instance_id: Option<&'a str>,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn refused(what: &str, code: i16) -> ClientError {
    ClientError::Refused {
        addr: String::new(),
        what: what.to_string(),
        code,
    }
}

fn by_topic<'a, T: Copy>(
    entries: impl IntoIterator<Item = (&'a TopicPartition, T)>,
) -> BTreeMap<String, Vec<(i32, T)>> {
    let mut grouped: BTreeMap<String, Vec<(i32, T)>> = BTreeMap::new();
    for (tp, value) in entries {
        grouped
            .entry(tp.topic.clone())
            .or_default()
            .push((tp.partition, value));
    }
    grouped
}

/// The committed offsets of `group`, of `partitions` or of every partition it has offsets
/// for. `require_stable` waits out offsets of open transactions (UNSTABLE_OFFSET_COMMIT is
/// retried) as a `read_committed` consumer must.
pub(crate) async fn fetch(
    cluster: &Cluster,
    group: &str,
    partitions: Option<&[TopicPartition]>,
    require_stable: bool,
    deadline: Instant,
) -> Result<BTreeMap<TopicPartition, i64>, ClientError> {
    let topics = partitions.map(|ps| by_topic(ps.iter().map(|tp| (tp, ()))));
    cluster
        .with_coordinator(CoordinatorType::Group, group, deadline, |broker| {
            let topics = topics.clone();
            async move {
                let version = broker.version::<OffsetFetchRequest>()?;
                let mut request = OffsetFetchRequest::default().with_require_stable(require_stable);
                if version >= 8 {
                    request = request.with_groups(vec![OffsetFetchRequestGroup::default()
                        .with_group_id(GroupId(text(group)))
                        .with_topics(topics.map(|ts| {
                            ts.into_iter()
                                .map(|(t, ps)| {
                                    OffsetFetchRequestTopics::default()
                                        .with_name(TopicName(text(&t)))
                                        .with_partition_indexes(ps.iter().map(|p| p.0).collect())
                                })
                                .collect()
                        }))]);
                } else {
                    request = request
                        .with_group_id(GroupId(text(group)))
                        .with_topics(topics.map(|ts| {
                            ts.into_iter()
                                .map(|(t, ps)| {
                                    OffsetFetchRequestTopic::default()
                                        .with_name(TopicName(text(&t)))
                                        .with_partition_indexes(ps.iter().map(|p| p.0).collect())
                                })
                                .collect()
                        }));
                }
                let response = cluster.send_at(&broker, version, &request).await?;
                let mut offsets = BTreeMap::new();
                let mut found = |topic: &str, partition: i32, offset: i64, code: i16| {
                    if code != 0 {
                        return Err(refused("OffsetFetch", code));
                    }
                    if offset >= 0 {
                        offsets.insert(TopicPartition::new(topic, partition), offset);
                    }
                    Ok(())
                };
                if version >= 8 {
                    for g in &response.groups {
                        if g.error_code != 0 {
                            return Err(refused("OffsetFetch", g.error_code));
                        }
                        for t in &g.topics {
                            for p in &t.partitions {
                                found(
                                    &t.name.0,
                                    p.partition_index,
                                    p.committed_offset,
                                    p.error_code,
                                )?;
                            }
                        }
                    }
                } else {
                    if response.error_code != 0 {
                        return Err(refused("OffsetFetch", response.error_code));
                    }
                    for t in &response.topics {
                        for p in &t.partitions {
                            found(
                                &t.name.0,
                                p.partition_index,
                                p.committed_offset,
                                p.error_code,
                            )?;
                        }
                    }
                }
                Ok(offsets)
            }
        })
        .await
}

/// Commits `offsets` (the next offset to read in each partition) for `group`.
pub(crate) async fn commit(
    cluster: &Cluster,
    group: &str,
    committer: &Committer<'_>,
    offsets: &BTreeMap<TopicPartition, i64>,
    deadline: Instant,
) -> Result<(), ClientError> {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(committer.generation_id)
        .with_member_id(text(committer.member_id))
        .with_group_instance_id(committer.group_instance_id.map(text))
        .with_topics(
            by_topic(offsets.iter().map(|(tp, &o)| (tp, o)))
                .into_iter()
                .map(|(topic, ps)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(text(&topic)))
                        .with_partitions(
                            ps.iter()
                                .map(|&(p, o)| {
                                    OffsetCommitRequestPartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(o)
                                        .with_committed_leader_epoch(-1)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    cluster
        .with_coordinator(CoordinatorType::Group, group, deadline, |broker| {
            let request = request.clone();
            async move {
                let response = cluster.send(&broker, &request).await?;
                let failed = response
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .map(|p| p.error_code)
                    .find(|&c| c != 0);
                match failed {
                    Some(code) => Err(refused("OffsetCommit", code)),
                    None => Ok(()),
                }
            }
        })
        .await
}

/// The offset `timestamp` names in each partition (-2 the first offset, -1 the end — the last
/// stable offset with `read_committed` — else the first record at or after that time, -1 if
/// none), asked of each partition's leader.
pub(crate) async fn list(
    cluster: &Cluster,
    partitions: &[TopicPartition],
    timestamp: i64,
    read_committed: bool,
    deadline: Instant,
) -> Result<Vec<(TopicPartition, i64)>, ClientError> {
    let mut by_leader: BTreeMap<i32, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
    for tp in partitions {
        let meta = cluster.wait_for_topic(&tp.topic, deadline).await?;
        let leader = meta
            .leaders
            .get(tp.partition as usize)
            .copied()
            .unwrap_or(-1);
        by_leader
            .entry(leader)
            .or_default()
            .entry(&tp.topic)
            .or_default()
            .push(tp.partition);
    }
    let mut found = Vec::new();
    for (leader, topics) in by_leader {
        let request = ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_isolation_level(i8::from(read_committed))
            .with_topics(
                topics
                    .iter()
                    .map(|(t, ps)| {
                        ListOffsetsTopic::default()
                            .with_name(TopicName(text(t)))
                            .with_partitions(
                                ps.iter()
                                    .map(|&p| {
                                        ListOffsetsPartition::default()
                                            .with_partition_index(p)
                                            .with_timestamp(timestamp)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let response = cluster
            .retry(deadline, || async {
                let broker = if leader >= 0 {
                    cluster.node(leader).await?
                } else {
                    cluster.mark_stale();
                    cluster.any_broker().await?
                };
                let response = cluster.send(&broker, &request).await?;
                let failed = response
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.error_code != 0);
                match failed {
                    Some(p) => {
                        cluster.mark_stale();
                        Err(refused("ListOffsets", p.error_code))
                    }
                    None => Ok(response),
                }
            })
            .await?;
        for t in response.topics {
            for p in t.partitions {
                found.push((
                    TopicPartition::new(t.name.0.as_str(), p.partition_index),
                    p.offset,
                ));
            }
        }
    }
    Ok(found)
}
