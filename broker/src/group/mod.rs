//! The group coordinator: consumer groups (membership, rebalances, sessions) and their
//! committed offsets, kept as records in the compacted internal topic `__consumer_offsets`
//! like Kafka's. At start the state is rebuilt by replaying that topic; there is no other store.
//!
//! # Store, then apply, then answer
//! Under the coordinator's lock an operation checks, decides on its records and queues them
//! (an [`AppendQueue`]: appended in the order decided and made durable on a blocking thread,
//! so the lock is never held across the disk); then, off the lock, it waits for them to be
//! durable and only then applies and answers. Committed offsets (and offsets deleted with their group, a
//! partition or a topic) change in memory only once stored. Membership follows Kafka's classic
//! protocol: a rebalance's assignment is handed out only once the group is stored with it (if
//! it cannot be, the members get the storage error and the group rebalances again), a returning
//! static member keeps its old id if its new one cannot be stored, and a LeaveGroup whose
//! record fails answers the error. Refusals are [`GroupError`]s, which handlers answer with
//! Kafka's codes; records that could not be stored are NOT_COORDINATOR when the disk failed,
//! as Kafka's coordinator maps them.
//!
//! A group lives in the partition `abs(javaHashCode(group id)) % partitions` of
//! `__consumer_offsets`, as in Kafka.
//!
//! Offsets committed inside a transaction (TxnOffsetCommit) are appended as the producer's
//! transactional batch and held pending until the transaction coordinator's marker reaches the
//! group's partition: a COMMIT makes them the group's offsets, an ABORT discards them.

mod error;
mod member;
mod membership;
mod offsets;
mod rebalance;
pub(crate) mod records;
mod replay;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use eddy_core::log::Record;
use eddy_core::wire::batch::BatchBuilder;
use eddy_core::wire::compression::Compression;
use tokio::sync::watch;

pub(crate) use error::{GroupError, NotStored};
use membership::{Changed, Group};
pub(crate) use membership::{GroupState, JoinRequest, JoinResult, Pending, SyncResult};
pub(crate) use offsets::CommitResult;
pub(crate) use records::OffsetValue;
use records::OffsetsKey;

use crate::clock::{Clock, Now};
use crate::storage::{AppendQueue, Partition, QueuedAppend, StorageError};

/// The internal topic of groups and offsets.
pub(crate) const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's limit on the metadata stored with an offset (`offset.metadata.max.bytes`).
const OFFSET_METADATA_MAX_BYTES: usize = 4096;

/// Settings of the group coordinator.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// Shortest session a member may ask for (`group.min.session.timeout.ms`, 6 s).
    pub min_session_timeout: Duration,
    /// Longest session a member may ask for (`group.max.session.timeout.ms`, 30 min).
    pub max_session_timeout: Duration,
    /// How long the offsets of a group without members are kept
    /// (`offsets.retention.minutes`, 7 days).
    pub offsets_retention: Duration,
    /// How long the first rebalance of an empty group waits for more members to join
    /// (`group.initial.rebalance.delay.ms`): 0, as the `server.properties` Kafka ships for
    /// development has it (Kafka's built-in default is 3 s).
    pub initial_rebalance_delay: Duration,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            min_session_timeout: Duration::from_secs(6),
            max_session_timeout: Duration::from_secs(1800),
            offsets_retention: Duration::from_secs(7 * 24 * 3600),
            initial_rebalance_delay: Duration::ZERO,
        }
    }
}

/// Offsets of one transaction not yet ended, with the `__consumer_offsets` offset of each
/// record.
type PendingOffsets = HashMap<(String, i32), (OffsetValue, i64)>;

/// A group and its committed offsets.
#[derive(Debug)]
struct GroupEntry {
    group: Group,
    offsets: HashMap<(String, i32), OffsetValue>,
    /// The `__consumer_offsets` offset of the record behind each committed offset: commits
    /// become visible in the order they were appended, whatever order their fsyncs end in.
    applied_at: HashMap<(String, i32), i64>,
    /// Offsets committed in transactions not yet ended, by producer id, with the
    /// `__consumer_offsets` offset of their record.
    pending: HashMap<i64, PendingOffsets>,
    /// Where the last markers that ended a producer's transactions lie in the group's
    /// `__consumer_offsets` partition, oldest first, and whether they committed: a
    /// TxnOffsetCommit whose batch was written before a marker but is found durable only
    /// after the marker was applied ends with the transaction it belonged to, instead of
    /// waiting for an end that has passed.
    ended: HashMap<i64, VecDeque<(i64, bool)>>,
}

