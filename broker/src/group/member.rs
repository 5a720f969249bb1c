//! A group's members and what they ask and are answered: JoinGroup's request and result,
//! SyncGroup's result, and the state names DescribeGroups shows.

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::error::GroupError;

/// A group's state, named as Kafka names it in DescribeGroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    pub(crate) fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// What a JoinGroup is answered with.
#[derive(Debug, Clone, Default)]
pub(crate) struct JoinResult {
    /// Why the join was refused, if it was.
    pub(crate) error: Option<GroupError>,
    pub(crate) generation: i32,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol: Option<String>,
    pub(crate) leader: String,
    pub(crate) member_id: String,
    /// For the leader only: (member id, instance id, metadata for the chosen protocol).
    pub(crate) members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinResult {
    /// A join refused with `code`.
    pub(crate) fn error(error: GroupError, member_id: &str) -> Self {
        Self {
            error: Some(error),
            generation: -1,
            member_id: member_id.to_string(),
            ..Self::default()
        }
    }
}

/// What a SyncGroup is answered with: the member's assignment, or why not.
pub(crate) type SyncResult = Result<Bytes, GroupError>;

/// A JoinGroup as the group sees it.
#[derive(Debug, Clone)]
pub(crate) struct JoinRequest {
    pub(crate) member_id: String,
    pub(crate) group_instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) session_timeout: Duration,
    pub(crate) rebalance_timeout: Duration,
    pub(crate) protocol_type: String,
    pub(crate) protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new member first gets its id with MEMBER_ID_REQUIRED.
    pub(crate) require_known_member_id: bool,
}

/// A reply now, or a channel on which it will come.
pub(crate) enum Pending<T> {
    Now(T),
    Later(oneshot::Receiver<T>),
}

/// A member of a group, with the replies it waits for.
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) member_id: String,
    pub(crate) group_instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) session_timeout: Duration,
    pub(crate) rebalance_timeout: Duration,
    pub(crate) protocols: Vec<(String, Bytes)>,
    pub(crate) assignment: Bytes,
    pub(super) join_waiter: Option<oneshot::Sender<JoinResult>>,
    pub(super) sync_waiter: Option<oneshot::Sender<SyncResult>>,
    pub(super) session_deadline: Instant,
}

impl Member {
    /// Takes what a JoinGroup of this member says of it, and starts a new session.
    pub(super) fn rejoined(&mut self, request: JoinRequest, now: Instant) {
        self.client_id = request.client_id;
        self.client_host = request.client_host;
        self.session_timeout = request.session_timeout;
        self.rebalance_timeout = request.rebalance_timeout;
        self.protocols = request.protocols;
        self.session_deadline = now + self.session_timeout;
    }

    /// The member's metadata for `protocol`.
    pub(crate) fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}
