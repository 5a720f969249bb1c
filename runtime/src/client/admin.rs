//! Administration through the wire protocol: groups, committed offsets, offset lookups and
//! transactions — what `eddy groups` and `eddy transactions` are built on. Works against any
//! Kafka-compatible broker.

use std::collections::BTreeMap;

use eddy_core::log::TopicPartition;
use eddy_core::wire::consumer_protocol::decode_assignment;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    DescribeGroupsRequest, DescribeTransactionsRequest, GroupId, ListGroupsRequest,
    ListOffsetsRequest, ListTransactionsRequest, MetadataRequest, OffsetCommitRequest,
    OffsetFetchRequest, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::{ClientError, Connection};

/// Which offset to look up in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The first offset the partition holds.
    Earliest,
    /// The offset after the last visible record.
    Latest,
    /// The first record at or after this time (ms since the epoch); the latest offset if
    /// there is none.
    Timestamp(i64),
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    /// The group id.
    pub group_id: String,
    /// `consumer` for consumer groups.
    pub protocol_type: String,
    /// `Empty`, `Stable`, …
    pub state: String,
}

/// A member of a group and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// Its `group.instance.id`, for static members.
    pub group_instance_id: Option<String>,
    /// Its `client.id`.
    pub client_id: String,
    /// Where it connects from.
    pub client_host: String,
    /// Its partitions (consumer groups only).
    pub assignment: Vec<TopicPartition>,
}

/// A group's state and members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// `Empty`, `Stable`, `Dead` (unknown), …
    pub state: String,
    /// `consumer` for consumer groups.
    pub protocol_type: String,
    /// The members.
    pub members: Vec<GroupMember>,
}

/// A transactional id as ListTransactions shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTransaction {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// `Ongoing`, `CompleteCommit`, …
    pub state: String,
}

/// A transactional id's state as DescribeTransactions shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer id and epoch.
    pub producer: (i64, i16),
    /// `Empty`, `Ongoing`, `PrepareCommit`, `CompleteCommit`, …
    pub state: String,
    /// The producer's `transaction.timeout.ms`.
    pub timeout_ms: i32,
    /// When the open transaction began (ms since the epoch), or -1.
    pub start_time_ms: i64,
    /// The partitions of the open transaction.
    pub partitions: Vec<TopicPartition>,
}

/// An administrative client on one connection.
#[derive(Debug, Clone)]
pub struct Admin {
    conn: Connection,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

impl Admin {
    /// Connects to a broker at `bootstrap` (`host:port`).
    pub async fn connect(bootstrap: &str) -> Result<Self, ClientError> {
        Ok(Self {
            conn: Connection::connect(bootstrap, "eddy-admin").await?,
        })
    }

    fn refused(&self, what: &str, code: i16) -> ClientError {
        ClientError::Refused {
            addr: self.conn.addr().to_string(),
            what: what.to_string(),
            code,
        }
    }

    /// Every group the broker knows.
    pub async fn list_groups(&self) -> Result<Vec<ListedGroup>, ClientError> {
        let response = self.conn.send(4, &ListGroupsRequest::default()).await?;
        if response.error_code != 0 {
            return Err(self.refused("ListGroups", response.error_code));
        }
        let mut groups: Vec<_> = response
            .groups
            .into_iter()
            .map(|g| ListedGroup {
                group_id: g.group_id.0.to_string(),
                protocol_type: g.protocol_type.to_string(),
                state: g.group_state.to_string(),
            })
            .collect();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(groups)
    }

    /// Every transactional id the broker knows, sorted.
    pub async fn list_transactions(&self) -> Result<Vec<ListedTransaction>, ClientError> {
        let response = self
            .conn
            .send(0, &ListTransactionsRequest::default())
            .await?;
        if response.error_code != 0 {
            return Err(self.refused("ListTransactions", response.error_code));
        }
        let mut listed: Vec<_> = response
            .transaction_states
            .into_iter()
            .map(|t| ListedTransaction {
                transactional_id: t.transactional_id.0.to_string(),
                producer_id: t.producer_id.0,
                state: t.transaction_state.to_string(),
            })
            .collect();
        listed.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(listed)
    }