/// How many of a producer's last markers a group keeps, and for how many producers: a
/// TxnOffsetCommit becomes durable moments after its batch is written, so only the most
/// recent markers can be behind one.
const ENDED_PER_PRODUCER: usize = 4;
const ENDED_PRODUCERS: usize = 64;

impl GroupEntry {
    fn new(id: &str) -> Self {
        Self {
            group: Group::new(id),
            offsets: HashMap::new(),
            applied_at: HashMap::new(),
            pending: HashMap::new(),
            ended: HashMap::new(),
        }
    }

    /// Ends a producer's transaction in this group: its pending offsets become the group's
    /// (commit) or are dropped (abort). `marker` is where the marker lies, when it was just
    /// written (a replay of the log meets every record in order and needs none).
    fn end_transaction(&mut self, producer_id: i64, commit: bool, marker: Option<i64>) {
        if let Some(offsets) = self.pending.remove(&producer_id) {
            if commit {
                for (key, (value, log_offset)) in offsets {
                    self.apply_offset(key, value, log_offset);
                }
            }
        }
        if let Some(marker) = marker {
            self.remember_end(producer_id, commit, marker);
        }
    }

    fn remember_end(&mut self, producer_id: i64, commit: bool, marker: i64) {
        if !self.ended.contains_key(&producer_id) && self.ended.len() >= ENDED_PRODUCERS {
            let oldest = self
                .ended
                .iter()
                .min_by_key(|(_, ends)| ends.back().map_or(i64::MIN, |&(at, _)| at))
                .map(|(&id, _)| id);
            if let Some(id) = oldest {
                self.ended.remove(&id);
            }
        }
        let ends = self.ended.entry(producer_id).or_default();
        if ends.len() == ENDED_PER_PRODUCER {
            ends.pop_front();
        }
        ends.push_back((marker, commit));
    }

    /// Whether the transaction of `producer_id` that holds a record at `log_offset` has
    /// already ended, and if so whether it committed: the first marker of that producer
    /// after the record ended it.
    fn ended_after(&self, producer_id: i64, log_offset: i64) -> Option<bool> {
        let ends = self.ended.get(&producer_id)?;
        ends.iter()
            .find(|&&(marker, _)| marker > log_offset)
            .map(|&(_, commit)| commit)
    }

    /// Forgets the offsets `which` picks that were stored before `stored_at` (the offset of
    /// the tombstones that delete them): an offset stored after the tombstones stands, as a
    /// replay of the log would have it.
    fn forget_offsets(&mut self, stored_at: i64, which: impl Fn(&(String, i32)) -> bool) {
        let applied_at = &self.applied_at;
        self.offsets
            .retain(|key, _| !which(key) || applied_at.get(key).is_some_and(|&at| at > stored_at));
        let offsets = &self.offsets;
        self.applied_at.retain(|key, _| offsets.contains_key(key));
    }

    /// Records a committed offset stored at `log_offset`, unless a later one was already.
    fn apply_offset(&mut self, key: (String, i32), value: OffsetValue, log_offset: i64) {
        if self.applied_at.get(&key).is_none_or(|&at| log_offset > at) {
            self.applied_at.insert(key.clone(), log_offset);
            self.offsets.insert(key, value);
        }
    }
}

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub(crate) struct MemberDescription {
    pub(crate) member_id: String,
    pub(crate) group_instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) metadata: Bytes,
    pub(crate) assignment: Bytes,
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub(crate) struct GroupDescription {
    pub(crate) state: GroupState,
    pub(crate) protocol_type: String,
    pub(crate) protocol: String,
    pub(crate) members: Vec<MemberDescription>,
}

/// Every group of the broker.
#[derive(Debug)]
pub(crate) struct GroupCoordinator {
    config: GroupConfig,
    /// Where every deadline and stored time comes from.
    clock: Clock,
    groups: Mutex<HashMap<String, GroupEntry>>,
    offsets_log: Vec<Arc<Partition>>,
    /// Records are queued here under the lock, in the order they are decided, and appended
    /// off it (and off the async workers).
    appends: AppendQueue,
}

