//! Consumer groups: list, describe (members and their partitions), committed offsets, and
//! offsets set from outside the group.

use std::collections::BTreeMap;

use eddy_core::log::TopicPartition;
use eddy_core::wire::consumer_protocol::decode_assignment;
use kafka_protocol::messages::{DescribeGroupsRequest, GroupId, ListGroupsRequest};

use super::{text, Admin};
use crate::client::cluster::CoordinatorType;
use crate::client::offsets::{self, Committer};
use crate::client::ClientError;

/// A group's state, by the names Kafka's coordinator gives them (its `GroupState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GroupState {
    /// No members; committed offsets may remain.
    Empty,
    /// Members are joining a rebalance.
    PreparingRebalance,
    /// Members have joined and wait for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// Gone, or never known: nothing of the group remains.
    Dead,
    /// A consumer-protocol group computing a new assignment (KIP-848).
    Assigning,
    /// A consumer-protocol group whose members take up a new assignment (KIP-848).
    Reconciling,
    /// A state this client does not know.
    Unknown,
}

impl GroupState {
    /// Kafka's name of the state, as its tools print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::PreparingRebalance => "PreparingRebalance",
            Self::CompletingRebalance => "CompletingRebalance",
            Self::Stable => "Stable",
            Self::Dead => "Dead",
            Self::Assigning => "Assigning",
            Self::Reconciling => "Reconciling",
            Self::Unknown => "Unknown",
        }
    }

    /// The state a broker named (case-insensitively, as Kafka's `GroupState.parse`);
    /// [`GroupState::Unknown`] for a name this client does not know.
    pub fn parse(name: &str) -> Self {
        [
            Self::Empty,
            Self::PreparingRebalance,
            Self::CompletingRebalance,
            Self::Stable,
            Self::Dead,
            Self::Assigning,
            Self::Reconciling,
        ]
        .into_iter()
        .find(|s| s.as_str().eq_ignore_ascii_case(name))
        .unwrap_or(Self::Unknown)
    }

    /// Whether no member is in the group, so its offsets may be changed from outside.
    pub fn is_inactive(self) -> bool {
        matches!(self, Self::Empty | Self::Dead)
    }
}

impl std::fmt::Display for GroupState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    /// The group id.
    pub group_id: String,
    /// `consumer` for consumer groups.
    pub protocol_type: String,
    /// Its state.
    pub state: GroupState,
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
    /// Its state: [`GroupState::Dead`] for a group the coordinator does not know.
    pub state: GroupState,
    /// `consumer` for consumer groups.
    pub protocol_type: String,
    /// The members.
    pub members: Vec<GroupMember>,
}

impl Admin {
    /// Every group the broker knows.
    pub async fn list_groups(&self) -> Result<Vec<ListedGroup>, ClientError> {
        let cluster = &self.cluster;
        let response = cluster
            .retry(self.deadline(), || async {
                let broker = cluster.any_broker().await?;
                let response = cluster.send(&broker, &ListGroupsRequest::default()).await?;
                match response.error_code {
                    0 => Ok(response),
                    code => Err(Self::refused("ListGroups", code)),
                }
            })
            .await?;
        let mut groups: Vec<_> = response
            .groups
            .into_iter()
            .map(|g| ListedGroup {
                group_id: g.group_id.0.to_string(),
                protocol_type: g.protocol_type.to_string(),
                state: GroupState::parse(&g.group_state),
            })
            .collect();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(groups)
    }

    /// A group's state and members, with their partitions for consumer groups.
    pub async fn describe_group(&self, group: &str) -> Result<GroupDescription, ClientError> {
        let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]);
        let cluster = &self.cluster;
        let g = cluster
            .with_coordinator(CoordinatorType::Group, group, self.deadline(), |broker| {
                let request = request.clone();
                async move {
                    let response = cluster.send(&broker, &request).await?;
                    let g = response.groups.into_iter().next().ok_or_else(|| {
                        Self::refused("DescribeGroups (no group in the answer)", -1)
                    })?;
                    match g.error_code {
                        0 => Ok(g),
                        code => Err(Self::refused("DescribeGroups", code)),
                    }
                }
            })
            .await?;
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
            state: GroupState::parse(&g.group_state),
            protocol_type: g.protocol_type.to_string(),
            members,
        })
    }

    /// A group's committed offsets.
    pub async fn committed_offsets(
        &self,
        group: &str,
    ) -> Result<BTreeMap<TopicPartition, i64>, ClientError> {
        offsets::fetch(&self.cluster, group, None, false, self.deadline()).await
    }

    /// Sets a group's committed offsets from outside it (the group must have no members):
    /// what resetting a group's offsets does.
    pub async fn alter_group_offsets(
        &self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), ClientError> {
        offsets::commit(
            &self.cluster,
            group,
            &Committer {
                generation_id: -1,
                ..Committer::default()
            },
            offsets,
            self.deadline(),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::GroupState;

    #[test]
    fn states_are_read_by_kafkas_names_and_printed_as_them() {
        for name in [
            "Empty",
            "PreparingRebalance",
            "CompletingRebalance",
            "Stable",
            "Dead",
        ] {
            assert_eq!(GroupState::parse(name).to_string(), name);
        }
        assert_eq!(GroupState::parse("stable"), GroupState::Stable);
        assert_eq!(GroupState::parse("Asleep"), GroupState::Unknown);
        assert!(GroupState::Empty.is_inactive() && GroupState::Dead.is_inactive());
        assert!(!GroupState::CompletingRebalance.is_inactive());
    }
}
