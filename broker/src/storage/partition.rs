//! One partition as the rest of the broker sees it: appends under a short lock, reads
//! outside it, and durability by group commit.
//!
//! # Durability
//! With `fsync_before_ack` (the default) the high watermark is the last fsynced offset + 1:
//! consumers never see a record that a crash could take back, and a producer waits in
//! [`Partition::wait_durable`] until its batches are below it. One fsync at a time runs per
//! partition; every append that arrives while it runs is covered by the next one, so each
//! fsync serves all the producers that queued behind it (group commit) and durability costs
//! latency, not throughput.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use eddy_core::log::{Offset, Timestamp, TopicPartition};
use eddy_core::wire::batch::{decode_records, BatchHeader, BatchRecord, Batches};
use tokio::sync::watch;

use super::compaction::{self, CompactionStats};
use super::config::LogConfig;
use super::log::{no_transactions, AppendInfo, Log, Origin};
use super::read::FileRange;
use super::transactions::AbortedTransaction;
use super::{StorageError, StorageFaults};

/// One partition's log, shared by every connection.
#[derive(Debug)]
pub(crate) struct Partition {
    topic_partition: TopicPartition,
    /// Shared with the blocking threads that fsync it.
    log: Arc<Mutex<Log>>,
    high_watermark: watch::Sender<Offset>,
    flush: tokio::sync::Mutex<()>,
    deleted: AtomicBool,
    /// Set when an fsync failed: nothing is appended, made durable or read any more.
    offline: AtomicBool,
    faults: StorageFaults,
}

/// What a read returns.
#[derive(Debug, Clone, Default)]
pub(crate) struct FetchedBatches {
    /// Whole record batches, as stored.
    pub records: bytes::Bytes,
}

/// Where a read's batches are, and the offsets a fetch reports with them.
#[derive(Debug, Clone)]
pub(crate) struct LocatedBatches {
    /// The whole batches to send, or `None` when there is nothing to read.
    pub range: Option<FileRange>,
    /// The high watermark when the read was planned.
    pub high_watermark: Offset,
    /// The log start offset when the read was planned.
    pub log_start_offset: Offset,
}

impl Partition {
    /// Opens (recovering) or creates the partition's log in `dir`.
    pub(crate) fn open(
        topic_partition: TopicPartition,
        dir: &Path,
        config: LogConfig,
        now_ms: i64,
    ) -> io::Result<Self> {
        let (log, truncations) = Log::open(topic_partition.clone(), dir, config, now_ms)?;
        for t in truncations {
            tracing::warn!(
                partition = %topic_partition,
                position = t.position,
                dropped_bytes = t.dropped,
                reason = %t.reason,
                "truncated a torn or corrupt log tail"
            );
        }
        // Whatever survived recovery is on disk from now on.
        log.active_file().sync_data()?;
        let (high_watermark, _) = watch::channel(log.next_offset());
        Ok(Self {
            topic_partition,
            log: Arc::new(Mutex::new(log)),
            high_watermark,
            flush: tokio::sync::Mutex::new(()),
            deleted: AtomicBool::new(false),
            offline: AtomicBool::new(false),
            faults: StorageFaults::default(),
        })
    }

    /// The partition, meeting the storage faults injected into `faults`.
    pub(crate) fn with_faults(mut self, faults: &StorageFaults) -> Self {
        self.faults = faults.clone();
        lock(&self.log).faults = faults.clone();
        self
    }

    /// Which partition this is.
    pub(crate) fn topic_partition(&self) -> &TopicPartition {
        &self.topic_partition
    }

