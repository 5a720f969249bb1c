//! The group coordinator: consumer groups (membership, rebalances, sessions) and their
//! committed offsets, kept as records in the compacted internal topic `__consumer_offsets`
//! like Kafka's. An operation first changes nothing but checks; what it changes is appended to
//! `__consumer_offsets` and made durable before it is answered; at start the state is rebuilt
//! by replaying that topic. There is no other store.
//!
//! A group lives in the partition `abs(javaHashCode(group id)) % partitions` of
//! `__consumer_offsets`, as in Kafka.
//!
//! Offsets committed inside a transaction (TxnOffsetCommit) are appended as the producer's
//! transactional batch and held pending until the transaction coordinator's marker reaches the
//! group's partition: a COMMIT makes them the group's offsets, an ABORT discards them.

mod membership;
pub(crate) mod records;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use eddy_core::log::Record;
use eddy_core::wire::batch::{control_type, BatchBuilder, ControlType};
use eddy_core::wire::compression::Compression;
use kafka_protocol::error::ResponseError;
use tokio::sync::watch;

use membership::{Changed, Group};
pub(crate) use membership::{GroupState, JoinRequest, JoinResult, Pending, SyncResult};
pub(crate) use records::OffsetValue;
use records::{GroupValue, OffsetsKey};

use crate::clock::{Clock, Now};
use crate::internal_records::TooLong;
use crate::storage::{Origin, Partition, StorageError};

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
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            min_session_timeout: Duration::from_secs(6),
            max_session_timeout: Duration::from_secs(1800),
            offsets_retention: Duration::from_secs(7 * 24 * 3600),
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
}

impl GroupEntry {
    fn new(id: &str) -> Self {
        Self {
            group: Group::new(id),
            offsets: HashMap::new(),
            applied_at: HashMap::new(),
            pending: HashMap::new(),
        }
    }

