//! The broker's storage engine: one append-only log per partition, as segment files of record
//! batches stored exactly as producers sent them. It knows nothing of requests or the
//! protocol: handlers call it with bytes and offsets.
//!
//! # Layout
//! ```text
//! DATA_DIR/<topic>-<partition>/00000000000000000000.log        record batches
//!                             /00000000000000000000.index      offset → position (closed segments)
//!                             /00000000000000000000.timeindex  timestamp → offset (closed segments)
//!                             /00000000000000000000.txnindex   aborted transactions (closed segments)
//!                             /00000000000000000123.snapshot   producers' state at offset 123
//!                             /log-start-offset                 once retention has deleted segments
//! ```
//!
//! # Write path
//! 1. A produce hands [`Partition::append`] the batches of one partition. They are checked
//!    (sizes, magic, CRC-32C, and every record: lengths, offset deltas, counts, keys on
//!    compacted topics, timestamps; see `validation`), given the next offsets (only the base offset
//!    field changes, which the CRC does not cover) and written to the active segment.
//! 2. The producer waits in [`Partition::wait_durable`]: an fsync covering its batches and
//!    every other append made meanwhile advances the high watermark (group commit).
//! 3. A segment that is full or old is closed before an append: fsynced, its indexes written
//!    beside it, and a new segment created.
//!
//! # Compaction
//! Topics with `cleanup.policy=compact` have their closed segments rewritten to keep the
//! latest record of each key, without changing any offset (see `compaction`).
//!
//! # Recovery
//! At start every batch of each partition's active segment is checked (length, magic, CRC,
//! offsets increasing) and the file is cut at the first bad byte, so a torn write is never
//! served and never stops the broker. Closed segments were fsynced when they were closed; their
//! saved indexes are used when well formed and rebuilt from the batch headers otherwise.
//! Idempotent producers' state comes from the newest producer snapshot plus the headers of
//! the batches after it (see `producers`).

mod append_queue;
mod compaction;
mod config;
mod error;
mod faults;
mod index;
mod log;
mod partition;
mod producers;
mod read;
mod retention;
mod segment;
mod transactions;
mod validation;

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use eddy_core::log::TopicPartition;

pub(crate) use append_queue::{AppendQueue, QueuedAppend, Verify};
pub use config::LogConfig;
pub(crate) use error::StorageError;
pub use faults::StorageFaults;
pub(crate) use index::write_synced;
pub(crate) use log::Origin;
pub(crate) use partition::{off_workers, Partition};
pub(crate) use read::FileRange;
pub(crate) use validation::{RecordError, RecordsRefusal};

/// Every partition log of the broker, under one data directory.
#[derive(Debug)]
pub(crate) struct LogStore {
    dir: PathBuf,
    partitions: RwLock<HashMap<TopicPartition, Arc<Partition>>>,
    /// What every partition's disk is made to do, for tests.
    pub(crate) faults: StorageFaults,
}

impl LogStore {
    /// The store in `dir`, which is created if needed. Partitions are opened by
    /// [`Self::open_partition`] as the topic metadata names them.
    pub(crate) fn new(dir: &Path) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            partitions: RwLock::new(HashMap::new()),
            faults: StorageFaults::default(),
        })
    }

    fn partition_dir(&self, tp: &TopicPartition) -> PathBuf {
        self.dir.join(format!("{}-{}", tp.topic, tp.partition))
    }

    /// Opens (recovering) or creates a partition's log.
    pub(crate) fn open_partition(
        &self,
        tp: TopicPartition,
        config: LogConfig,
        now_ms: i64,
    ) -> io::Result<Arc<Partition>> {
        let dir = self.partition_dir(&tp);
        let partition =
            Arc::new(Partition::open(tp.clone(), &dir, config, now_ms)?.with_faults(&self.faults));
        self.write().insert(tp, Arc::clone(&partition));
        Ok(partition)
    }

    /// The partition, if it exists.
    pub(crate) fn get(&self, tp: &TopicPartition) -> Option<Arc<Partition>> {
        self.read().get(tp).cloned()
    }

    /// Every partition.
    pub(crate) fn partitions(&self) -> Vec<Arc<Partition>> {
        self.read().values().cloned().collect()
    }

    /// Deletes a partition and its files. Reads already under way finish on the open files.
    pub(crate) fn delete_partition(&self, tp: &TopicPartition) -> io::Result<()> {
        let removed = self.write().remove(tp);
        if let Some(partition) = removed {
            let dir = partition.mark_deleted();
            remove_dir_if_present(&dir)?;
        }
        Ok(())
    }

    /// Removes partition directories that no topic names (left by a deletion that a crash
    /// interrupted).
    pub(crate) fn remove_unknown_partitions(&self, known: impl Fn(&str) -> bool) -> io::Result<()> {
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let is_partition_dir = entry.file_type()?.is_dir()
                && name
                    .rsplit_once('-')
                    .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
            if is_partition_dir && !known(&name) {
                tracing::info!(dir = %name, "removing the log of a deleted partition");
                remove_dir_if_present(&entry.path())?;
            }
        }
        Ok(())
    }

    /// Syncs every log and writes its indexes, for a clean shutdown.
    pub(crate) fn close(&self) -> io::Result<()> {
        for partition in self.partitions() {
            partition.close()?;
        }
        Ok(())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<TopicPartition, Arc<Partition>>> {
        self.partitions.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<TopicPartition, Arc<Partition>>> {
        self.partitions.write().unwrap_or_else(|p| p.into_inner())
    }
}

fn remove_dir_if_present(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod offline_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transaction_tests;