    fn lock(&self) -> MutexGuard<'_, Log> {
        lock(&self.log)
    }

    fn check_live(&self) -> Result<(), StorageError> {
        if self.deleted.load(Ordering::Acquire) {
            Err(StorageError::Deleted)
        } else if self.offline.load(Ordering::Acquire) {
            Err(StorageError::Offline)
        } else {
            Ok(())
        }
    }

    /// Takes the partition offline if `result` is a failed fsync. After a failed fsync the
    /// kernel may have dropped the pages it could not write, and a retried fsync would then
    /// succeed without them: nothing this partition answers could be trusted until a restart
    /// recovers it from what is really on disk.
    fn offline_on_failed_fsync<T>(
        &self,
        result: Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        if let Err(StorageError::FsyncFailed(e)) = &result {
            if !self.offline.swap(true, Ordering::AcqRel) {
                tracing::error!(partition = %self.topic_partition, error = %e, "fsync failed: the partition is offline until the broker restarts");
            }
        }
        result
    }

    /// Appends one or more whole record batches of a producer that is not transactional and
    /// returns their offsets. The records are readable once [`Self::wait_durable`] says so.
    pub(crate) fn append(
        &self,
        records: &[u8],
        now_ms: Timestamp,
    ) -> Result<AppendInfo, StorageError> {
        self.append_from(
            records,
            now_ms,
            Origin::Client {
                verify: &no_transactions,
            },
        )
    }

    /// Appends one or more whole record batches (as a produce request carries them, or as a
    /// coordinator writes them) and returns their offsets.
    pub(crate) fn append_from(
        &self,
        records: &[u8],
        now_ms: Timestamp,
        origin: Origin<'_>,
    ) -> Result<AppendInfo, StorageError> {
        self.check_live()?;
        let mut log = self.lock();
        self.faults.before_append()?;
        let (info, durable_by_roll) =
            self.offline_on_failed_fsync(log.append(records, now_ms, origin))?;
        if !log.config.fsync_before_ack {
            self.advance_high_watermark(info.last_offset + 1);
        } else if let Some(durable) = durable_by_roll {
            self.advance_high_watermark(durable);
        }
        Ok(info)
    }

    /// Waits until every offset up to `last_offset` is durable (below the high watermark),
    /// fsyncing if no one else is.
    pub(crate) async fn wait_durable(&self, last_offset: Offset) -> Result<(), StorageError> {
        loop {
            if self.high_watermark() > last_offset {
                return Ok(());
            }
            let _flushing = self.flush.lock().await;
            if self.high_watermark() > last_offset {
                return Ok(());
            }
            self.check_live()?;
            let target = self.sync().await?;
            self.advance_high_watermark(target);
        }
    }

    /// [`Self::wait_durable`] for a blocking thread (a coordinator's appends): waits for, or
    /// runs, the fsync that covers `last_offset`. Never call it on an async worker.
    pub(crate) fn wait_durable_blocking(&self, last_offset: Offset) -> Result<(), StorageError> {
        loop {
            if self.high_watermark() > last_offset {
                return Ok(());
            }
            let _flushing = self.flush.blocking_lock();
            if self.high_watermark() > last_offset {
                return Ok(());
            }
            self.check_live()?;
            let synced = sync_log(&self.log, &self.faults);
            let target = self.offline_on_failed_fsync(synced)?;
            self.advance_high_watermark(target);
        }
    }

    /// fsyncs whatever was appended, for the page-cache mode's periodic flush and shutdown.
    pub(crate) async fn flush(&self) -> Result<(), StorageError> {
        let _flushing = self.flush.lock().await;
        let target = self.sync().await?;
        self.advance_high_watermark(target);
        Ok(())
    }

    /// fsyncs the active segment on a blocking thread (the log's lock too is taken there: a
    /// segment roll may hold it across its own fsyncs) and returns the offset below which
    /// every record is now durable.
    async fn sync(&self) -> Result<Offset, StorageError> {
        self.check_live()?;
        let log = Arc::clone(&self.log);
        let faults = self.faults.clone();
        let synced = off_workers(move || sync_log(&log, &faults)).await;
        self.offline_on_failed_fsync(synced)
    }

    fn advance_high_watermark(&self, offset: Offset) {
        self.high_watermark.send_if_modified(|hw| {
            let moved = offset > *hw;
            if moved {
                *hw = offset;
            }
            moved
        });
    }

    /// The offset below which records are durable and visible to consumers.
    pub(crate) fn high_watermark(&self) -> Offset {
        *self.high_watermark.borrow()
    }

    /// The offset below which every transaction is settled: `read_committed` consumers read up
    /// to it. It is the high watermark unless a transaction is open (or its marker not yet
    /// durable) below it.
    pub(crate) fn last_stable_offset(&self) -> Offset {
        let high_watermark = self.high_watermark();
        self.lock().last_stable_offset(high_watermark)
    }

    /// The aborted transactions with records at or after `offset` and below `below`.
    pub(crate) fn aborted_transactions(
        &self,
        offset: Offset,
        below: Offset,
    ) -> Vec<AbortedTransaction> {
        self.lock().aborted_transactions(offset..below)
    }

    /// Whether `producer_id` has a transaction open in this partition.
    #[cfg(test)]
    pub(crate) fn has_open_transaction(&self, producer_id: i64) -> bool {
        self.lock().has_open_transaction(producer_id)
    }

    /// Changes to the high watermark, for fetches that wait for data.
    pub(crate) fn watch_high_watermark(&self) -> watch::Receiver<Offset> {
        self.high_watermark.subscribe()
    }

    /// The offset the next appended record will get.
    pub(crate) fn log_end_offset(&self) -> Offset {
        self.lock().next_offset()
    }

    /// The first offset the log holds.
    pub(crate) fn log_start_offset(&self) -> Offset {
        self.lock().log_start_offset()
    }

    /// Bytes on disk.
    #[cfg(test)]
    pub(crate) fn size(&self) -> u64 {
        self.lock().size()
    }

    /// Whole batches from the one holding `offset`, up to about `max_bytes` (at least one
    /// batch), all below the high watermark, read into memory.
    pub(crate) fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
    ) -> Result<FetchedBatches, StorageError> {
        let located = self.locate(offset, max_bytes)?;
        let records = match &located.range {
            Some(range) => {
                let mut buf = bytes::BytesMut::zeroed(range.len as usize);
                std::os::unix::fs::FileExt::read_exact_at(&*range.file, &mut buf, range.position)?;
                buf.freeze()
            }
            None => bytes::Bytes::new(),
        };
        Ok(FetchedBatches { records })
    }

    /// Calls `f` with every batch visible to consumers, from the log start, in order, with its
    /// records decoded: how coordinators rebuild their state from internal topics. A batch
    /// whose records do not decode (within 64 MiB once decompressed) is logged and skipped,
    /// not a reason to refuse to start; the number skipped is returned.
    pub(crate) fn replay(
        &self,
        mut f: impl FnMut(&BatchHeader, Vec<BatchRecord>),
    ) -> Result<usize, StorageError> {
        let mut offset = self.log_start_offset();
        let mut skipped = 0;
        loop {
            let fetched = self.read(offset, 1 << 20)?;
            if fetched.records.is_empty() {
                return Ok(skipped);
            }
            for item in Batches::new(&fetched.records) {
                let (header, bytes) = item?;
                offset = header.next_offset();
                match decode_records(&fetched.records.slice_ref(bytes), 64 << 20) {
                    Ok((_, records)) => f(&header, records),
                    Err(e) => {
                        skipped += 1;
                        tracing::warn!(
                            partition = %self.topic_partition(),
                            offset = header.base_offset,
                            error = %e,
                            "skipping a batch whose records do not decode"
                        );
                    }
                }
            }
        }
    }

    /// Where the batches [`Self::read`] would return are, without reading them: the file
    /// range can be sent to a socket as it is.
    pub(crate) fn locate(
        &self,
        offset: Offset,
        max_bytes: usize,
    ) -> Result<LocatedBatches, StorageError> {
        self.locate_below(offset, max_bytes, self.high_watermark())
    }

    /// As [`Self::locate`], reading nothing at or past `upper_bound` (the last stable offset,
    /// for `read_committed`), which must not exceed the high watermark.
    pub(crate) fn locate_below(
        &self,
        offset: Offset,
        max_bytes: usize,
        upper_bound: Offset,
    ) -> Result<LocatedBatches, StorageError> {
        self.check_live()?;
        let high_watermark = self.high_watermark();
        let upper_bound = upper_bound.min(high_watermark);
        let mut offset = offset;
        loop {
            let (plan, log_start_offset) = {
                let log = self.lock();
                (log.plan_read(offset, upper_bound)?, log.log_start_offset())
            };
            let range = match plan {
                Some(plan) => plan.locate(max_bytes)?,
                None => None,
            };
            // A segment with nothing at or after `offset` (its tail was compacted away): go on
            // with the next segment, if that holds visible records.
            if range.is_none() {
                if let Some(next) = self.lock().next_segment_base(offset) {
                    if next < upper_bound {
                        offset = next;
                        continue;
                    }
                }
            }
            return Ok(LocatedBatches {
                range,
                high_watermark,
                log_start_offset,
            });
        }
    }

    /// The first record at or after `timestamp` that consumers can see: (offset, timestamp).
    pub(crate) fn offset_for_timestamp(
        &self,
        timestamp: Timestamp,
        upper_bound: Offset,
    ) -> Result<Option<(Offset, Timestamp)>, StorageError> {
        let upper_bound = upper_bound.min(self.high_watermark());
        let plan = self.lock().plan_timestamp_search(timestamp, upper_bound);
        match plan {
            Some(plan) => Ok(plan.find_timestamp(timestamp)?),
            None => Ok(None),
        }
    }

    /// Compacts the closed segments if the topic is compacted (`cleanup.policy=compact`).
    /// Reading and rewriting happen outside the lock; only the swap of each rewritten
    /// segment takes it.
    pub(crate) fn compact(&self, now_ms: Timestamp) -> Result<CompactionStats, StorageError> {
        let high_watermark = self.high_watermark();
        let (segments, delete_retention_ms, aborted) = {
            let mut log = self.lock();
            if !log.config.compact {
                return Ok(CompactionStats::default());
            }
            let last_stable_offset = log.last_stable_offset(high_watermark);
            (
                log.segments_to_clean(last_stable_offset),
                log.config.delete_retention_ms,
                log.all_aborted_transactions(),
            )
        };
        if segments.is_empty() {
            return Ok(CompactionStats::default());
        }
        let aborted = compaction::AbortedRanges::new(&aborted);
        let latest = compaction::latest_offsets(&segments, &aborted)?;
        let mut stats = CompactionStats::default();
        for segment in &segments {
            let tombstones_before = now_ms.saturating_sub(delete_retention_ms);
            if let Some((cleaned, done)) =
                compaction::rewrite(segment, &latest, &aborted, tombstones_before)?
            {
                if self.lock().replace_segment(segment, &cleaned, now_ms)? {
                    stats.segments_rewritten += done.segments_rewritten;
                    stats.records_removed += done.records_removed;
                    stats.bytes_freed += done.bytes_freed;
                }
            }
        }
        Ok(stats)
    }

    /// The base offset of the active segment: it moves when a segment is closed, which is
    /// when compaction has new work.
    pub(crate) fn active_segment_base(&self) -> Offset {
        self.lock().active_base_offset()
    }

    /// The current settings.
    pub(crate) fn config(&self) -> LogConfig {
        self.lock().config.clone()
    }

    /// Deletes the closed segments that `retention.ms` and `retention.bytes` let go, moving
    /// the log start offset; returns how many went.
    pub(crate) fn apply_retention(&self, now_ms: Timestamp) -> Result<usize, StorageError> {
        Ok(super::retention::apply(&mut self.lock(), now_ms)?)
    }

    /// Marks the partition deleted: later operations fail, and the directory can go.
    pub(crate) fn mark_deleted(&self) -> std::path::PathBuf {
        self.deleted.store(true, Ordering::Release);
        self.lock().dir().to_path_buf()
    }

    /// Syncs the log and writes its indexes, for a clean shutdown.
    pub(crate) fn close(&self) -> io::Result<()> {
        self.lock().close()
    }
}

/// Runs `work` (anything that may wait for the disk: appends, segment rolls, reads of batch
/// headers, fsyncs) on a blocking thread, never on the async workers, so that a slow disk
/// delays only the requests that wait for it.
pub(crate) async fn off_workers<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StorageError> + Send + 'static,
) -> Result<T, StorageError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| StorageError::Io(io::Error::other(e)))?
}

/// fsyncs the log's active segment (on the calling thread, which must be allowed to block):
/// the offset below which every record is now durable.
fn sync_log(log: &Mutex<Log>, faults: &StorageFaults) -> Result<Offset, StorageError> {
    let (file, target) = {
        let log = lock(log);
        (log.active_file(), log.next_offset())
    };
    faults
        .before_fsync()
        .and_then(|()| file.sync_data())
        .map_err(StorageError::FsyncFailed)?;
    Ok(target)
}

fn lock(log: &Mutex<Log>) -> MutexGuard<'_, Log> {
    // A panic while appending leaves the log as consistent as a crash would; keep going.
    log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
