//! One consumer group under Kafka's classic protocol: members join (JoinGroup), the leader's
//! assignment is handed out (SyncGroup), members prove they are alive (Heartbeat) and leave
//! (LeaveGroup or an expired session). The broker never looks inside subscriptions or
//! assignments: the assignor runs in the leader's client, so every assignor works.
//!
//! ```text
//! Empty ──join──▶ PreparingRebalance ──all rejoined / rebalance timeout──▶ CompletingRebalance
//!   ▲                 ▲                                                          │
//!   └─last leaves─────┴──────join, leave, expiry───── Stable ◀──leader's sync────┘
//! ```
//!
//! Replies that must wait for other members travel through oneshot channels held by the
//! members; everything here runs under the coordinator's lock and does no I/O.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::error::GroupError;
pub(crate) use super::member::{GroupState, JoinRequest, JoinResult, Member, Pending, SyncResult};
use super::rebalance::InitialDelay;
use super::records::{GroupValue, StoredMember};

/// A consumer group.
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) id: String,
    pub(crate) state: GroupState,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol: Option<String>,
    pub(crate) generation: i32,
    pub(crate) leader: Option<String>,
    /// Members in the order they joined (the first is leader by default).
    pub(crate) members: Vec<Member>,
    /// Members told their id with MEMBER_ID_REQUIRED, until they join with it: a join round
    /// waits for them too.
    pub(super) pending_members: HashMap<String, Instant>,
    pub(super) rebalance_deadline: Option<Instant>,
    /// The first rebalance of an empty group waits this long for more members
    /// (`group.initial.rebalance.delay.ms`).
    pub(super) initial_delay: Option<InitialDelay>,
    /// Wall-clock time of the last state change (stored with the group).
    pub(crate) state_timestamp: i64,
}

/// Whether a call changed what must be stored about the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Changed {
    No,
    /// The group's metadata changed: store it.
    Store,
    /// A static member came back under a new member id: store the group, and if that fails
    /// give the member its old id back ([`Group::undo_replacement`]), as Kafka does.
    StoreReplacement {
        /// The member id before.
        old: String,
        /// The member id now.
        new: String,
        /// Whether the member led the group before.
        was_leader: bool,
    },
}

impl Group {
    pub(crate) fn new(id: &str) -> Self {
        Self {
            id: id.to_string(),
            state: GroupState::Empty,
            protocol_type: None,
            protocol: None,
            generation: 0,
            leader: None,
            members: Vec::new(),
            pending_members: HashMap::new(),
            rebalance_deadline: None,
            initial_delay: None,
            state_timestamp: 0,
        }
    }

    /// The group as replayed from `__consumer_offsets`: empty, at its stored generation.
    pub(crate) fn restored(id: &str, stored: &GroupValue) -> Self {
        let mut group = Self::new(id);
        group.protocol_type = Some(stored.protocol_type.clone());
        group.generation = stored.generation;
        group.state_timestamp = stored.state_timestamp;
        group
    }

