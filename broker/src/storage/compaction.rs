//! Compaction (`cleanup.policy=compact`): the closed segments are rewritten to keep only the
//! latest record of each key among them. Offsets never change: a batch that keeps some of its
//! records keeps its base offset, its offset span and its producer fields. Tombstones (null
//! values) that are the latest of their key go once their timestamp is older than
//! `delete.retention.ms`. The active segment is never touched, and control batches are kept.
//! Records of aborted transactions are removed and never count as the latest of their key;
//! segments holding records of a transaction still open are not compacted at all.
//!
//! A segment is rewritten to `<base>.log.cleaned`, fsynced, and renamed over the original
//! after its index files are removed, so a crash leaves either the old segment or the new
//! one, and stale indexes never describe the new file. Readers still holding the old file keep
//! reading it.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use eddy_core::log::{Offset, Timestamp};
use eddy_core::wire::batch::{decode_records, BatchBuilder, BatchHeader, HEADER_LEN};

use super::segment::read_header_at;
use super::transactions::AbortedTransaction;
use super::StorageError;

/// The largest a batch may grow when decompressed during compaction.
const DECOMPRESSED_LIMIT: usize = 256 << 20;

/// A closed segment to compact, as planned under the partition's lock.
#[derive(Debug, Clone)]
pub(crate) struct SegmentToClean {
    pub(crate) base_offset: Offset,
    pub(crate) file: Arc<File>,
    pub(crate) size: u64,
    pub(crate) path: PathBuf,
}

/// What a compaction pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CompactionStats {
    /// Segments rewritten.
    pub segments_rewritten: usize,
    /// Records removed.
    pub records_removed: usize,
    /// Bytes the rewritten segments shrank by.
    pub bytes_freed: u64,
}

/// The aborted transactions of a partition, by producer.
#[derive(Debug, Default)]
pub(crate) struct AbortedRanges(HashMap<i64, Vec<(Offset, Offset)>>);

impl AbortedRanges {
    pub(crate) fn new(aborted: &[AbortedTransaction]) -> Self {
        let mut ranges: HashMap<i64, Vec<(Offset, Offset)>> = HashMap::new();
        for a in aborted {
            ranges
                .entry(a.producer_id)
                .or_default()
                .push((a.first_offset, a.last_offset));
        }
        Self(ranges)
    }

    /// Whether `batch` holds records of an aborted transaction.
    fn holds_aborted(&self, batch: &BatchHeader) -> bool {
        batch.is_transactional()
            && !batch.is_control()
            && self.0.get(&batch.producer_id).is_some_and(|ranges| {
                ranges
                    .iter()
                    .any(|&(first, last)| (first..=last).contains(&batch.base_offset))
            })
    }
}

/// Reads the batches of a segment in order, a chunk at a time.
fn for_each_batch(
    segment: &SegmentToClean,
    mut f: impl FnMut(BatchHeader, Bytes) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    let mut position = 0u64;
    while position + HEADER_LEN as u64 <= segment.size {
        let header = read_header_at(&segment.file, position)?;
        let mut bytes = BytesMut::zeroed(header.size());
        segment.file.read_exact_at(&mut bytes, position)?;
        position += header.size() as u64;
        f(header, bytes.freeze())?;
    }
    Ok(())
}

/// The offset of the latest record of each key in `segments`.
pub(crate) fn latest_offsets(
    segments: &[SegmentToClean],
    aborted: &AbortedRanges,
) -> Result<HashMap<Vec<u8>, Offset>, StorageError> {
    let mut latest = HashMap::new();
    for segment in segments {
        for_each_batch(segment, |header, bytes| {
            if header.is_control() || aborted.holds_aborted(&header) {
                return Ok(());
            }
            let (_, records) = decode_records(&bytes, DECOMPRESSED_LIMIT)?;
            for r in records {
                if let Some(key) = r.record.key {
                    latest.insert(key.to_vec(), r.offset);
                }
            }
            Ok(())
        })?;
    }
    Ok(latest)
}

/// Writes the compacted form of `segment` beside it, if compaction removes anything from it.
/// Returns the cleaned file's path and what was removed.
pub(crate) fn rewrite(
    segment: &SegmentToClean,
    latest: &HashMap<Vec<u8>, Offset>,
    aborted: &AbortedRanges,
    tombstones_before: Timestamp,
) -> Result<Option<(PathBuf, CompactionStats)>, StorageError> {
    let mut out = Vec::with_capacity(segment.size as usize / 2);
    let mut removed = 0usize;
    for_each_batch(segment, |header, bytes| {
        if header.is_control() {
            out.extend_from_slice(&bytes);
            return Ok(());
        }
        if aborted.holds_aborted(&header) {
            removed += header.record_count.max(0) as usize;
            return Ok(());
        }
        let (_, records) = decode_records(&bytes, DECOMPRESSED_LIMIT)?;
        let keep =
            |offset: Offset, key: &Option<Bytes>, value: &Option<Bytes>, ts: Timestamp| match key {
                None => true,
                Some(k) => {
                    latest.get(k.as_ref()) == Some(&offset)
                        && (value.is_some() || ts >= tombstones_before)
                }
            };
        let kept: Vec<_> = records
            .iter()
            .filter(|r| keep(r.offset, &r.record.key, &r.record.value, r.record.timestamp))
            .collect();
        removed += records.len() - kept.len();
        if kept.len() == records.len() {
            out.extend_from_slice(&bytes);
        } else if !kept.is_empty() {
            let mut builder = BatchBuilder::retaining(&header, header.compression()?);
            for r in kept {
                builder.append_at((r.offset - header.base_offset) as i32, &r.record);
            }
            out.extend_from_slice(&builder.build(header.base_offset)?);
        }
        Ok(())
    })?;
    if removed == 0 {
        return Ok(None);
    }
    let cleaned = segment.path.with_extension("log.cleaned");
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&cleaned)?;
    file.write_all(&out)?;
    file.sync_data()?;
    Ok(Some((
        cleaned,
        CompactionStats {
            segments_rewritten: 1,
            records_removed: removed,
            bytes_freed: segment.size - out.len() as u64,
        },
    )))
}

/// Puts a cleaned file in place of its segment's log: indexes first removed, then the rename.
pub(crate) fn swap_in(cleaned: &Path, segment_path: &Path) -> io::Result<()> {
    for extension in ["index", "timeindex"] {
        match fs::remove_file(segment_path.with_extension(extension)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    fs::rename(cleaned, segment_path)?;
    if let Some(dir) = segment_path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}
