//! A partition's log: its segments in offset order, appends to the last (active) one, rolls,
//! and the lookups behind reads. This type does no locking; [`super::Partition`] wraps it.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use eddy_core::log::{Offset, Timestamp, TopicPartition};
use eddy_core::wire::batch::{self, BatchHeader, Batches, ControlType};

use super::compaction::{self, SegmentToClean};
use super::config::LogConfig;
use super::index::write_synced;
use super::producers::{ProducerStates, SequenceCheck};
use super::read::ReadPlan;
use super::segment::{self, Segment, Truncation};
use super::transactions::{AbortedTransaction, Transactions};
use super::validation;
use super::{StorageError, StorageFaults};

const LOG_START_OFFSET_FILE: &str = "log-start-offset";

/// Who appends to a log.
#[derive(Clone, Copy)]
pub(crate) enum Origin<'a> {
    /// A producer. A transactional batch that opens its producer's transaction in this
    /// partition is first put to `verify` (producer id, epoch), which refuses it unless the
    /// partition is part of that producer's current transaction (KIP-890).
    Client {
        /// Checks that the producer's transaction includes this partition.
        verify: &'a dyn Fn(i64, i16) -> Result<(), StorageError>,
    },
    /// The group coordinator writing a producer's transactional offset commit (TxnOffsetCommit):
    /// its batch carries no sequence number but is verified as a producer's would be.
    TxnOffsetCommit {
        /// Checks that the producer's transaction includes this partition.
        verify: &'a dyn Fn(i64, i16) -> Result<(), StorageError>,
    },
    /// The transaction coordinator writing markers.
    Coordinator,
}

impl std::fmt::Debug for Origin<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Origin::Client { .. } => "Client",
            Origin::TxnOffsetCommit { .. } => "TxnOffsetCommit",
            Origin::Coordinator => "Coordinator",
        })
    }
}

/// A verifier for producers that are not transactional: any transactional batch is refused.
pub(crate) fn no_transactions(producer_id: i64, _epoch: i16) -> Result<(), StorageError> {
    Err(StorageError::NotInTransaction { producer_id })
}

/// The marker of a control batch, if it carries one eddy knows.
fn marker_of(batch: &[u8]) -> Option<ControlType> {
    let (_, records) = batch::decode_records(&Bytes::copy_from_slice(batch), 1 << 16).ok()?;
    batch::control_type(&records.first()?.record)
}

/// Where an append put its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AppendInfo {
    /// Offset of the first record appended.
    pub base_offset: Offset,
    /// Offset of the last record appended.
    pub last_offset: Offset,
    /// The broker's timestamp if the topic uses `LogAppendTime`, else -1.
    pub log_append_time: Timestamp,
    /// The log's first offset after the append.
    pub log_start_offset: Offset,
}

#[derive(Debug)]
pub(crate) struct Log {
    topic_partition: TopicPartition,
    dir: PathBuf,
    pub(crate) config: LogConfig,
    /// Segments by base offset; the last is the active one. Never empty.
    segments: BTreeMap<Offset, Segment>,
    log_start_offset: Offset,
    /// Idempotent producers' last batches, rebuilt from the log at open.
    producers: ProducerStates,
    /// Open transactions and the aborted-transaction index.
    transactions: Transactions,
    /// Scratch space for the batches of one append, reused.
    scratch: Vec<u8>,
    /// A compressed batch's records while they are checked.
    decompressed: Vec<u8>,
    /// What the disk is made to do, for tests.
    pub(crate) faults: StorageFaults,
    headers: Vec<BatchHeader>,
}