    pub(super) fn member(&self, member_id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.member_id == member_id)
    }

    pub(super) fn member_mut(&mut self, member_id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.member_id == member_id)
    }

    fn static_member(&self, instance_id: &str) -> Option<&Member> {
        self.members
            .iter()
            .find(|m| m.group_instance_id.as_deref() == Some(instance_id))
    }

    /// The record to store for the group's current metadata.
    pub(crate) fn stored(&self) -> GroupValue {
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            state_timestamp: self.state_timestamp,
            members: self
                .members
                .iter()
                .map(|m| StoredMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout.as_millis() as i32,
                    session_timeout_ms: m.session_timeout.as_millis() as i32,
                    subscription: self
                        .protocol
                        .as_deref()
                        .map(|p| m.metadata(p))
                        .unwrap_or_default(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Checks that a member of this id (and instance id) is in the group at this generation.
    /// `generation` -1 skips the generation check.
    pub(crate) fn check_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), GroupError> {
        if let Some(instance) = instance_id {
            if let Some(m) = self.static_member(instance) {
                if m.member_id != member_id {
                    return Err(GroupError::FencedInstanceId);
                }
            }
        }
        if self.member(member_id).is_none() {
            return Err(GroupError::UnknownMemberId);
        }
        if generation != -1 && generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        Ok(())
    }

    /// Whether a commit (OffsetCommit, or TxnOffsetCommit if `transactional`) may store
    /// offsets, by the rules of Kafka's classic group coordinator:
    /// - generation < 0 while the group is empty: a commit from outside the group (an admin,
    ///   or a consumer using assign()), accepted whatever member id it names;
    /// - a generation ≥ 0, a member id or an instance id: the instance id must be a static
    ///   member's (else UNKNOWN_MEMBER_ID) held by this member id (else FENCED_INSTANCE_ID),
    ///   the member must be in the group (UNKNOWN_MEMBER_ID) and the generation exactly the
    ///   group's (ILLEGAL_GENERATION, -1 included);
    /// - none of them in a group with members: UNKNOWN_MEMBER_ID for OffsetCommit; accepted
    ///   for TxnOffsetCommit, whose first versions carry no member;
    /// - an OffsetCommit that passed these while the group waits for its leader's assignment
    ///   (CompletingRebalance) is REBALANCE_IN_PROGRESS: the member joined the new generation
    ///   but does not know its partitions yet.
    pub(crate) fn validate_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        transactional: bool,
    ) -> Result<(), GroupError> {
        let empty = self.state == GroupState::Empty;
        if generation < 0 && empty {
            return Ok(());
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            if let Some(instance) = instance_id {
                match self.static_member(instance) {
                    None => return Err(GroupError::UnknownMemberId),
                    Some(m) if m.member_id != member_id => {
                        return Err(GroupError::FencedInstanceId)
                    }
                    Some(_) => {}
                }
            }
            if self.member(member_id).is_none() {
                return Err(GroupError::UnknownMemberId);
            }
            if generation != self.generation {
                return Err(GroupError::IllegalGeneration);
            }
        } else if !transactional && !empty {
            return Err(GroupError::UnknownMemberId);
        }
        if !transactional && self.state == GroupState::CompletingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// Handles a JoinGroup; `initial_delay` is how long the first round of an empty group
    /// waits for more members.
    pub(crate) fn join(
        &mut self,
        request: JoinRequest,
        now: Instant,
        wall_ms: i64,
        initial_delay: Duration,
        new_member_id: impl FnOnce() -> String,
    ) -> (Pending<JoinResult>, Changed) {
        let fail = |code| {
            (
                Pending::Now(JoinResult::error(code, &request.member_id)),
                Changed::No,
            )
        };
        if let Some(t) = &self.protocol_type {
            if !self.members.is_empty() && *t != request.protocol_type {
                return fail(GroupError::InconsistentGroupProtocol);
            }
        }
        if !self.members.is_empty() && !self.supports_any(&request.protocols) {
            return fail(GroupError::InconsistentGroupProtocol);
        }

        let mut member_id = request.member_id.clone();
        if member_id.is_empty() {
            if let Some(instance) = request.group_instance_id.as_deref() {
                // A static member (re)joining: a new id; the old one, if any, is fenced.
                member_id = new_member_id();
                if let Some(old) = self.static_member(instance).map(|m| m.member_id.clone()) {
                    return self.replace_static_member(&old, member_id, request, now, wall_ms);
                }
            } else if request.require_known_member_id {
                member_id = new_member_id();
                self.pending_members
                    .insert(member_id.clone(), now + request.session_timeout);
                let mut reply = JoinResult::error(GroupError::MemberIdRequired, &member_id);
                reply.generation = -1;
                return (Pending::Now(reply), Changed::No);
            } else {
                member_id = new_member_id();
            }
        } else if self.member(&member_id).is_none()
            && self.pending_members.remove(&member_id).is_none()
        {
            return fail(GroupError::UnknownMemberId);
        } else if let Err(code) =
            self.check_member_instance(&member_id, request.group_instance_id.as_deref())
        {
            return fail(code);
        }

        // A follower of a stable group rejoining with the same protocols: nothing changes.
        if self.state == GroupState::Stable {
            if let Some(m) = self.member(&member_id) {
                if self.leader.as_deref() != Some(member_id.as_str())
                    && m.protocols == request.protocols
                {
                    return (
                        Pending::Now(self.join_result_for(&member_id, false)),
                        Changed::No,
                    );
                }
            }
        }

        let (sender, receiver) = oneshot::channel();
        self.protocol_type = Some(request.protocol_type.clone());
        match self.member_mut(&member_id) {
            Some(m) => {
                m.rejoined(request, now);
                m.join_waiter = Some(sender);
            }
            None => {
                self.member_added();
                self.members.push(Member {
                    member_id: member_id.clone(),
                    group_instance_id: request.group_instance_id,
                    client_id: request.client_id,
                    client_host: request.client_host,
                    session_timeout: request.session_timeout,
                    rebalance_timeout: request.rebalance_timeout,
                    protocols: request.protocols,
                    assignment: Bytes::new(),
                    join_waiter: Some(sender),
                    sync_waiter: None,
                    session_deadline: now + request.session_timeout,
                })
            }
        }
        if self.state != GroupState::PreparingRebalance {
            let first_round = self.state == GroupState::Empty;
            self.prepare_rebalance(now, wall_ms);
            if first_round {
                self.start_initial_delay(now, initial_delay);
            }
        }
        let changed = self.try_complete_join(now, wall_ms, false);
        (Pending::Later(receiver), changed)
    }

    fn check_member_instance(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        match (instance_id, self.member(member_id)) {
            (Some(instance), _) => match self.static_member(instance) {
                Some(m) if m.member_id != member_id => Err(GroupError::FencedInstanceId),
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// A static member came back with a new member id: the old one is fenced. In a stable
    /// group a follower keeps its assignment and nobody else rebalances.
    fn replace_static_member(
        &mut self,
        old: &str,
        new_id: String,
        request: JoinRequest,
        now: Instant,
        wall_ms: i64,
    ) -> (Pending<JoinResult>, Changed) {
        let was_leader = self.leader.as_deref() == Some(old);
        let stable = self.state == GroupState::Stable;
        let Some(member) = self.member_mut(old) else {
            return (
                Pending::Now(JoinResult::error(GroupError::UnknownMemberId, "")),
                Changed::No,
            );
        };
        if let Some(waiter) = member.join_waiter.take() {
            let _ = waiter.send(JoinResult::error(GroupError::FencedInstanceId, old));
        }
        if let Some(waiter) = member.sync_waiter.take() {
            let _ = waiter.send(Err(GroupError::FencedInstanceId));
        }
        member.member_id = new_id.clone();
        member.rejoined(request, now);
        // As Kafka: a returning member of a stable group keeps its assignment and nobody
        // rebalances, as long as the protocol the group would choose stays the same. A
        // returning leader is told the old leader id, so that it does not take itself for the
        // leader and reassign; the group knows it by its new id.
        if stable && self.select_protocol() == self.protocol {
            let reply = self.join_result_for(&new_id, false);
            if was_leader {
                self.leader = Some(new_id.clone());
            }
            let changed = Changed::StoreReplacement {
                old: old.to_string(),
                new: new_id,
                was_leader,
            };
            return (Pending::Now(reply), changed);
        }
        if was_leader {
            self.leader = Some(new_id.clone());
        }
        let (sender, receiver) = oneshot::channel();
        if let Some(m) = self.member_mut(&new_id) {
            m.join_waiter = Some(sender);
        }
        if self.state != GroupState::PreparingRebalance {
            self.prepare_rebalance(now, wall_ms);
        }
        let changed = self.try_complete_join(now, wall_ms, false);
        (Pending::Later(receiver), changed)
    }

    /// Gives a replaced static member its old member id back, when the group could not be
    /// stored with the new one.
    pub(crate) fn undo_replacement(&mut self, old: &str, new: &str, was_leader: bool) {
        if let Some(member) = self.member_mut(new) {
            member.member_id = old.to_string();
            if was_leader {
                self.leader = Some(old.to_string());
            }
        }
    }

    fn supports_any(&self, protocols: &[(String, Bytes)]) -> bool {
        protocols.iter().any(|(name, _)| {
            self.members
                .iter()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
    }

    /// Handles a SyncGroup. When the leader's assignment completes the rebalance, the group
    /// must be stored before the replies go out: the caller does that, then calls
    /// [`Group::release_sync_waiters`].
    pub(crate) fn sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
        wall_ms: i64,
    ) -> (Pending<SyncResult>, Changed) {
        if let Err(error) = self.check_member(member_id, instance_id, generation) {
            return (Pending::Now(Err(error)), Changed::No);
        }
        match self.state {
            GroupState::PreparingRebalance => (
                Pending::Now(Err(GroupError::RebalanceInProgress)),
                Changed::No,
            ),
            GroupState::Stable => {
                let assignment = self
                    .member(member_id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default();
                (Pending::Now(Ok(assignment)), Changed::No)
            }
            GroupState::Empty | GroupState::Dead => {
                (Pending::Now(Err(GroupError::UnknownMemberId)), Changed::No)
            }
            GroupState::CompletingRebalance => {
                let (sender, receiver) = oneshot::channel();
                if let Some(m) = self.member_mut(member_id) {
                    m.sync_waiter = Some(sender);
                }
                if self.leader.as_deref() != Some(member_id) {
                    return (Pending::Later(receiver), Changed::No);
                }
                for m in &mut self.members {
                    m.assignment = assignments
                        .iter()
                        .find(|(id, _)| *id == m.member_id)
                        .map(|(_, a)| a.clone())
                        .unwrap_or_default();
                }
                self.state = GroupState::Stable;
                self.state_timestamp = wall_ms;
                (Pending::Later(receiver), Changed::Store)
            }
        }
    }

    /// Sends every waiting SyncGroup its member's assignment, once the group is stored with
    /// it.
    pub(crate) fn release_sync_waiters(&mut self) {
        for m in &mut self.members {
            if let Some(waiter) = m.sync_waiter.take() {
                let _ = waiter.send(Ok(m.assignment.clone()));
            }
        }
    }

    /// The assignment of `generation` could not be stored: as Kafka does, the members waiting
    /// for it get `error`, the assignment is dropped and the group rebalances again.
    /// Nothing happens if the group has moved on from that generation meanwhile.
    pub(crate) fn assignment_not_stored(
        &mut self,
        generation: i32,
        error: GroupError,
        now: Instant,
        wall_ms: i64,
    ) {
        if self.generation != generation || self.state != GroupState::Stable {
            return;
        }
        for m in &mut self.members {
            m.assignment = Bytes::new();
            if let Some(waiter) = m.sync_waiter.take() {
                let _ = waiter.send(Err(error));
            }
        }
        self.prepare_rebalance(now, wall_ms);
    }

    /// Extends a member's session: it showed it is alive (an offset commit does, as in Kafka).
    pub(crate) fn touch(&mut self, member_id: &str, now: Instant) {
        if let Some(m) = self.member_mut(member_id) {
            m.session_deadline = now + m.session_timeout;
        }
    }

    /// Handles a Heartbeat.
    pub(crate) fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> Result<(), GroupError> {
        self.check_member(member_id, instance_id, generation)?;
        if let Some(m) = self.member_mut(member_id) {
            m.session_deadline = now + m.session_timeout;
        }
        match self.state {
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
            _ => Ok(()),
        }
    }

    /// Handles one member of a LeaveGroup. Returns whether it left and whether the group
    /// changed.
    pub(crate) fn leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        now: Instant,
        wall_ms: i64,
    ) -> (Result<(), GroupError>, Changed) {
        let member_id = match (member_id, instance_id) {
            ("", Some(instance)) => match self.static_member(instance) {
                Some(m) => m.member_id.clone(),
                None => return (Err(GroupError::UnknownMemberId), Changed::No),
            },
            (id, instance) => {
                if let Err(error) = self.check_member(id, instance, -1) {
                    return (Err(error), Changed::No);
                }
                id.to_string()
            }
        };
        (Ok(()), self.remove_member(&member_id, now, wall_ms))
    }

    pub(super) fn remove_member(&mut self, member_id: &str, now: Instant, wall_ms: i64) -> Changed {
        let Some(index) = self.members.iter().position(|m| m.member_id == member_id) else {
            return Changed::No;
        };
        let member = self.members.remove(index);
        if let Some(waiter) = member.join_waiter {
            let _ = waiter.send(JoinResult::error(GroupError::UnknownMemberId, member_id));
        }
        if let Some(waiter) = member.sync_waiter {
            let _ = waiter.send(Err(GroupError::UnknownMemberId));
        }
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                if self.members.is_empty() {
                    self.generation += 1;
                    self.state = GroupState::Empty;
                    self.protocol = None;
                    self.leader = None;
                    self.state_timestamp = wall_ms;
                    Changed::Store
                } else {
                    self.prepare_rebalance(now, wall_ms);
                    Changed::No
                }
            }
            GroupState::PreparingRebalance => self.try_complete_join(now, wall_ms, false),
            GroupState::Empty | GroupState::Dead => Changed::No,
        }
    }
}
