//! A classic group's join rounds: a rebalance starts, waits for every member (and every
//! member just told its id) to join again, and ends with a generation, a protocol and a
//! leader, or at its timeout without the members that did not rejoin. The first round of an
//! empty group waits `group.initial.rebalance.delay.ms` for more members first, extended
//! while members keep coming, and ends on the coordinator's timer, as Kafka's initial delayed
//! join does.

use std::time::Duration;

use tokio::time::Instant;

use super::error::GroupError;
use super::member::{GroupState, JoinResult};
use super::membership::{Changed, Group};

/// The wait of an empty group's first join round for more members.
#[derive(Debug)]
pub(super) struct InitialDelay {
    /// When the wait ends (or is extended).
    until: Instant,
    /// How long the last wait was.
    delay: Duration,
    /// How much of the rebalance timeout is left to extend into.
    remaining: Duration,
    /// Whether a member joined during the wait.
    member_added: bool,
}

impl Group {
    /// Starts a join round: members waiting for an assignment must rejoin, and the round
    /// ends at the longest rebalance timeout of the members at the latest.
    pub(super) fn prepare_rebalance(&mut self, now: Instant, wall_ms: i64) {
        // Members waiting for their assignment must rejoin.
        for m in &mut self.members {
            if let Some(waiter) = m.sync_waiter.take() {
                let _ = waiter.send(Err(GroupError::RebalanceInProgress));
            }
        }
        let timeout = self.rebalance_timeout();
        self.state = GroupState::PreparingRebalance;
        self.rebalance_deadline = Some(now + timeout);
        self.state_timestamp = wall_ms;
    }

    /// The first join round of an empty group waits `delay` for more members
    /// (`group.initial.rebalance.delay.ms`). As in Kafka, that round ends only when the
    /// coordinator's timer finds the delay over, never at a join, even when the delay is zero:
    /// consumers started together (each first told its member id) join one generation.
    pub(super) fn start_initial_delay(&mut self, now: Instant, delay: Duration) {
        let timeout = self.rebalance_timeout();
        self.initial_delay = Some(InitialDelay {
            until: now + delay,
            delay,
            remaining: timeout.saturating_sub(delay),
            member_added: false,
        });
    }

    /// A member joined during the initial delay: the round waits once more.
    pub(super) fn member_added(&mut self) {
        if let Some(initial) = &mut self.initial_delay {
            initial.member_added = true;
        }
    }

    fn rebalance_timeout(&self) -> Duration {
        self.members
            .iter()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or(Duration::from_secs(60))
    }

    /// Ends the join phase once every member has rejoined and every member told its id
    /// (MEMBER_ID_REQUIRED) has joined with it, or when `deadline_passed` (members that did
    /// not rejoin are removed). The first round of an empty group ends only when its initial
    /// delay does. As in Kafka, the group is stored only if it is left empty: with members,
    /// the leader's assignment (SyncGroup) stores it.
    pub(crate) fn try_complete_join(
        &mut self,
        now: Instant,
        wall_ms: i64,
        deadline_passed: bool,
    ) -> Changed {
        if self.state != GroupState::PreparingRebalance {
            return Changed::No;
        }
        let all_joined =
            self.members.iter().all(|m| m.join_waiter.is_some()) && self.pending_members.is_empty();
        if !deadline_passed && (!all_joined || self.initial_delay.is_some()) {
            return Changed::No;
        }
        self.members.retain(|m| m.join_waiter.is_some());
        self.generation += 1;
        self.rebalance_deadline = None;
        self.initial_delay = None;
        self.state_timestamp = wall_ms;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol = None;
            self.leader = None;
            return Changed::Store;
        }
        self.protocol = self.select_protocol();
        if self
            .leader
            .as_ref()
            .is_none_or(|l| self.member(l).is_none())
        {
            self.leader = Some(self.members[0].member_id.clone());
        }
        self.state = GroupState::CompletingRebalance;
        let replies: Vec<_> = self
            .members
            .iter()
            .map(|m| {
                let is_leader = self.leader.as_deref() == Some(m.member_id.as_str());
                (
                    m.member_id.clone(),
                    self.join_result_for(&m.member_id, is_leader),
                )
            })
            .collect();
        for (member_id, reply) in replies {
            if let Some(m) = self.member_mut(&member_id) {
                m.session_deadline = now + m.session_timeout;
                if let Some(waiter) = m.join_waiter.take() {
                    let _ = waiter.send(reply);
                }
            }
        }
        Changed::No
    }

    /// The protocol every member supports that most members prefer (Kafka's vote).
    pub(super) fn select_protocol(&self) -> Option<String> {
        let first = self.members.first()?;
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|n| {
                self.members
                    .iter()
                    .all(|m| m.protocols.iter().any(|(p, _)| p == *n))
            })
            .collect();
        let mut votes: Vec<(usize, &String)> = candidates.iter().map(|c| (0, *c)).collect();
        for m in &self.members {
            if let Some((_, choice)) = m.protocols.iter().find(|(p, _)| candidates.contains(&p)) {
                if let Some(v) = votes.iter_mut().find(|(_, c)| *c == choice) {
                    v.0 += 1;
                }
            }
        }
        // The most votes; ties go to the first member's preference.
        let best = votes.iter().map(|(n, _)| *n).max()?;
        votes
            .iter()
            .find(|(n, _)| *n == best)
            .map(|(_, c)| (*c).clone())
    }

    pub(super) fn join_result_for(&self, member_id: &str, leader: bool) -> JoinResult {
        let protocol = self.protocol.clone().unwrap_or_default();
        JoinResult {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members: if leader {
                self.members
                    .iter()
                    .map(|m| {
                        (
                            m.member_id.clone(),
                            m.group_instance_id.clone(),
                            m.metadata(&protocol),
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    /// Expires silent members, members told their id that never joined with it, initial
    /// delays and overdue rebalances. Returns whether the group changed.
    pub(crate) fn tick(&mut self, now: Instant, wall_ms: i64) -> Changed {
        let pending = self.pending_members.len();
        self.pending_members.retain(|_, deadline| *deadline > now);
        let mut changed = Changed::No;
        if self.pending_members.len() < pending
            && self.try_complete_join(now, wall_ms, false) != Changed::No
        {
            changed = Changed::Store;
        }
        // As Kafka: while members keep coming, the initial delay starts again (within the
        // rebalance timeout); then the round ends with those that joined.
        let initial_over = match &mut self.initial_delay {
            Some(initial) if initial.until <= now => {
                if initial.member_added && !initial.remaining.is_zero() {
                    let delay = initial.delay.min(initial.remaining);
                    initial.remaining = initial.remaining.saturating_sub(initial.delay);
                    initial.delay = delay;
                    initial.until = now + delay;
                    initial.member_added = false;
                    false
                } else {
                    true
                }
            }
            _ => false,
        };
        if initial_over && self.try_complete_join(now, wall_ms, true) != Changed::No {
            changed = Changed::Store;
        }
        // Members waiting in a join are governed by the rebalance timeout, not the session.
        let expired: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.join_waiter.is_none() && m.session_deadline <= now)
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in expired {
            tracing::info!(group = %self.id, member = %member_id, "session expired");
            if self.remove_member(&member_id, now, wall_ms) != Changed::No {
                changed = Changed::Store;
            }
        }
        if self.rebalance_deadline.is_some_and(|d| d <= now)
            && self.try_complete_join(now, wall_ms, true) != Changed::No
        {
            changed = Changed::Store;
        }
        changed
    }
}