impl Log {
    /// Opens the log in `dir`, creating it if needed. The active segment is verified batch by
    /// batch and truncated at the first bad byte; what was cut is returned for logging.
    pub(crate) fn open(
        topic_partition: TopicPartition,
        dir: &Path,
        config: LogConfig,
        now_ms: i64,
    ) -> io::Result<(Self, Vec<Truncation>)> {
        fs::create_dir_all(dir)?;
        let mut bases = Vec::new();
        for entry in fs::read_dir(dir)? {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            if let Some(base) = segment::parse_file_name(&name) {
                bases.push(base);
            } else if name.ends_with(".tmp") || name.ends_with(".cleaned") {
                fs::remove_file(dir.join(&*name))?;
            }
        }
        bases.sort_unstable();
        let mut segments = BTreeMap::new();
        let mut truncations = Vec::new();
        let last = bases.len().saturating_sub(1);
        for (i, &base) in bases.iter().enumerate() {
            let (segment, truncation) = Segment::open(
                dir,
                base,
                config.index_interval_bytes,
                i == last,
                // Compaction leaves gaps, only ever in closed segments.
                i != last,
                now_ms,
            )?;
            truncations.extend(truncation);
            segments.insert(base, segment);
        }
        if segments.is_empty() {
            let segment = Segment::create(dir, 0, config.index_interval_bytes, now_ms)?;
            sync_dir(dir)?;
            segments.insert(0, segment);
        }
        let first_base = *segments.keys().next().unwrap();
        let saved_start = fs::read_to_string(dir.join(LOG_START_OFFSET_FILE))
            .ok()
            .and_then(|s| s.trim().parse::<Offset>().ok());
        let mut log = Self {
            topic_partition,
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset: first_base,
            producers: ProducerStates::default(),
            transactions: Transactions::default(),
            scratch: Vec::new(),
            decompressed: Vec::new(),
            faults: StorageFaults::default(),
            headers: Vec::new(),
        };
        log.log_start_offset = saved_start
            .unwrap_or(first_base)
            .clamp(first_base, log.next_offset());
        log.load_producers()?;
        Ok((log, truncations))
    }

    /// The offset the next record will get (the log end offset).
    pub(crate) fn next_offset(&self) -> Offset {
        self.active().next_offset
    }

    /// The first offset the log holds.
    pub(crate) fn log_start_offset(&self) -> Offset {
        self.log_start_offset
    }