    /// Ends a producer's transaction in this group: its pending offsets become the group's
    /// (commit) or are dropped (abort).
    fn end_transaction(&mut self, producer_id: i64, commit: bool) {
        if let Some(offsets) = self.pending.remove(&producer_id) {
            if commit {
                for (key, (value, log_offset)) in offsets {
                    self.apply_offset(key, value, log_offset);
                }
            }
        }
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

/// Records that a change appended, and the partition that must make them durable.
struct Appended(Option<(Arc<Partition>, i64)>);

impl Appended {
    async fn durable(self) -> Result<(), StorageError> {
        match self.0 {
            Some((partition, last_offset)) => partition.wait_durable(last_offset).await,
            None => Ok(()),
        }
    }
}

impl GroupCoordinator {
    /// A coordinator over the partitions of `__consumer_offsets`, rebuilt from them.
    pub(crate) fn open(
        config: GroupConfig,
        offsets_log: Vec<Arc<Partition>>,
    ) -> Result<Self, StorageError> {
        let coordinator = Self {
            config,
            clock: Clock::new(),
            groups: Mutex::new(HashMap::new()),
            offsets_log,
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

    /// Reads every record of `__consumer_offsets` in order and rebuilds groups and offsets. A
    /// record that does not decode is skipped and counted, never a reason to refuse to start.
    fn replay(&self) -> Result<(), StorageError> {
        let mut groups = self.lock();
        let mut records = 0usize;
        let mut skipped = 0usize;
        for (index, partition) in self.offsets_log.iter().enumerate() {
            skipped += partition.replay(|header, decoded| {
                if header.is_control() {
                    if let Some(marker) = decoded.first().and_then(|r| control_type(&r.record)) {
                        let commit = marker == ControlType::Commit;
                        for entry in groups.values_mut() {
                            if self.partition_for(&entry.group.id) == index {
                                entry.end_transaction(header.producer_id, commit);
                            }
                        }
                    }
                    return;
                }
                let transaction = header.is_transactional().then_some(header.producer_id);
                for r in decoded {
                    records += 1;
                    if !apply_record(&mut groups, &r.record, r.offset, transaction) {
                        skipped += 1;
                    }
                }
            })?;
        }
        if records > 0 {
            tracing::info!(groups = groups.len(), records, "replayed {OFFSETS_TOPIC}");
        }
        if skipped > 0 {
            tracing::warn!(skipped, "skipped undecodable records of {OFFSETS_TOPIC}");
        }
        Ok(())
    }

    /// Appends records for `group` to its partition (not yet durable).
    fn append(
        &self,
        group: &str,
        records: &[(OffsetsKey, Option<Bytes>)],
    ) -> Result<Appended, StorageError> {
        if records.is_empty() {
            return Ok(Appended(None));
        }
        let partition = Arc::clone(&self.offsets_log[self.partition_for(group)]);
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
        let info = partition.append(&batch.build(0)?, now)?;
        Ok(Appended(Some((partition, info.last_offset))))
    }

    fn store_group(&self, group: &Group) -> Result<Appended, StorageError> {
        let key = OffsetsKey::Group {
            group: group.id.clone(),
        };
        self.append(&group.id, &[(key, Some(group.stored().encode()?))])
    }

    /// Handles a JoinGroup; waits while the group rebalances.
    pub(crate) async fn join(&self, group_id: &str, request: JoinRequest) -> JoinResult {
        let member_id = request.member_id.clone();
        if group_id.is_empty() {
            return JoinResult::error(ResponseError::InvalidGroupId.code(), &member_id);
        }
        if request.session_timeout < self.config.min_session_timeout
            || request.session_timeout > self.config.max_session_timeout
        {
            return JoinResult::error(ResponseError::InvalidSessionTimeout.code(), &member_id);
        }
        let client_id = request.client_id.clone();
        let (pending, appended) = {
            let mut groups = self.lock();
            let entry = groups
                .entry(group_id.to_string())
                .or_insert_with(|| GroupEntry::new(group_id));
            let now = self.clock.now();
            let (pending, changed) = entry.group.join(request, now.instant, now.wall_ms, || {
                new_member_id(&client_id)
            });
            let appended = match changed {
                Changed::Store => self.store_group(&entry.group),
                Changed::No => Ok(Appended(None)),
            };
            (pending, appended)
        };
        if let Err(e) = store(appended).await {
            tracing::error!(group = group_id, error = %e, "could not store the group");
        }
        match pending {
            Pending::Now(result) => result,
            Pending::Later(receiver) => receiver.await.unwrap_or_else(|_| {
                JoinResult::error(ResponseError::UnknownMemberId.code(), &member_id)
            }),
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
        let (pending, appended) = {
            let mut groups = self.lock();
            let Some(entry) = groups.get_mut(group_id) else {
                return (ResponseError::UnknownMemberId.code(), Bytes::new());
            };
            let (pending, changed) = entry.group.sync(
                member_id,
                instance_id,
                generation,
                assignments,
                self.clock.now().wall_ms,
            );
            let appended = match changed {
                Changed::Store => Some(self.store_group(&entry.group)),
                Changed::No => None,
            };
            (pending, appended)
        };
        if let Some(appended) = appended {
            // The rebalance completed: store the group, then hand out the assignments.
            let code = match store(appended).await {
                Ok(()) => 0,
                Err(e) => {
                    tracing::error!(group = group_id, error = %e, "could not store the group");
                    ResponseError::CoordinatorNotAvailable.code()
                }
            };
            if let Some(entry) = self.lock().get_mut(group_id) {
                entry.group.release_sync_waiters(code);
            }
        }
        match pending {
            Pending::Now(result) => result,
            Pending::Later(receiver) => receiver
                .await
                .unwrap_or((ResponseError::RebalanceInProgress.code(), Bytes::new())),
        }
    }

    /// Handles a Heartbeat.
    pub(crate) fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> i16 {
        match self.lock().get_mut(group_id) {
            Some(entry) => {
                entry
                    .group
                    .heartbeat(member_id, instance_id, generation, self.clock.now().instant)
            }
            None => ResponseError::UnknownMemberId.code(),
        }
    }

    /// Handles a LeaveGroup: each member's error code.
    pub(crate) async fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Vec<i16> {
        let (codes, appended) = {
            let mut groups = self.lock();
            let Some(entry) = groups.get_mut(group_id) else {
                return vec![ResponseError::UnknownMemberId.code(); members.len()];
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
                    store_needed |= changed == Changed::Store;
                    code
                })
                .collect::<Vec<_>>();
            let appended = if store_needed {
                self.store_group(&entry.group)
            } else {
                Ok(Appended(None))
            };
            (codes, appended)
        };
        if let Err(e) = store(appended).await {
            tracing::error!(group = group_id, error = %e, "could not store the group");
        }
        codes
    }

    /// Commits offsets after checking the committer against the group; the offsets are
    /// durable when this returns `Ok`. `generation` -1 with an empty member id is a commit from
    /// outside the group (an admin, or a consumer using assign()), allowed while the group
    /// has no members.
    pub(crate) async fn commit_offsets(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        offsets: Vec<(String, i32, OffsetValue)>,
    ) -> Result<Vec<i16>, i16> {
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId.code());
        }
        let codes = metadata_codes(&offsets);
        let appended = {
            let mut groups = self.lock();
            let entry = groups
                .entry(group_id.to_string())
                .or_insert_with(|| GroupEntry::new(group_id));
            let group = &entry.group;
            let outside = generation < 0 && member_id.is_empty();
            if outside {
                if !group.members.is_empty() {
                    return Err(ResponseError::UnknownMemberId.code());
                }
            } else {
                group.check_member(member_id, instance_id, generation)?;
                // As Kafka: a member of the current generation may commit while the group
                // prepares a rebalance (it learns of it from its heartbeats), not between the
                // join and the assignment.
                if group.state == GroupState::CompletingRebalance {
                    return Err(ResponseError::RebalanceInProgress.code());
                }
                entry.group.touch(member_id, self.clock.now().instant);
            }
            let records: Result<Vec<_>, TooLong> = offsets
                .iter()
                .zip(&codes)
                .filter(|(_, code)| **code == 0)
                .map(|((topic, partition, value), _)| {
                    let key = OffsetsKey::Offset {
                        group: group_id.to_string(),
                        topic: topic.clone(),
                        partition: *partition,
                    };
                    Ok((key, Some(value.encode()?)))
                })
                .collect();
            records
                .map_err(StorageError::from)
                .and_then(|records| self.append(group_id, &records))
        };
        let log_offset = last_offset(&appended);
        store(appended).await.map_err(|e| {
            tracing::error!(group = group_id, error = %e, "could not store offsets");
            ResponseError::CoordinatorNotAvailable.code()
        })?;
        let mut groups = self.lock();
        if let Some(entry) = groups.get_mut(group_id) {
            for ((topic, partition, value), code) in offsets.into_iter().zip(&codes) {
                if *code == 0 {
                    entry.apply_offset((topic, partition), value, log_offset);
                }
            }
        }
        Ok(codes)
    }

    /// Commits offsets inside a producer's transaction (TxnOffsetCommit): checked against the
    /// group as KIP-447 asks when the committer names its member and generation, appended as
    /// the producer's transactional batch (refused unless the group's partition is in the
    /// producer's transaction, as `verify` tells), and held pending until the transaction ends.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn commit_transactional_offsets(
        &self,
        group_id: &str,
        producer: (i64, i16),
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        offsets: Vec<(String, i32, OffsetValue)>,
        verify: &(dyn Fn(i64, i16) -> Result<(), StorageError> + Sync),
    ) -> Result<Vec<i16>, i16> {
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId.code());
        }
        let codes = metadata_codes(&offsets);
        let (producer_id, epoch) = producer;
        let appended = {
            let mut groups = self.lock();
            if !member_id.is_empty() || generation >= 0 {
                let Some(entry) = groups.get(group_id) else {
                    return Err(ResponseError::IllegalGeneration.code());
                };
                entry
                    .group
                    .check_member(member_id, instance_id, generation)?;
            }
            groups
                .entry(group_id.to_string())
                .or_insert_with(|| GroupEntry::new(group_id));
            let now = self.clock.now().wall_ms;
            let mut batch = BatchBuilder::new(Compression::None)
                .producer(producer_id, epoch, -1)
                .transactional();
            for ((topic, partition, value), _) in
                offsets.iter().zip(&codes).filter(|(_, c)| **c == 0)
            {
                let key = OffsetsKey::Offset {
                    group: group_id.to_string(),
                    topic: topic.clone(),
                    partition: *partition,
                };
                let (key, value) = key
                    .encode()
                    .and_then(|key| Ok((key, value.encode()?)))
                    .map_err(|e| {
                        tracing::error!(group = group_id, error = %e, "could not store offsets");
                        ResponseError::UnknownServerError.code()
                    })?;
                batch.append(&Record {
                    key: Some(key),
                    value: Some(value),
                    headers: Vec::new(),
                    timestamp: now,
                });
            }
            if batch.is_empty() {
                return Ok(codes);
            }
            let partition = Arc::clone(&self.offsets_log[self.partition_for(group_id)]);
            let built = batch
                .build(0)
                .map_err(|_| ResponseError::UnknownServerError.code())?;
            match partition.append_from(&built, now, Origin::TxnOffsetCommit { verify }) {
                Ok(info) => (partition, info),
                Err(StorageError::NotInTransaction { .. }) => {
                    return Err(ResponseError::InvalidTxnState.code())
                }
                Err(StorageError::InvalidProducerEpoch { .. }) => {
                    return Err(ResponseError::ProducerFenced.code())
                }
                Err(e) => {
                    tracing::error!(group = group_id, error = %e, "could not store offsets");
                    return Err(ResponseError::CoordinatorNotAvailable.code());
                }
            }
        };
        let (partition, info) = appended;
        partition
            .wait_durable(info.last_offset)
            .await
            .map_err(|e| {
                tracing::error!(group = group_id, error = %e, "could not store offsets");
                ResponseError::CoordinatorNotAvailable.code()
            })?;
        let mut groups = self.lock();
        if let Some(entry) = groups.get_mut(group_id) {
            let pending = entry.pending.entry(producer_id).or_default();
            for ((topic, partition, value), code) in offsets.into_iter().zip(&codes) {
                if *code == 0 {
                    pending.insert((topic, partition), (value, info.last_offset));
                }
            }
        }
        Ok(codes)
    }

    /// Ends a producer's transaction in the groups of one `__consumer_offsets` partition, once
    /// its marker there is durable.
    pub(crate) fn end_transaction(&self, offsets_partition: i32, producer_id: i64, commit: bool) {
        let mut groups = self.lock();
        for entry in groups.values_mut() {
            if self.partition_for(&entry.group.id) as i32 == offsets_partition {
                entry.end_transaction(producer_id, commit);
            }
        }
    }

    /// Whether a transaction not yet ended holds an offset of `group_id` for the partition
    /// (OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT then).
    pub(crate) fn has_pending_offset(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        let key = (topic.to_string(), partition);
        self.lock()
            .get(group_id)
            .is_some_and(|e| e.pending.values().any(|offsets| offsets.contains_key(&key)))
    }

    /// A group's committed offsets: of the given partitions, or all of them.
    pub(crate) fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Vec<(String, i32, Option<OffsetValue>)> {
        let groups = self.lock();
        let offsets = groups.get(group_id).map(|e| &e.offsets);
        match partitions {
            Some(wanted) => wanted
                .into_iter()
                .map(|(t, p)| {
                    let value = offsets.and_then(|o| o.get(&(t.clone(), p)).cloned());
                    (t, p, value)
                })
                .collect(),
            None => {
                let mut all: Vec<_> = offsets
                    .into_iter()
                    .flatten()
                    .map(|((t, p), v)| (t.clone(), *p, Some(v.clone())))
                    .collect();
                all.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
                all
            }
        }
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

    /// Deletes groups without members, with their offsets: each group's error code.
    pub(crate) async fn delete_groups(&self, ids: &[String]) -> Vec<i16> {
        let mut codes = Vec::with_capacity(ids.len());
        for id in ids {
            let result = {
                let groups = self.lock();
                match groups.get(id.as_str()) {
                    None => Err(ResponseError::GroupIdNotFound.code()),
                    Some(e) if !e.group.members.is_empty() => {
                        Err(ResponseError::NonEmptyGroup.code())
                    }
                    Some(e) => {
                        let mut tombstones: Vec<_> = e
                            .offsets
                            .keys()
                            .map(|key| offset_tombstone(id, key))
                            .collect();
                        tombstones.push((OffsetsKey::Group { group: id.clone() }, None));
                        Ok(self.append(id, &tombstones))
                    }
                }
            };
            codes.push(match result {
                Err(code) => code,
                Ok(appended) => {
                    let stored_at = last_offset(&appended);
                    match store(appended).await {
                        // Stored: now forget it, unless it came back after the tombstones.
                        Ok(()) => {
                            let mut groups = self.lock();
                            if let Some(entry) = groups.get_mut(id.as_str()) {
                                entry.forget_offsets(stored_at, |_| true);
                                if entry.group.members.is_empty() && entry.offsets.is_empty() {
                                    groups.remove(id.as_str());
                                }
                            }
                            0
                        }
                        Err(e) => {
                            tracing::error!(group = %id, error = %e, "could not delete the group");
                            ResponseError::CoordinatorNotAvailable.code()
                        }
                    }
                }
            });
        }
        codes
    }

    /// Deletes a group's offsets for partitions no member is consuming: each partition's
    /// error code, or the group's.
    pub(crate) async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<i16>, i16> {
        let (codes, deleted, appended) = {
            let groups = self.lock();
            let Some(entry) = groups.get(group_id) else {
                return Err(ResponseError::GroupIdNotFound.code());
            };
            // Members subscribe through opaque protocol metadata; a topic name appearing in a
            // member's subscription counts as subscribed, as near as the broker can tell.
            let subscribed = |topic: &str| {
                entry.group.members.iter().any(|m| {
                    m.protocols
                        .iter()
                        .any(|(_, meta)| meta.windows(topic.len()).any(|w| w == topic.as_bytes()))
                })
            };
            let codes: Vec<i16> = partitions
                .iter()
                .map(|(t, _)| {
                    if subscribed(t) {
                        ResponseError::GroupSubscribedToTopic.code()
                    } else {
                        0
                    }
                })
                .collect();
            let deleted: Vec<(String, i32)> = partitions
                .iter()
                .zip(&codes)
                .filter(|(_, c)| **c == 0)
                .map(|(partition, _)| partition.clone())
                .collect();
            let tombstones: Vec<_> = deleted
                .iter()
                .map(|key| offset_tombstone(group_id, key))
                .collect();
            (codes, deleted, self.append(group_id, &tombstones))
        };
        let stored_at = last_offset(&appended);
        store(appended)
            .await
            .map_err(|_| ResponseError::CoordinatorNotAvailable.code())?;
        if let Some(entry) = self.lock().get_mut(group_id) {
            entry.forget_offsets(stored_at, |key| deleted.contains(key));
        }
        Ok(codes)
    }

    /// Deletes every group's committed offsets of a deleted topic, as Kafka does: the
    /// tombstones are stored first, then the offsets are forgotten (unless a commit stored
    /// after the tombstone, for a topic made again under the same name, replaced one).
    pub(crate) async fn delete_topic_offsets(&self, topic: &str) -> Result<(), StorageError> {
        let appended: Vec<(String, Result<Appended, StorageError>)> = {
            let groups = self.lock();
            groups
                .values()
                .filter_map(|entry| {
                    let tombstones: Vec<_> = entry
                        .offsets
                        .keys()
                        .filter(|(t, _)| t == topic)
                        .map(|key| offset_tombstone(&entry.group.id, key))
                        .collect();
                    let id = entry.group.id.clone();
                    (!tombstones.is_empty()).then(|| (id.clone(), self.append(&id, &tombstones)))
                })
                .collect()
        };
        for (group, appended) in appended {
            let stored_at = last_offset(&appended);
            store(appended).await.inspect_err(|e| {
                tracing::error!(%group, topic, error = %e, "could not delete the offsets of a deleted topic");
            })?;
            if let Some(entry) = self.lock().get_mut(&group) {
                entry.forget_offsets(stored_at, |(t, _)| t == topic);
            }
        }
        Ok(())
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
            let appended: Vec<_> = {
                let mut groups = self.lock();
                groups
                    .values_mut()
                    .filter_map(|e| match e.group.tick(now, wall) {
                        Changed::Store => Some(self.store_group(&e.group)),
                        Changed::No => None,
                    })
                    .collect()
            };
            for a in appended {
                if let Err(e) = store(a).await {
                    tracing::error!(error = %e, "could not store a group");
                }
            }
            if now.duration_since(last_expiry) >= Duration::from_secs(60) {
                last_expiry = now;
                self.expire_offsets(wall).await;
            }
        }
    }

    /// Deletes the offsets of groups that have had no members and no commits for
    /// `offsets_retention`: counted from the group's last state change or its newest commit,
    /// whichever is later (KIP-211), so a group that commits without members keeps them.
    async fn expire_offsets(&self, wall_ms: i64) {
        let retention = self.config.offsets_retention.as_millis() as i64;
        let expired: Vec<String> = self
            .lock()
            .values()
            .filter(|e| {
                let newest_commit = e
                    .offsets
                    .values()
                    .map(|o| o.commit_timestamp)
                    .max()
                    .unwrap_or(0);
                let last_activity = e.group.state_timestamp.max(newest_commit);
                e.group.members.is_empty() && wall_ms - last_activity > retention
            })
            .map(|e| e.group.id.clone())
            .collect();
        if !expired.is_empty() {
            tracing::info!(
                groups = expired.len(),
                "expiring the offsets of long-empty groups"
            );
            self.delete_groups(&expired).await;
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

/// Each offset's code: OFFSET_METADATA_TOO_LARGE for one whose metadata is over the limit.
fn metadata_codes(offsets: &[(String, i32, OffsetValue)]) -> Vec<i16> {
    offsets
        .iter()
        .map(|(_, _, v)| {
            if v.metadata.len() > OFFSET_METADATA_MAX_BYTES {
                ResponseError::OffsetMetadataTooLarge.code()
            } else {
                0
            }
        })
        .collect()
}

/// The record that deletes `group`'s committed offset of `(topic, partition)`.
fn offset_tombstone(
    group: &str,
    (topic, partition): &(String, i32),
) -> (OffsetsKey, Option<Bytes>) {
    let key = OffsetsKey::Offset {
        group: group.to_string(),
        topic: topic.clone(),
        partition: *partition,
    };
    (key, None)
}

/// The log offset of the last record an append wrote (-1 for none).
fn last_offset(appended: &Result<Appended, StorageError>) -> i64 {
    match appended {
        Ok(Appended(Some((_, last_offset)))) => *last_offset,
        _ => -1,
    }
}

async fn store(appended: Result<Appended, StorageError>) -> Result<(), StorageError> {
    appended?.durable().await
}

/// Applies one record of `__consumer_offsets` during replay; `transaction` is the producer id
/// of a transactional batch's records, whose offsets stay pending until its marker. Whether
/// the record decoded (one that does not is logged and changes nothing).
fn apply_record(
    groups: &mut HashMap<String, GroupEntry>,
    record: &Record,
    log_offset: i64,
    transaction: Option<i64>,
) -> bool {
    let Some(key) = record.key.as_deref().and_then(OffsetsKey::decode) else {
        tracing::warn!(
            offset = log_offset,
            "skipping a record of {OFFSETS_TOPIC} with an unknown key"
        );
        return false;
    };
    let group_id = key.group().to_string();
    match (key, record.value.as_deref()) {
        (
            OffsetsKey::Offset {
                topic, partition, ..
            },
            Some(value),
        ) => match OffsetValue::decode(value) {
            Some(v) => {
                let entry = groups
                    .entry(group_id.clone())
                    .or_insert_with(|| GroupEntry::new(&group_id));
                match transaction {
                    Some(producer_id) => {
                        entry
                            .pending
                            .entry(producer_id)
                            .or_default()
                            .insert((topic, partition), (v, log_offset));
                    }
                    None => entry.apply_offset((topic, partition), v, log_offset),
                }
            }
            None => {
                tracing::warn!(group = %group_id, offset = log_offset, "skipping a malformed offset record");
                return false;
            }
        },
        (
            OffsetsKey::Offset {
                topic, partition, ..
            },
            None,
        ) => {
            if let Some(e) = groups.get_mut(&group_id) {
                e.applied_at.remove(&(topic.clone(), partition));
                e.offsets.remove(&(topic, partition));
            }
        }
        (OffsetsKey::Group { .. }, Some(value)) => match GroupValue::decode(value) {
            Some(stored) => {
                let entry = groups
                    .entry(group_id.clone())
                    .or_insert_with(|| GroupEntry::new(&group_id));
                entry.group = Group::restored(&group_id, &stored);
            }
            None => {
                tracing::warn!(group = %group_id, offset = log_offset, "skipping a malformed group record");
                return false;
            }
        },
        (OffsetsKey::Group { .. }, None) => {
            groups.remove(&group_id);
        }
    }
    true
}

#[cfg(test)]
mod tests;
