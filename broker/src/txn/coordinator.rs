//! The transaction coordinator's operations over the transactional ids' states, their records
//! in `__transaction_state`, and the markers that end transactions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use eddy_core::log::{Record, TopicPartition};
use eddy_core::wire::batch::{control_batch, BatchBuilder, ControlType};
use eddy_core::wire::compression::Compression;
use futures::future::try_join_all;
use tokio::sync::watch;

use super::error::TxnError;
use super::ids::ProducerIds;
use super::records::{decode_key, decode_value, encode_key, encode_value};
use super::state::{EndStep, InitStep, TxnMetadata, TxnState};
use crate::clock::Clock;
use crate::group::{coordinator_partition, GroupCoordinator, NotStored, OFFSETS_TOPIC};
use crate::storage::{off_workers, LogStore, Origin, Partition, StorageError};

/// The internal topic of transactions.
pub(crate) const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Settings of the transaction coordinator.
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// The longest `transaction.timeout.ms` a producer may ask for
    /// (`transaction.max.timeout.ms`, 15 minutes).
    pub max_timeout: Duration,
    /// How often open transactions are checked against their timeout
    /// (`transaction.abort.timed.out.transaction.cleanup.interval.ms`; Kafka's default is 10 s,
    /// eddy's 1 s).
    pub abort_check_interval: Duration,
}

impl Default for TxnConfig {
    fn default() -> Self {
        Self {
            max_timeout: Duration::from_secs(900),
            abort_check_interval: Duration::from_secs(1),
        }
    }
}

/// A transactional id's applied state.
#[derive(Debug)]
struct Entry {
    txn: TxnMetadata,
    /// A change is being stored or markers written: other requests get
    /// CONCURRENT_TRANSACTIONS and retry.
    pending: bool,
}

#[derive(Debug, Default)]
struct Entries {
    by_id: HashMap<String, Entry>,
    /// The transactional id of each current producer id, for verifying produces.
    by_producer: HashMap<i64, String>,
}

/// Every transactional id of the broker.
#[derive(Debug)]
pub(crate) struct TransactionCoordinator {
    config: TxnConfig,
    /// Where every timeout and stored time comes from.
    clock: Clock,
    entries: Mutex<Entries>,
    state_log: Vec<Arc<Partition>>,
    logs: Arc<LogStore>,
    groups: Arc<GroupCoordinator>,
    ids: Arc<ProducerIds>,
}

fn not_stored(id: &str, e: &StorageError) -> TxnError {
    tracing::error!(transactional_id = id, error = %e, "could not store a transaction's state");
    TxnError::NotStored(NotStored::from(e))
}