/// Java's `String.hashCode`, over UTF-16 code units.
fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The partition of an internal topic with `partitions` partitions that holds `key` (a group
/// or transactional id): `abs(javaHashCode(key)) % partitions`, as Kafka places them.
pub(crate) fn coordinator_partition(key: &str, partitions: usize) -> usize {
    let hash = java_hash(key);
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    positive as usize % partitions.max(1)
}

/// Records a change queued for its partition (none if it stores nothing), or why they could
/// not be.
type Queued = Result<Option<QueuedAppend>, StorageError>;

impl GroupCoordinator {
    /// A coordinator over the partitions of `__consumer_offsets`, rebuilt from them.
    pub(crate) fn open(
        config: GroupConfig,
        clock: Clock,
        offsets_log: Vec<Arc<Partition>>,
    ) -> Result<Self, StorageError> {
        let coordinator = Self {
            config,
            clock,
            groups: Mutex::new(HashMap::new()),
            offsets_log,
            appends: AppendQueue::default(),
        };
        coordinator.replay()?;
        Ok(coordinator)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, GroupEntry>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The partition of `__consumer_offsets` that holds `group`.
    pub(crate) fn partition_for(&self, group: &str) -> usize {
        coordinator_partition(group, self.offsets_log.len())
    }

    /// Queues records for `group`'s partition. Called under the lock, so records are appended
    /// in the order they were decided.
    fn append(&self, group: &str, records: &[(OffsetsKey, Option<Bytes>)]) -> Queued {
        if records.is_empty() {
            return Ok(None);
        }
        let now = self.clock.now().wall_ms;
        let mut batch = BatchBuilder::new(Compression::None);
        for (key, value) in records {
            batch.append(&Record {
                key: Some(key.encode()?),
                value: value.clone(),
                headers: Vec::new(),
                timestamp: now,
            });
        }
        let partition = &self.offsets_log[self.partition_for(group)];
        Ok(Some(self.appends.push(
            partition,
            Bytes::from(batch.build(0)?),
            now,
            None,
        )))
    }

    fn store_group(&self, group: &Group) -> Queued {
        let key = OffsetsKey::Group {
            group: group.id.clone(),
        };
        self.append(&group.id, &[(key, Some(group.stored().encode()?))])
    }

    /// Handles a JoinGroup; waits while the group rebalances.
    pub(crate) async fn join(&self, group_id: &str, request: JoinRequest) -> JoinResult {
        let member_id = request.member_id.clone();
        if group_id.is_empty() {
            return JoinResult::error(GroupError::InvalidGroupId, &member_id);
        }
        if request.session_timeout < self.config.min_session_timeout
            || request.session_timeout > self.config.max_session_timeout
        {
            return JoinResult::error(GroupError::InvalidSessionTimeout, &member_id);
        }
        let client_id = request.client_id.clone();
        let (pending, changed, queued) = {
            let mut groups = self.lock();
            let entry = groups
                .entry(group_id.to_string())
                .or_insert_with(|| GroupEntry::new(group_id));
            let now = self.clock.now();
            let delay = self.config.initial_rebalance_delay;
            let (pending, changed) =
                entry
                    .group
                    .join(request, now.instant, now.wall_ms, delay, || {
                        new_member_id(&client_id)
                    });
            let queued = match changed {
                Changed::No => Ok(None),
                _ => self.store_group(&entry.group),
            };
            (pending, changed, queued)
        };
        if let Err(e) = durable(queued).await {
            tracing::error!(group = group_id, error = %e, "could not store the group");
            let error = GroupError::from(&e);
            // As Kafka: a returning static member keeps its old id, and this join fails. A
            // group left empty whose new generation was not stored is only logged (no member
            // is in that generation).
            if let Changed::StoreReplacement {
                old,
                new,
                was_leader,
            } = changed
            {
                if let Some(entry) = self.lock().get_mut(group_id) {
                    entry.group.undo_replacement(&old, &new, was_leader);
                }
                return JoinResult::error(error, "");
            }
        }
        match pending {
            Pending::Now(result) => result,
            Pending::Later(receiver) => receiver
                .await
                .unwrap_or_else(|_| JoinResult::error(GroupError::UnknownMemberId, &member_id)),
        }
    }

    /// Handles a SyncGroup; a follower waits for the leader's assignment.
    pub(crate) async fn sync(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
    ) -> SyncResult {
        let (pending, queued) = {
            let mut groups = self.lock();
            let Some(entry) = groups.get_mut(group_id) else {
                return Err(GroupError::UnknownMemberId);
            };
            let (pending, changed) = entry.group.sync(
                member_id,
                instance_id,
                generation,
                assignments,
                self.clock.now().wall_ms,
            );
            let queued = match changed {
                Changed::No => None,
                _ => Some(self.store_group(&entry.group)),
            };
            (pending, queued)
        };
        if let Some(queued) = queued {
            // The rebalance completed: store the group, then hand out the assignments.
            let stored = durable(queued).await;
            if let Some(entry) = self.lock().get_mut(group_id) {
                match stored {
                    Ok(_) => entry.group.release_sync_waiters(),
                    Err(e) => {
                        tracing::error!(group = group_id, error = %e, "could not store the group's assignment");
                        let now = self.clock.now();
                        entry.group.assignment_not_stored(
                            generation,
                            GroupError::from(&e),
                            now.instant,
                            now.wall_ms,
                        );
                    }
                }
            }
        }
        match pending {
            Pending::Now(result) => result,
            Pending::Later(receiver) => receiver
                .await
                .unwrap_or(Err(GroupError::RebalanceInProgress)),
        }
    }

    /// Handles a Heartbeat.
    pub(crate) fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), GroupError> {
        match self.lock().get_mut(group_id) {
            Some(entry) => {
                entry
                    .group
                    .heartbeat(member_id, instance_id, generation, self.clock.now().instant)
            }
            None => Err(GroupError::UnknownMemberId),
        }
    }

    /// Handles a LeaveGroup: each member's error code, or the request's if the group could
    /// not be stored.
    pub(crate) async fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let (codes, queued) = {
            let mut groups = self.lock();
            let Some(entry) = groups.get_mut(group_id) else {
                return Ok(vec![Err(GroupError::UnknownMemberId); members.len()]);
            };
            let mut store_needed = false;
            let codes = members
                .iter()
                .map(|(member_id, instance)| {
                    let now = self.clock.now();
                    let (code, changed) =
                        entry
                            .group
                            .leave(member_id, instance.as_deref(), now.instant, now.wall_ms);
                    store_needed |= changed != Changed::No;
                    code
                })
                .collect::<Vec<_>>();
            let queued = if store_needed {
                self.store_group(&entry.group)
            } else {
                Ok(None)
            };
            (codes, queued)
        };
        durable(queued).await.map_err(|e| {
            tracing::error!(group = group_id, error = %e, "could not store the group");
            GroupError::from(&e)
        })?;
        Ok(codes)
    }

    /// Every group: (id, protocol type, state).
    pub(crate) fn list(&self) -> Vec<(String, String, GroupState)> {
        let mut groups: Vec<_> = self
            .lock()
            .values()
            .map(|e| {
                let g = &e.group;
                (
                    g.id.clone(),
                    g.protocol_type.clone().unwrap_or_default(),
                    g.state,
                )
            })
            .collect();
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        groups
    }

    /// A group's state and members; `None` if the broker does not know it.
    pub(crate) fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        let groups = self.lock();
        let g = &groups.get(group_id)?.group;
        let protocol = g.protocol.clone().unwrap_or_default();
        Some(GroupDescription {
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: if g.state == GroupState::Stable || g.state == GroupState::CompletingRebalance
            {
                protocol.clone()
            } else {
                String::new()
            },
            members: g
                .members
                .iter()
                .map(|m| MemberDescription {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: m.metadata(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        })
    }

    /// Expires sessions and rebalances, and the offsets of long-empty groups, until `stop`.
    pub(crate) async fn run_timers(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut last_expiry = self.clock.now().instant;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = stop.changed() => return,
            }
            let Now {
                instant: now,
                wall_ms: wall,
            } = self.clock.now();
            let queued: Vec<_> = {
                let mut groups = self.lock();
                groups
                    .values_mut()
                    .filter_map(|e| match e.group.tick(now, wall) {
                        Changed::No => None,
                        _ => Some(self.store_group(&e.group)),
                    })
                    .collect()
            };
            // A group left empty by expiry whose new generation could not be stored is only
            // logged, as Kafka does: no member is in that generation.
            for q in queued {
                if let Err(e) = durable(q).await {
                    tracing::error!(error = %e, "could not store a group");
                }
            }
            if now.duration_since(last_expiry) >= Duration::from_secs(60) {
                last_expiry = now;
                self.expire_offsets(wall).await;
            }
        }
    }
}

/// A new member's id: its client id, a dash and a UUID, as Kafka makes them, with the client id
/// cut (at a character boundary) so that the id fits the i16 length it is stored with.
fn new_member_id(client_id: &str) -> String {
    const UUID_PART: usize = 37;
    let mut cut = client_id.len().min(i16::MAX as usize - UUID_PART);
    while !client_id.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{}", &client_id[..cut], uuid::Uuid::new_v4())
}

/// Waits until queued records are durable: the log offset of the last (-1 for none).
async fn durable(queued: Queued) -> Result<i64, StorageError> {
    match queued? {
        Some(queued) => queued.durable().await,
        None => Ok(-1),
    }
}

/// A coordinator's timers running in a test, until this is dropped.
#[cfg(test)]
struct TestTimers(watch::Sender<bool>);

#[cfg(test)]
impl TestTimers {
    fn start(coordinator: &Arc<GroupCoordinator>) -> Self {
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(Arc::clone(coordinator).run_timers(stopped));
        Self(stop)
    }
}

#[cfg(test)]
impl Drop for TestTimers {
    fn drop(&mut self) {
        let _ = self.0.send(true);
    }
}

#[cfg(test)]
mod rules_tests;
#[cfg(test)]
mod tests;