    /// Bytes of all segments.
    pub(crate) fn size(&self) -> u64 {
        self.segments.values().map(|s| s.size).sum()
    }

    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log has a segment")
    }

    /// The file of the active segment, for fsync.
    pub(crate) fn active_file(&self) -> Arc<File> {
        Arc::clone(&self.active().file)
    }

    /// Checks `records` (one or more whole batches), gives them the next offsets and appends
    /// them to the active segment, rolling first if it is full or old. Returns where they went
    /// and whether a roll made everything before them durable.
    pub(crate) fn append(
        &mut self,
        records: &[u8],
        now_ms: i64,
        origin: Origin<'_>,
    ) -> Result<(AppendInfo, Option<Offset>), StorageError> {
        self.headers.clear();
        let mut batches = Batches::new(records);
        for item in &mut batches {
            let (header, bytes) = item?;
            batch::validate(bytes)?;
            if bytes.len() > self.config.max_message_bytes {
                return Err(StorageError::BatchTooLarge {
                    size: bytes.len(),
                    max: self.config.max_message_bytes,
                });
            }
            if header.record_count != header.last_offset_delta + 1 && !header.is_control() {
                return Err(StorageError::InvalidBatch(format!(
                    "{} records but offsets span {}",
                    header.record_count,
                    header.last_offset_delta + 1
                )));
            }
            if matches!(origin, Origin::Client { .. }) {
                let checked = validation::check_producer_batch(
                    &self.topic_partition,
                    &self.config,
                    bytes,
                    &header,
                    now_ms,
                    &mut self.decompressed,
                );
                if self.decompressed.capacity() > 1 << 20 {
                    // Keep no large buffer per partition between appends.
                    self.decompressed = Vec::new();
                }
                checked?;
                if header.is_control() {
                    return Err(StorageError::InvalidBatch(
                        "control batches are written by coordinators, not producers".into(),
                    ));
                }
                if header.is_transactional() && header.producer_id < 0 {
                    return Err(StorageError::InvalidBatch(
                        "a transactional batch without a producer id".into(),
                    ));
                }
            }
            self.headers.push(header);
        }
        if !batches.remainder().is_empty() {
            return Err(StorageError::InvalidBatch(format!(
                "{} bytes after the last whole batch",
                batches.remainder().len()
            )));
        }
        if self.headers.is_empty() {
            return Err(StorageError::InvalidBatch("no record batch".into()));
        }

        if let Some(duplicate) = self.check_producers(origin)? {
            return Ok((duplicate, None));
        }
        if let Origin::Client { verify } | Origin::TxnOffsetCommit { verify } = origin {
            for header in self.headers.iter().filter(|h| h.is_transactional()) {
                if !self.producers.has_open_transaction(header.producer_id) {
                    verify(header.producer_id, header.producer_epoch)?;
                }
            }
        }

        let durable_by_roll = if self.should_roll(records.len() as u64, now_ms) {
            Some(self.roll(now_ms).map_err(StorageError::FsyncFailed)?)
        } else {
            None
        };

        // Give the batches their offsets (and the broker's time, for LogAppendTime).
        self.scratch.clear();
        self.scratch.extend_from_slice(records);
        let base_offset = self.next_offset();
        let mut next = base_offset;
        let mut position = 0;
        for header in &mut self.headers {
            let bytes = &mut self.scratch[position..position + header.size()];
            batch::set_base_offset(bytes, next);
            header.base_offset = next;
            if self.config.log_append_time {
                batch::set_log_append_time(bytes, now_ms);
                header.max_timestamp = now_ms;
            }
            next = header.next_offset();
            position += header.size();
        }

        let segment = self
            .segments
            .values_mut()
            .next_back()
            .expect("a log has a segment");
        let (size_before, next_before) = (segment.size, segment.next_offset);
        if let Err(e) = segment.append(&self.scratch, &self.headers) {
            // Leave no partial batch behind for a later append to follow.
            let _ = segment.truncate_to(size_before, next_before);
            return Err(e.into());
        }
        let mut position = 0;
        for header in &self.headers {
            let marker = header
                .is_control()
                .then(|| marker_of(&self.scratch[position..position + header.size()]))
                .flatten();
            position += header.size();
            let change = self.producers.record(header, marker);
            self.transactions.apply(change, self.log_start_offset);
        }
        Ok((
            AppendInfo {
                base_offset,
                last_offset: next - 1,
                log_append_time: if self.config.log_append_time {
                    now_ms
                } else {
                    -1
                },
                log_start_offset: self.log_start_offset,
            },
            durable_by_roll,
        ))
    }

    /// Rebuilds the producers' state and the partition's transactions: the newest valid
    /// snapshot at or below the log's end and the aborted-transaction index files of the
    /// segments below it, then the batches after it. Without a usable snapshot, or with an
    /// index file missing or damaged, every batch of the log is read again.
    fn load_producers(&mut self) -> io::Result<()> {
        let end = self.next_offset();
        let mut snapshots: Vec<Offset> = fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".snapshot")?.parse::<Offset>().ok()
            })
            .filter(|&offset| offset <= end)
            .collect();
        snapshots.sort_unstable();
        let mut from = Offset::MIN;
        while let Some(offset) = snapshots.pop() {
            let bytes = fs::read(self.dir.join(segment::file_name(offset, "snapshot")))?;
            if let Some(states) = ProducerStates::decode_snapshot(&bytes) {
                self.producers = states;
                from = offset;
                break;
            }
            tracing::warn!(dir = %self.dir.display(), offset, "ignoring a damaged producer snapshot");
        }
        if from != Offset::MIN {
            let mut aborted = Vec::new();
            for segment in self.segments.values().filter(|s| s.base_offset < from) {
                let path = self
                    .dir
                    .join(segment::file_name(segment.base_offset, "txnindex"));
                match fs::read(&path)
                    .ok()
                    .and_then(|b| Transactions::decode_index(&b))
                {
                    Some(entries) => aborted.extend(entries),
                    None => {
                        tracing::warn!(file = %path.display(), "aborted-transaction index missing or damaged: reading the whole log");
                        self.producers = ProducerStates::default();
                        from = Offset::MIN;
                        aborted.clear();
                        break;
                    }
                }
            }
            self.transactions.load_aborted(aborted);
        }
        for (producer_id, first_offset) in self.producers.open_transactions() {
            self.transactions.load_open(producer_id, first_offset);
        }
        let log_start_offset = self.log_start_offset;
        for segment in self.segments.values().filter(|s| s.next_offset > from) {
            let (producers, transactions) = (&mut self.producers, &mut self.transactions);
            segment.for_each_header(|h, position| {
                if h.base_offset < from {
                    return Ok(());
                }
                let marker = if h.is_control() && h.size() <= 1 << 16 {
                    let mut bytes = vec![0; h.size()];
                    std::os::unix::fs::FileExt::read_exact_at(
                        &*segment.file,
                        &mut bytes,
                        position,
                    )?;
                    marker_of(&bytes)
                } else {
                    None
                };
                transactions.apply(producers.record(h, marker), log_start_offset);
                Ok(())
            })?;
        }
        self.transactions.remove_before(self.log_start_offset);
        if from == Offset::MIN {
            // Read from the start: the index files can be written now, so the next start
            // need not read everything again.
            for s in self.segments.values() {
                write_synced(
                    &self.dir.join(segment::file_name(s.base_offset, "txnindex")),
                    &self.transactions.encode_index(s.base_offset..s.next_offset),
                )?;
            }
        }
        Ok(())
    }

    /// Saves the aborted-transaction index of the active segment, as it stands.
    fn save_transaction_index(&self) -> io::Result<()> {
        let active = self.active();
        write_synced(
            &self
                .dir
                .join(segment::file_name(active.base_offset, "txnindex")),
            &self
                .transactions
                .encode_index(active.base_offset..active.next_offset),
        )
    }

    /// Saves the producers' state as of the log's end, keeping the two newest snapshots.
    fn save_producers(&self) -> io::Result<()> {
        let end = self.next_offset();
        write_synced(
            &self.dir.join(segment::file_name(end, "snapshot")),
            &self.producers.encode_snapshot(),
        )?;
        let mut older: Vec<Offset> = fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_string_lossy()
                    .strip_suffix(".snapshot")?
                    .parse()
                    .ok()
            })
            .filter(|&offset: &Offset| offset < end)
            .collect();
        older.sort_unstable();
        for offset in older.iter().rev().skip(1) {
            fs::remove_file(self.dir.join(segment::file_name(*offset, "snapshot")))?;
        }
        Ok(())
    }

    /// Checks the batches of idempotent producers against what the partition has seen. A
    /// request that is one batch written before gets that batch's offsets back (and nothing is
    /// written); a gap in sequence numbers or an old epoch is refused.
    fn check_producers(&self, origin: Origin<'_>) -> Result<Option<AppendInfo>, StorageError> {
        let mut in_this_request: Vec<(i64, i32)> = Vec::new();
        for header in self.headers.iter().filter(|h| h.producer_id >= 0) {
            let producer_id = header.producer_id;
            let from_coordinator = !matches!(origin, Origin::Client { .. });
            if header.is_control() || (header.base_sequence < 0 && from_coordinator) {
                // A coordinator's batch: only its epoch is checked.
                let current = self
                    .producers
                    .epoch(producer_id)
                    .unwrap_or(header.producer_epoch);
                if header.producer_epoch < current {
                    return Err(StorageError::InvalidProducerEpoch {
                        producer_id,
                        got: header.producer_epoch,
                        current,
                    });
                }
                continue;
            }
            let previous = in_this_request
                .iter()
                .find(|(p, _)| *p == producer_id)
                .map(|&(_, s)| s);
            let check = match previous {
                Some(last) if header.base_sequence == last.wrapping_add(1).max(0) => {
                    SequenceCheck::Append
                }
                Some(last) => SequenceCheck::OutOfOrder {
                    expected: last.wrapping_add(1).max(0),
                },
                None => self.producers.check(header),
            };
            match check {
                SequenceCheck::Append => {
                    in_this_request.push((producer_id, header.last_sequence()))
                }
                SequenceCheck::Duplicate {
                    base_offset,
                    last_offset,
                } if self.headers.len() == 1 => {
                    return Ok(Some(AppendInfo {
                        base_offset,
                        last_offset,
                        log_append_time: -1,
                        log_start_offset: self.log_start_offset,
                    }));
                }
                SequenceCheck::Duplicate { .. } => {
                    return Err(StorageError::DuplicateSequence { producer_id })
                }
                SequenceCheck::StaleEpoch { current } => {
                    return Err(StorageError::InvalidProducerEpoch {
                        producer_id,
                        got: header.producer_epoch,
                        current,
                    })
                }
                SequenceCheck::OutOfOrder { expected } => {
                    return Err(StorageError::OutOfOrderSequence {
                        producer_id,
                        got: header.base_sequence,
                        expected,
                    })
                }
            }
        }
        Ok(None)
    }

    fn should_roll(&self, incoming: u64, now_ms: i64) -> bool {
        let active = self.active();
        if active.size == 0 {
            return false;
        }
        active.size + incoming > self.config.segment_bytes
            || now_ms - active.created_ms >= self.config.segment_ms
            || active.next_offset - active.base_offset > segment::MAX_RELATIVE_OFFSET / 2
    }

    /// Closes the active segment (fsynced, indexes written) and opens a new one. Returns the
    /// offset up to which the log is now durable.
    pub(crate) fn roll(&mut self, now_ms: i64) -> io::Result<Offset> {
        let next = self.next_offset();
        self.faults.before_fsync()?;
        self.active().close_for_appends()?;
        self.save_transaction_index()?;
        self.save_producers()?;
        let segment = Segment::create(&self.dir, next, self.config.index_interval_bytes, now_ms)?;
        sync_dir(&self.dir)?;
        self.segments.insert(next, segment);
        Ok(next)
    }

    /// Where to read from to find `offset`, reading no further than `upper_bound` (the high
    /// watermark or the last stable offset). `None` when there is nothing to read yet.
    pub(crate) fn plan_read(
        &self,
        offset: Offset,
        upper_bound: Offset,
    ) -> Result<Option<ReadPlan>, StorageError> {
        if offset < self.log_start_offset || offset > self.next_offset() {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.next_offset(),
            });
        }
        if offset >= upper_bound {
            return Ok(None);
        }
        // The segment holding `offset`, or the first after it if `offset` fell in a gap.
        let segment = self
            .segments
            .range(..=offset)
            .next_back()
            .map(|(_, s)| s)
            .filter(|s| offset < s.next_offset)
            .or_else(|| self.segments.range(offset + 1..).map(|(_, s)| s).next());
        Ok(segment.map(|s| ReadPlan {
            file: Arc::clone(&s.file),
            start_position: s.position_for(offset),
            end_position: s.size,
            offset,
            upper_bound,
        }))
    }

    /// Where to look for the first record at or after `timestamp`: the first segment whose
    /// newest record is that recent, from the position its time index gives.
    pub(crate) fn plan_timestamp_search(
        &self,
        timestamp: Timestamp,
        upper_bound: Offset,
    ) -> Option<ReadPlan> {
        let segment = self
            .segments
            .values()
            .find(|s| s.max_timestamp >= timestamp && s.next_offset > self.log_start_offset)?;
        Some(ReadPlan {
            file: Arc::clone(&segment.file),
            start_position: segment.position_for_timestamp(timestamp),
            end_position: segment.size,
            offset: self.log_start_offset.max(segment.base_offset),
            upper_bound,
        })
    }

    /// The closed segments, oldest first, with (base offset, next offset, size, max timestamp,
    /// creation time): what retention decides on.
    pub(crate) fn closed_segments(
        &self,
    ) -> impl Iterator<Item = (Offset, Offset, u64, Timestamp)> + '_ {
        let active = self.active().base_offset;
        self.segments
            .values()
            .filter(move |s| s.base_offset != active)
            .map(|s| (s.base_offset, s.next_offset, s.size, s.max_timestamp))
    }

    /// Deletes the closed segments before `base_offset` and moves the log start offset to it.
    pub(crate) fn delete_segments_before(&mut self, base_offset: Offset) -> io::Result<usize> {
        let active = self.active().base_offset;
        let doomed: Vec<Offset> = self
            .segments
            .range(..base_offset.min(active))
            .map(|(&b, _)| b)
            .collect();
        if doomed.is_empty() {
            return Ok(0);
        }
        let new_start = self
            .segments
            .range(base_offset.min(active)..)
            .next()
            .map(|(&b, _)| b)
            .unwrap_or(active);
        // Persist the new start first: a crash in between leaves segments that are below it,
        // which the next open deletes or ignores, never a start that points at deleted data.
        self.set_log_start_offset(new_start.max(self.log_start_offset))?;
        for base in &doomed {
            if let Some(segment) = self.segments.remove(base) {
                segment.delete_files()?;
            }
        }
        self.producers.remove_before(self.log_start_offset);
        self.transactions.remove_before(self.log_start_offset);
        Ok(doomed.len())
    }

    fn set_log_start_offset(&mut self, offset: Offset) -> io::Result<()> {
        write_synced(
            &self.dir.join(LOG_START_OFFSET_FILE),
            offset.to_string().as_bytes(),
        )?;
        self.log_start_offset = offset;
        Ok(())
    }

    /// Writes the active segment's indexes, syncs it and saves the producers' state, for a
    /// clean shutdown.
    pub(crate) fn close(&self) -> io::Result<()> {
        self.active().close_for_appends()?;
        self.save_transaction_index()?;
        self.save_producers()
    }

    /// The closed segments wholly below `last_stable_offset`, for compaction: records of
    /// transactions still open are not compacted.
    pub(crate) fn segments_to_clean(&self, last_stable_offset: Offset) -> Vec<SegmentToClean> {
        let active = self.active().base_offset;
        self.segments
            .values()
            .filter(|s| s.base_offset != active && s.next_offset <= last_stable_offset)
            .map(|s| SegmentToClean {
                base_offset: s.base_offset,
                file: Arc::clone(&s.file),
                size: s.size,
                path: s.path().to_path_buf(),
            })
            .collect()
    }

    /// The base offset of the active segment.
    pub(crate) fn active_base_offset(&self) -> Offset {
        self.active().base_offset
    }

    /// Puts the compacted file `cleaned` in place of `segment`, if the segment is still there
    /// as it was planned (retention may have deleted it meanwhile). Returns whether it did.
    pub(crate) fn replace_segment(
        &mut self,
        segment: &SegmentToClean,
        cleaned: &Path,
        now_ms: i64,
    ) -> io::Result<bool> {
        let current = self.segments.get(&segment.base_offset);
        let unchanged = current.is_some_and(|s| s.size == segment.size)
            && segment.base_offset != self.active().base_offset;
        if !unchanged {
            fs::remove_file(cleaned)?;
            return Ok(false);
        }
        compaction::swap_in(cleaned, &segment.path)?;
        let (reopened, truncation) = Segment::open(
            &self.dir,
            segment.base_offset,
            self.config.index_interval_bytes,
            false,
            true,
            now_ms,
        )?;
        if let Some(t) = truncation {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a compacted segment does not read back: {}", t.reason),
            ));
        }
        reopened.close_for_appends()?;
        self.segments.insert(segment.base_offset, reopened);
        Ok(true)
    }

    /// The base offset of the first segment after the one holding `offset`.
    pub(crate) fn next_segment_base(&self, offset: Offset) -> Option<Offset> {
        self.segments.range(offset + 1..).next().map(|(&b, _)| b)
    }

    /// The last stable offset, given the high watermark. A transaction whose first records
    /// retention deleted holds it at the log start offset, as in Kafka.
    pub(crate) fn last_stable_offset(&mut self, high_watermark: Offset) -> Offset {
        self.transactions
            .last_stable_offset(high_watermark)
            .max(self.log_start_offset.min(high_watermark))
    }

    /// The aborted transactions with records in `range`.
    pub(crate) fn aborted_transactions(
        &self,
        range: std::ops::Range<Offset>,
    ) -> Vec<AbortedTransaction> {
        self.transactions.aborted_in(range)
    }

    /// Every aborted transaction, for compaction.
    pub(crate) fn all_aborted_transactions(&self) -> Vec<AbortedTransaction> {
        self.transactions.all_aborted()
    }

    /// Whether `producer_id` has a transaction open in this partition.
    #[cfg(test)]
    pub(crate) fn has_open_transaction(&self, producer_id: i64) -> bool {
        self.producers.has_open_transaction(producer_id)
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Makes a directory's entries (new or removed files) durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
