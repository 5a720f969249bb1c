//! Committed offsets: commits (plain and inside transactions), their deletion with a group,
//! a partition or a topic, and the expiry of long-empty groups' offsets. Offsets are applied
//! once their records are durable, in the order of their offsets in `__consumer_offsets`.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use eddy_core::log::Record;
use eddy_core::wire::batch::BatchBuilder;
use eddy_core::wire::compression::Compression;

use super::error::{GroupError, NotStored};
use super::records::{OffsetValue, OffsetsKey};
use super::{durable, GroupCoordinator, GroupEntry, GroupState, Queued, OFFSET_METADATA_MAX_BYTES};
use crate::internal_records::TooLong;
use crate::storage::{QueuedAppend, StorageError, Verify};

/// Each offset's answer, or one refusal for the whole commit.
pub(crate) type CommitResult = Result<Vec<Result<(), GroupError>>, GroupError>;

impl GroupCoordinator {
    /// Commits offsets after checking the committer against the group as Kafka's classic
    /// coordinator does ([`Group::validate_offset_commit`]). The check and the queueing of the
    /// records happen when this is called, so commits are stored in the order they are
    /// called (a connection's requests, in the order they came); the future waits until the
    /// records are durable and then makes them the group's offsets.
    pub(crate) fn commit_offsets(
        self: &Arc<Self>,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        offsets: Vec<(String, i32, OffsetValue)>,
    ) -> impl Future<Output = CommitResult> + Send + 'static {
        let codes = metadata_codes(&offsets);
        let queued = self.queue_commit(
            group_id,
            generation,
            member_id,
            instance_id,
            &offsets,
            &codes,
        );
        let (this, group_id) = (Arc::clone(self), group_id.to_string());
        async move {
            let log_offset = durable(queued?).await.map_err(|e| {
                tracing::error!(group = group_id, error = %e, "could not store offsets");
                GroupError::from(&e)
            })?;
            let mut groups = this.lock();
            if let Some(entry) = groups.get_mut(&group_id) {
                for ((topic, partition, value), code) in offsets.into_iter().zip(&codes) {
                    if code.is_ok() {
                        entry.apply_offset((topic, partition), value, log_offset);
                    }
                }
            }
            Ok(codes)
        }
    }

    /// The checks of an OffsetCommit and its records queued, under the lock.
    fn queue_commit(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        offsets: &[(String, i32, OffsetValue)],
        codes: &[Result<(), GroupError>],
    ) -> Result<Queued, GroupError> {
        let mut groups = self.lock();
        let committer = (generation, member_id, instance_id);
        let entry = committing_group(&mut groups, group_id, committer, false)?;
        // As Kafka: a commit keeps a member's session alive while the group is stable or
        // preparing a rebalance.
        if matches!(
            entry.group.state,
            GroupState::Stable | GroupState::PreparingRebalance
        ) {
            entry.group.touch(member_id, self.clock.now().instant);
        }
        let records: Result<Vec<_>, TooLong> = offsets
            .iter()
            .zip(codes)
            .filter(|(_, code)| code.is_ok())
            .map(|((topic, partition, value), _)| {
                let key = OffsetsKey::Offset {
                    group: group_id.to_string(),
                    topic: topic.clone(),
                    partition: *partition,
                };
                Ok((key, Some(value.encode()?)))
            })
            .collect();
        Ok(records
            .map_err(StorageError::from)
            .and_then(|records| self.append(group_id, &records)))
    }

    /// Commits offsets inside a producer's transaction (TxnOffsetCommit): checked against the
    /// group as Kafka's classic coordinator checks them (KIP-447: a zombie's member or
    /// generation is refused), appended as the producer's transactional batch (refused unless
    /// the group's partition is in the producer's transaction, as `verify` tells), and held
    /// pending until the transaction ends. Checked and queued when called, like
    /// [`GroupCoordinator::commit_offsets`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn commit_transactional_offsets(
        self: &Arc<Self>,
        group_id: &str,
        producer: (i64, i16),
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        offsets: Vec<(String, i32, OffsetValue)>,
        verify: Verify,
    ) -> impl Future<Output = CommitResult> + Send + 'static {
        let codes = metadata_codes(&offsets);
        let queued = self.queue_transactional_commit(
            group_id,
            producer,
            (generation, member_id, instance_id),
            &offsets,
            &codes,
            verify,
        );
        let (this, group_id) = (Arc::clone(self), group_id.to_string());
        async move {
            let Some(queued) = queued? else {
                return Ok(codes);
            };
            let last_offset = queued.durable().await.map_err(|e| match e {
                StorageError::NotInTransaction { .. } => GroupError::InvalidTxnState,
                StorageError::InvalidProducerEpoch { .. } => GroupError::ProducerFenced,
                e => {
                    tracing::error!(group = group_id, error = %e, "could not store offsets");
                    GroupError::from(&e)
                }
            })?;
            let mut groups = this.lock();
            if let Some(entry) = groups.get_mut(&group_id) {
                let stored = offsets.into_iter().zip(&codes).filter(|(_, c)| c.is_ok());
                // The transaction's marker may have been written after the batch and applied
                // before the batch was found durable: the offsets end with it.
                match entry.ended_after(producer.0, last_offset) {
                    Some(true) => {
                        for ((topic, partition, value), _) in stored {
                            entry.apply_offset((topic, partition), value, last_offset);
                        }
                    }
                    Some(false) => {}
                    None => {
                        let pending = entry.pending.entry(producer.0).or_default();
                        for ((topic, partition, value), _) in stored {
                            hold_pending(pending, (topic, partition), value, last_offset);
                        }
                    }
                }
            }
            Ok(codes)
        }
    }

    /// The checks of a TxnOffsetCommit and its batch queued, under the lock; `None` if no
    /// offset is to be stored.
    fn queue_transactional_commit(
        &self,
        group_id: &str,
        (producer_id, epoch): (i64, i16),
        (generation, member_id, instance_id): (i32, &str, Option<&str>),
        offsets: &[(String, i32, OffsetValue)],
        codes: &[Result<(), GroupError>],
        verify: Verify,
    ) -> Result<Option<QueuedAppend>, GroupError> {
        let mut groups = self.lock();
        let committer = (generation, member_id, instance_id);
        committing_group(&mut groups, group_id, committer, true)?;
        let now = self.clock.now().wall_ms;
        let mut batch = BatchBuilder::new(Compression::None)
            .producer(producer_id, epoch, -1)
            .transactional();
        for ((topic, partition, value), _) in offsets.iter().zip(codes).filter(|(_, c)| c.is_ok()) {
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
                    GroupError::NotStored(NotStored::Unwritable)
                })?;
            batch.append(&Record {
                key: Some(key),
                value: Some(value),
                headers: Vec::new(),
                timestamp: now,
            });
        }
        if batch.is_empty() {
            return Ok(None);
        }
        let partition = &self.offsets_log[self.partition_for(group_id)];
        let built = batch
            .build(0)
            .map_err(|_| GroupError::NotStored(NotStored::Unwritable))?;
        Ok(Some(self.appends.push(
            partition,
            Bytes::from(built),
            now,
            Some(verify),
        )))
    }

    /// Ends a producer's transaction in the groups of one `__consumer_offsets` partition, once
    /// its marker there, at `marker`, is durable.
    pub(crate) fn end_transaction(
        &self,
        offsets_partition: i32,
        producer_id: i64,
        commit: bool,
        marker: i64,
    ) {
        let mut groups = self.lock();
        for entry in groups.values_mut() {
            if self.partition_for(&entry.group.id) as i32 == offsets_partition {
                entry.end_transaction(producer_id, commit, Some(marker));
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

    /// Deletes groups without members, with their offsets: whether each group was deleted.
    pub(crate) async fn delete_groups(&self, ids: &[String]) -> Vec<Result<(), GroupError>> {
        let mut codes = Vec::with_capacity(ids.len());
        for id in ids {
            let result = {
                let groups = self.lock();
                match groups.get(id.as_str()) {
                    None => Err(GroupError::GroupIdNotFound),
                    Some(e) if !e.group.members.is_empty() => Err(GroupError::NonEmptyGroup),
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
                Err(error) => Err(error),
                Ok(queued) => {
                    match durable(queued).await {
                        // Stored: now forget it, unless it came back after the tombstones.
                        Ok(stored_at) => {
                            let mut groups = self.lock();
                            if let Some(entry) = groups.get_mut(id.as_str()) {
                                entry.forget_offsets(stored_at, |_| true);
                                if entry.group.members.is_empty() && entry.offsets.is_empty() {
                                    groups.remove(id.as_str());
                                }
                            }
                            Ok(())
                        }
                        Err(e) => {
                            tracing::error!(group = %id, error = %e, "could not delete the group");
                            Err(GroupError::from(&e))
                        }
                    }
                }
            });
        }
        codes
    }

    /// Deletes a group's offsets for partitions no member is consuming: whether each
    /// partition's was, or why the group's could not be.
    pub(crate) async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let (codes, deleted, queued) = {
            let groups = self.lock();
            let Some(entry) = groups.get(group_id) else {
                return Err(GroupError::GroupIdNotFound);
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
            let codes: Vec<Result<(), GroupError>> = partitions
                .iter()
                .map(|(t, _)| {
                    if subscribed(t) {
                        Err(GroupError::GroupSubscribedToTopic)
                    } else {
                        Ok(())
                    }
                })
                .collect();
            let deleted: Vec<(String, i32)> = partitions
                .iter()
                .zip(&codes)
                .filter(|(_, c)| c.is_ok())
                .map(|(partition, _)| partition.clone())
                .collect();
            let tombstones: Vec<_> = deleted
                .iter()
                .map(|key| offset_tombstone(group_id, key))
                .collect();
            (codes, deleted, self.append(group_id, &tombstones))
        };
        let stored_at = durable(queued).await.map_err(|e| {
            tracing::error!(group = group_id, error = %e, "could not delete offsets");
            GroupError::from(&e)
        })?;
        if let Some(entry) = self.lock().get_mut(group_id) {
            entry.forget_offsets(stored_at, |key| deleted.contains(key));
        }
        Ok(codes)
    }

    /// Deletes every group's committed offsets of a deleted topic, as Kafka does: the
    /// tombstones are stored first, then the offsets are forgotten (unless a commit stored
    /// after the tombstone, for a topic made again under the same name, replaced one).
    pub(crate) async fn delete_topic_offsets(&self, topic: &str) -> Result<(), StorageError> {
        let queued: Vec<(String, Queued)> = {
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
        // Every group's tombstones are waited for, stored or not: each group forgets the
        // offsets whose tombstones were stored, and no append is left under way.
        let mut failed = None;
        for (group, queued) in queued {
            match durable(queued).await {
                Ok(stored_at) => {
                    if let Some(entry) = self.lock().get_mut(&group) {
                        entry.forget_offsets(stored_at, |(t, _)| t == topic);
                    }
                }
                Err(e) => {
                    tracing::error!(%group, topic, error = %e, "could not delete the offsets of a deleted topic");
                    failed.get_or_insert(e);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Deletes the offsets of groups that have had no members and no commits for
    /// `offsets_retention`: counted from the group's last state change or its newest commit,
    /// whichever is later (KIP-211), so a group that commits without members keeps them.
    pub(super) async fn expire_offsets(&self, wall_ms: i64) {
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

/// The group a commit (transactional or not) by `(generation, member id, instance id)` is
/// for, once the committer passed `Group::validate_offset_commit`.
/// A commit from outside any group (an admin, or a consumer using assign()) makes a simple
/// group. A member's commit for a group the broker does not know is ILLEGAL_GENERATION, as
/// Kafka answers OffsetCommit before v9 (eddy serves v2-v8) and TxnOffsetCommit.
fn committing_group<'a>(
    groups: &'a mut HashMap<String, GroupEntry>,
    group_id: &str,
    (generation, member_id, instance_id): (i32, &str, Option<&str>),
    transactional: bool,
) -> Result<&'a mut GroupEntry, GroupError> {
    if group_id.is_empty() {
        return Err(GroupError::InvalidGroupId);
    }
    if generation >= 0 && !groups.contains_key(group_id) {
        return Err(GroupError::IllegalGeneration);
    }
    let entry = groups
        .entry(group_id.to_string())
        .or_insert_with(|| GroupEntry::new(group_id));
    entry
        .group
        .validate_offset_commit(member_id, instance_id, generation, transactional)?;
    Ok(entry)
}

/// Whether each offset may be committed: not if its metadata is over the limit.
fn metadata_codes(offsets: &[(String, i32, OffsetValue)]) -> Vec<Result<(), GroupError>> {
    offsets
        .iter()
        .map(|(_, _, v)| {
            if v.metadata.len() > OFFSET_METADATA_MAX_BYTES {
                Err(GroupError::OffsetMetadataTooLarge)
            } else {
                Ok(())
            }
        })
        .collect()
}

/// Holds a transaction's offset stored at `log_offset` until the transaction ends, unless an
/// offset of the same transaction stored later is already held: two commits of one
/// transaction whose appends end out of order keep the later one, as the log has it.
fn hold_pending(
    pending: &mut super::PendingOffsets,
    key: (String, i32),
    value: OffsetValue,
    log_offset: i64,
) {
    if pending.get(&key).is_none_or(|&(_, at)| log_offset > at) {
        pending.insert(key, (value, log_offset));
    }
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