impl TransactionCoordinator {
    /// A coordinator over the partitions of `__transaction_state`, rebuilt from them.
    pub(crate) fn open(
        config: TxnConfig,
        clock: Clock,
        state_log: Vec<Arc<Partition>>,
        logs: Arc<LogStore>,
        groups: Arc<GroupCoordinator>,
        ids: Arc<ProducerIds>,
    ) -> Result<Self, StorageError> {
        let coordinator = Self {
            config,
            clock,
            entries: Mutex::new(Entries::default()),
            state_log,
            logs,
            groups,
            ids,
        };
        coordinator.replay()?;
        Ok(coordinator)
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Rebuilds every transactional id's state from `__transaction_state`. A record that does
    /// not decode is skipped and counted, never a reason to refuse to start.
    fn replay(&self) -> Result<(), StorageError> {
        let mut entries = self.lock();
        let mut skipped = 0;
        for partition in &self.state_log {
            skipped += partition.replay(|header, records| {
                if header.is_control() {
                    return;
                }
                for r in records {
                    let Some(id) = r.record.key.as_deref().and_then(decode_key) else {
                        tracing::warn!(offset = r.offset, "skipping a record of {TRANSACTION_STATE_TOPIC} with an unknown key");
                        skipped += 1;
                        continue;
                    };
                    match r.record.value.as_deref().map(decode_value) {
                        Some(Some(txn)) => {
                            entries.by_producer.insert(txn.producer_id, id.clone());
                            entries.by_id.insert(id, Entry { txn, pending: false });
                        }
                        Some(None) => {
                            tracing::warn!(transactional_id = %id, offset = r.offset, "skipping a malformed transaction record");
                            skipped += 1;
                        }
                        None => {
                            entries.by_id.remove(&id);
                        }
                    }
                }
            })?;
        }
        if skipped > 0 {
            tracing::warn!(
                skipped,
                "skipped undecodable records of {TRANSACTION_STATE_TOPIC}"
            );
        }
        let Entries { by_id, by_producer } = &mut *entries;
        by_producer.retain(|producer_id, id| {
            by_id
                .get(id)
                .is_some_and(|e| e.txn.producer_id == *producer_id)
        });
        if !by_id.is_empty() {
            tracing::info!(
                transactional_ids = by_id.len(),
                "replayed {TRANSACTION_STATE_TOPIC}"
            );
        }
        Ok(())
    }

    /// Appends `txn` as the state of `id`, waits until it is durable, then applies it.
    /// `keep_pending` keeps other requests away while markers are written.
    pub(super) async fn store(
        &self,
        id: &str,
        txn: TxnMetadata,
        keep_pending: bool,
    ) -> Result<(), TxnError> {
        let stored = match self.append_state(id, &txn).await {
            Ok((partition, last_offset)) => partition.wait_durable(last_offset).await,
            Err(e) => Err(e),
        };
        self.apply(id, txn, stored, keep_pending)
    }

    /// Stores a completed transaction's state and applies it without waiting for it to be
    /// durable: its markers are, so a crash before this record is leaves the transaction
    /// prepared, and the replay completes it again. Anything stored later for `id` goes to
    /// the same partition after it, so it is durable first.
    async fn store_completion(&self, id: &str, txn: TxnMetadata) -> Result<(), TxnError> {
        let stored = match self.append_state(id, &txn).await {
            Ok((partition, last_offset)) => {
                tokio::spawn(async move {
                    if let Err(e) = partition.wait_durable(last_offset).await {
                        tracing::error!(error = %e, "fsync of {TRANSACTION_STATE_TOPIC} failed");
                    }
                });
                Ok(())
            }
            Err(e) => Err(e),
        };
        self.apply(id, txn, stored, false)
    }

    /// Appends the record of `id`'s state `txn` (on a blocking thread): the partition and
    /// the record's offset. Only the request that claimed `id` stores its state, so records of
    /// one id are appended in the order they were decided.
    async fn append_state(
        &self,
        id: &str,
        txn: &TxnMetadata,
    ) -> Result<(Arc<Partition>, i64), StorageError> {
        let partition =
            Arc::clone(&self.state_log[coordinator_partition(id, self.state_log.len())]);
        let now = self.clock.now().wall_ms;
        let mut batch = BatchBuilder::new(Compression::None);
        batch.append(&Record {
            key: Some(encode_key(id)?),
            value: Some(encode_value(txn)?),
            headers: Vec::new(),
            timestamp: now,
        });
        let batch = batch.build(0)?;
        off_workers(move || {
            let info = partition.append(&batch, now)?;
            Ok((partition, info.last_offset))
        })
        .await
    }

    /// Applies `txn` as `id`'s state once `stored` says it was stored.
    fn apply(
        &self,
        id: &str,
        txn: TxnMetadata,
        stored: Result<(), StorageError>,
        keep_pending: bool,
    ) -> Result<(), TxnError> {
        let mut entries = self.lock();
        let Entries { by_id, by_producer } = &mut *entries;
        let Some(entry) = by_id.get_mut(id) else {
            return Err(TxnError::NotStored(NotStored::Unavailable));
        };
        if let Err(e) = stored {
            entry.pending = false;
            if entry.txn.producer_epoch < 0 {
                // A new transactional id whose first state was never stored.
                by_id.remove(id);
            }
            return Err(not_stored(id, &e));
        }
        if entry.txn.producer_id != txn.producer_id {
            by_producer.remove(&entry.txn.producer_id);
        }
        by_producer.insert(txn.producer_id, id.to_string());
        entry.txn = txn;
        entry.pending = keep_pending;
        Ok(())
    }

    /// Takes `id` for a change `decide` chooses, if it chooses one: no other request may
    /// change it until the change is stored.
    fn claim<T>(
        &self,
        id: &str,
        decide: impl FnOnce(&TxnMetadata) -> Result<Option<T>, TxnError>,
    ) -> Result<Option<T>, TxnError> {
        let mut entries = self.lock();
        let entry = entries
            .by_id
            .get_mut(id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        if entry.pending {
            return Err(TxnError::ConcurrentTransactions);
        }
        let change = decide(&entry.txn)?;
        if change.is_some() {
            entry.pending = true;
        }
        Ok(change)
    }

    /// InitProducerId with a transactional id: the producer id and the next epoch, which
    /// fences every older producer of the id. An open transaction is aborted first.
    /// `expected` is the producer id and epoch the producer had, if it says (KIP-360).
    pub(crate) async fn init_producer_id(
        &self,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), TxnError> {
        if timeout_ms <= 0 || i64::from(timeout_ms) > self.config.max_timeout.as_millis() as i64 {
            return Err(TxnError::InvalidTransactionTimeout);
        }
        enum Next {
            Answer(i64, i16),
            Store(TxnMetadata),
            Abort(TxnMetadata),
        }
        loop {
            let next = {
                let mut entries = self.lock();
                if !entries.by_id.contains_key(id) {
                    let producer_id = self.ids.next_id().map_err(|e| not_stored(id, &e.into()))?;
                    let txn = TxnMetadata::new(producer_id, timeout_ms);
                    entries.by_id.insert(
                        id.to_string(),
                        Entry {
                            txn,
                            pending: false,
                        },
                    );
                }
                let entry = entries.by_id.get_mut(id).expect("inserted above");
                if entry.pending {
                    return Err(TxnError::ConcurrentTransactions);
                }
                let now = self.clock.now().wall_ms;
                let next = match entry.txn.init_step(expected)? {
                    InitStep::Retry => {
                        Next::Answer(entry.txn.producer_id, entry.txn.producer_epoch)
                    }
                    InitStep::AbortFirst => Next::Abort(entry.txn.fenced_abort(now)),
                    InitStep::Bump => {
                        let new_id = if entry.txn.epoch_exhausted() {
                            Some(self.ids.next_id().map_err(|e| not_stored(id, &e.into()))?)
                        } else {
                            None
                        };
                        Next::Store(entry.txn.bumped(timeout_ms, new_id, now))
                    }
                };
                if !matches!(next, Next::Answer(..)) {
                    entry.pending = true;
                }
                next
            };
            match next {
                Next::Answer(producer_id, epoch) => return Ok((producer_id, epoch)),
                Next::Store(txn) => {
                    let ids = (txn.producer_id, txn.producer_epoch);
                    self.store(id, txn, false).await?;
                    return Ok(ids);
                }
                Next::Abort(aborting) => {
                    tracing::info!(
                        transactional_id = id,
                        "a new producer aborts the open transaction of the one it fences"
                    );
                    self.store(id, aborting.clone(), true).await?;
                    self.complete(id, aborting).await?;
                }
            }
        }
    }

    /// Adds partitions to the producer's transaction (AddPartitionsToTxn, and AddOffsetsToTxn
    /// with the group's `__consumer_offsets` partition).
    pub(crate) async fn add_partitions(
        &self,
        id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
    ) -> Result<(), TxnError> {
        let change = self.claim(id, |txn| {
            txn.check_producer(producer.0, producer.1)?;
            txn.with_partitions(partitions, self.clock.now().wall_ms)
        })?;
        match change {
            Some(txn) => self.store(id, txn, false).await,
            None => Ok(()),
        }
    }

    /// The `__consumer_offsets` partition of a group, as a partition of a transaction.
    pub(crate) fn offsets_partition(&self, group_id: &str) -> (String, i32) {
        (
            OFFSETS_TOPIC.to_string(),
            self.groups.partition_for(group_id) as i32,
        )
    }

    /// Ends the producer's transaction (EndTxn): answered once the decision is durable and the
    /// markers written.
    pub(crate) async fn end_transaction(
        &self,
        id: &str,
        producer: (i64, i16),
        commit: bool,
    ) -> Result<(), TxnError> {
        let change = self.claim(id, |txn| {
            txn.check_producer(producer.0, producer.1)?;
            match txn.end_step(commit, self.clock.now().wall_ms)? {
                EndStep::AlreadyDone => Ok(None),
                EndStep::Prepare(prepared) => Ok(Some(prepared)),
            }
        })?;
        if let Some(prepared) = change {
            self.store(id, prepared.clone(), true).await?;
            if let Err(code) = self.complete(id, prepared).await {
                // The decision is durable; the timer finishes the markers.
                tracing::warn!(transactional_id = id, error = %code, "markers not all written yet");
            }
        }
        Ok(())
    }

    /// Writes the markers of a prepared transaction and stores its completion. On failure the
    /// transaction stays prepared, and the timer tries again.
    async fn complete(&self, id: &str, prepared: TxnMetadata) -> Result<(), TxnError> {
        match self.write_markers(&prepared).await {
            Ok(()) => {
                self.store_completion(id, prepared.completed(self.clock.now().wall_ms))
                    .await
            }
            Err(e) => {
                if let Some(entry) = self.lock().by_id.get_mut(id) {
                    entry.pending = false;
                }
                Err(not_stored(id, &e))
            }
        }
    }

    async fn write_markers(&self, txn: &TxnMetadata) -> Result<(), StorageError> {
        let commit = txn.state == TxnState::PrepareCommit;
        let marker = if commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        };
        let now = self.clock.now().wall_ms;
        let batch = control_batch(txn.producer_id, txn.producer_epoch, marker, 0, now);
        // A deleted topic's partitions get no marker.
        let partitions: Vec<_> = txn
            .partitions
            .iter()
            .filter_map(|(topic, index)| {
                let partition = self.logs.get(&TopicPartition::new(topic, *index))?;
                Some((topic.clone(), *index, partition))
            })
            .collect();
        let written = off_workers(move || {
            let mut written = Vec::with_capacity(partitions.len());
            for (topic, index, partition) in partitions {
                match partition.append_from(&batch, now, Origin::Coordinator) {
                    Ok(info) => written.push((topic, index, partition, info.last_offset)),
                    Err(StorageError::Deleted) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(written)
        })
        .await?;
        try_join_all(written.iter().map(|(_, _, p, last)| p.wait_durable(*last))).await?;
        for (topic, index, _, marker) in &written {
            if topic.as_str() == OFFSETS_TOPIC {
                self.groups
                    .end_transaction(*index, txn.producer_id, commit, *marker);
            }
        }
        Ok(())
    }

    /// Checks that `producer` may write a transactional batch to `topic`-`partition`: it is
    /// the current producer of its transactional id, and the partition is in its open
    /// transaction. Called under the partition's lock, so no marker can pass in between.
    pub(crate) fn verify(
        &self,
        producer_id: i64,
        epoch: i16,
        topic: &str,
        partition: i32,
    ) -> Result<(), StorageError> {
        let entries = self.lock();
        let txn = entries
            .by_producer
            .get(&producer_id)
            .and_then(|id| entries.by_id.get(id))
            .map(|e| &e.txn)
            .ok_or(StorageError::NotInTransaction { producer_id })?;
        if epoch != txn.producer_epoch {
            return Err(StorageError::InvalidProducerEpoch {
                producer_id,
                got: epoch,
                current: txn.producer_epoch,
            });
        }
        let added = txn.state == TxnState::Ongoing
            && txn.partitions.contains(&(topic.to_string(), partition));
        if added {
            Ok(())
        } else {
            Err(StorageError::NotInTransaction { producer_id })
        }
    }

    /// Every transactional id with its state, sorted by id.
    pub(crate) fn list(&self) -> Vec<(String, TxnMetadata)> {
        let mut all: Vec<_> = self
            .lock()
            .by_id
            .iter()
            .filter(|(_, e)| e.txn.producer_epoch >= 0)
            .map(|(id, e)| (id.clone(), e.txn.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// One transactional id's state.
    pub(crate) fn describe(&self, id: &str) -> Option<TxnMetadata> {
        self.lock()
            .by_id
            .get(id)
            .filter(|e| e.txn.producer_epoch >= 0)
            .map(|e| e.txn.clone())
    }

    /// Completes transactions caught between decision and completion (at start, or after a
    /// failed marker), and aborts the ones past their timeout, until `stop`.
    pub(crate) async fn run_timers(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        loop {
            self.settle().await;
            tokio::select! {
                _ = tokio::time::sleep(self.config.abort_check_interval) => {}
                _ = stop.changed() => return,
            }
        }
    }

    pub(super) async fn settle(&self) {
        let now = self.clock.now().wall_ms;
        let due: Vec<(String, TxnMetadata, bool)> = {
            let mut entries = self.lock();
            entries
                .by_id
                .iter_mut()
                .filter(|(_, e)| !e.pending)
                .filter_map(|(id, e)| {
                    let (txn, store_first) = if e.txn.state.is_preparing() {
                        (e.txn.clone(), false)
                    } else if e.txn.timed_out(now) {
                        (e.txn.fenced_abort(now), true)
                    } else {
                        return None;
                    };
                    e.pending = true;
                    Some((id.clone(), txn, store_first))
                })
                .collect()
        };
        for (id, txn, store_first) in due {
            if store_first {
                tracing::info!(transactional_id = %id, "aborting a transaction past its timeout");
                if self.store(&id, txn.clone(), true).await.is_err() {
                    continue;
                }
            }
            if let Err(code) = self.complete(&id, txn).await {
                tracing::warn!(transactional_id = %id, error = %code, "could not complete a transaction yet");
            }
        }
    }
}