    /// A transactional id's producer and open transaction.
    pub async fn describe_transaction(
        &self,
        transactional_id: &str,
    ) -> Result<TransactionDescription, ClientError> {
        let request = DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(text(transactional_id))]);
        let response = self.conn.send(0, &request).await?;
        let t = response
            .transaction_states
            .into_iter()
            .next()
            .ok_or_else(|| self.refused("DescribeTransactions (nothing in the answer)", -1))?;
        if t.error_code != 0 {
            return Err(self.refused("DescribeTransactions", t.error_code));
        }
        let mut partitions: Vec<TopicPartition> = t
            .topics
            .iter()
            .flat_map(|topic| {
                topic
                    .partitions
                    .iter()
                    .map(|&p| TopicPartition::new(topic.topic.0.as_str(), p))
            })
            .collect();
        partitions.sort();
        Ok(TransactionDescription {
            transactional_id: t.transactional_id.0.to_string(),
            producer: (t.producer_id.0, t.producer_epoch),
            state: t.transaction_state.to_string(),
            timeout_ms: t.transaction_timeout_ms,
            start_time_ms: t.transaction_start_time_ms,
            partitions,
        })
    }

    /// A group's state and members, with their partitions for consumer groups.
    pub async fn describe_group(&self, group: &str) -> Result<GroupDescription, ClientError> {
        let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]);
        let response = self.conn.send(5, &request).await?;
        let g = response
            .groups
            .into_iter()
            .next()
            .ok_or_else(|| self.refused("DescribeGroups (no group in the answer)", -1))?;
        if g.error_code != 0 {
            return Err(self.refused("DescribeGroups", g.error_code));
        }
        let consumer = g.protocol_type.as_str() == "consumer";
        let members = g
            .members
            .into_iter()
            .map(|m| GroupMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.map(|s| s.to_string()),
                client_id: m.client_id.to_string(),
                client_host: m.client_host.to_string(),
                assignment: if consumer {
                    decode_assignment(&m.member_assignment)
                        .unwrap_or_default()
                        .into_iter()
                        .flat_map(|(t, ps)| {
                            ps.into_iter()
                                .map(move |p| TopicPartition::new(t.clone(), p))
                        })
                        .collect()
                } else {
                    Vec::new()
                },
            })
            .collect();
        Ok(GroupDescription {
            state: g.group_state.to_string(),
            protocol_type: g.protocol_type.to_string(),
            members,
        })
    }

    /// A group's committed offsets.
    pub async fn committed_offsets(
        &self,
        group: &str,
    ) -> Result<BTreeMap<TopicPartition, i64>, ClientError> {
        let request =
            OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(text(group)))
                .with_topics(None)]);
        let response = self.conn.send(8, &request).await?;
        let mut offsets = BTreeMap::new();
        for g in response.groups {
            if g.error_code != 0 {
                return Err(self.refused("OffsetFetch", g.error_code));
            }
            for t in g.topics {
                for p in t.partitions {
                    if p.error_code == 0 && p.committed_offset >= 0 {
                        offsets.insert(
                            TopicPartition::new(t.name.0.to_string(), p.partition_index),
                            p.committed_offset,
                        );
                    }
                }
            }
        }
        Ok(offsets)
    }

    /// How many partitions `topic` has.
    pub async fn partition_count(&self, topic: &str) -> Result<i32, ClientError> {
        let request = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(text(topic)))),
        ]));
        let response = self.conn.send(9, &request).await?;
        let t = response
            .topics
            .first()
            .ok_or_else(|| self.refused("Metadata (no topic in the answer)", -1))?;
        if t.error_code != 0 {
            return Err(self.refused(&format!("Metadata of topic {topic}"), t.error_code));
        }
        Ok(t.partitions.len() as i32)
    }

    /// The offset `spec` names in each partition.
    pub async fn list_offsets(
        &self,
        partitions: &[TopicPartition],
        spec: OffsetSpec,
    ) -> Result<BTreeMap<TopicPartition, i64>, ClientError> {
        let timestamp = match spec {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(t) => t,
        };
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in partitions {
            by_topic.entry(&tp.topic).or_default().push(tp.partition);
        }
        let request = ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_topics(
                by_topic
                    .iter()
                    .map(|(topic, ps)| {
                        ListOffsetsTopic::default()
                            .with_name(TopicName(text(topic)))
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
        let response = self.conn.send(6, &request).await?;
        let mut found = BTreeMap::new();
        let mut missing = Vec::new();
        for t in response.topics {
            for p in t.partitions {
                if p.error_code != 0 {
                    return Err(self.refused("ListOffsets", p.error_code));
                }
                let tp = TopicPartition::new(t.name.0.to_string(), p.partition_index);
                if p.offset >= 0 {
                    found.insert(tp, p.offset);
                } else {
                    missing.push(tp);
                }
            }
        }
        // No record that late: the end of the partition, as Kafka's tools take it.
        if !missing.is_empty() {
            found.extend(Box::pin(self.list_offsets(&missing, OffsetSpec::Latest)).await?);
        }
        Ok(found)
    }

    /// Commits offsets for a group from outside it (the group must have no members).
    pub async fn commit_offsets(
        &self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), ClientError> {
        let mut by_topic: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
        for (tp, offset) in offsets {
            by_topic
                .entry(&tp.topic)
                .or_default()
                .push((tp.partition, *offset));
        }
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(
                by_topic
                    .iter()
                    .map(|(topic, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(text(topic)))
                            .with_partitions(
                                ps.iter()
                                    .map(|&(p, o)| {
                                        OffsetCommitRequestPartition::default()
                                            .with_partition_index(p)
                                            .with_committed_offset(o)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let response = self.conn.send(8, &request).await?;
        for t in response.topics {
            for p in t.partitions {
                if p.error_code != 0 {
                    return Err(self.refused("OffsetCommit", p.error_code));
                }
            }
        }
        Ok(())
    }
}
