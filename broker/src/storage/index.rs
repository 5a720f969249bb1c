//! The sparse indexes of a segment: an offset index mapping offsets to file positions and a
//! time index mapping timestamps to offsets. Both hold one entry per `index.interval.bytes` of
//! log, pointing at the start of a batch, and live in memory; a closed segment's indexes are
//! also written beside it (`.index`, `.timeindex`) so a restart need not rescan it.

use std::fs;
use std::io::Write;
use std::path::Path;

use eddy_core::log::{Offset, Timestamp};

/// Offsets → positions of batches in the segment file, in increasing order of both.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct OffsetIndex {
    /// (offset relative to the segment's base offset, byte position of a batch starting there).
    entries: Vec<(u32, u32)>,
}

impl OffsetIndex {
    /// Notes that the batch starting at `relative_offset` begins at byte `position`.
    pub(crate) fn push(&mut self, relative_offset: u32, position: u32) {
        debug_assert!(self
            .entries
            .last()
            .is_none_or(|&(o, p)| o < relative_offset && p < position));
        self.entries.push((relative_offset, position));
    }

    /// The position of the last indexed batch starting at or before `relative_offset`, or 0.
    pub(crate) fn position_at_or_before(&self, relative_offset: u32) -> u32 {
        let i = self.entries.partition_point(|&(o, _)| o <= relative_offset);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].1
        }
    }

    /// Drops the entries at or after `position` (the log was truncated there).
    pub(crate) fn truncate_to_position(&mut self, position: u32) {
        let keep = self.entries.partition_point(|&(_, p)| p < position);
        self.entries.truncate(keep);
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * 8);
        for &(o, p) in &self.entries {
            out.extend_from_slice(&o.to_be_bytes());
            out.extend_from_slice(&p.to_be_bytes());
        }
        out
    }

    /// Reads an index file; `None` if it is missing or malformed (the caller rebuilds it).
    pub(crate) fn load(path: &Path, segment_size: u64) -> Option<Self> {
        let bytes = fs::read(path).ok()?;
        if bytes.len() % 8 != 0 {
            return None;
        }
        let mut index = Self::default();
        for chunk in bytes.chunks_exact(8) {
            let o = u32::from_be_bytes(chunk[..4].try_into().unwrap());
            let p = u32::from_be_bytes(chunk[4..].try_into().unwrap());
            let ordered = index
                .entries
                .last()
                .is_none_or(|&(lo, lp)| lo < o && lp < p);
            if !ordered || u64::from(p) >= segment_size {
                return None;
            }
            index.entries.push((o, p));
        }
        Some(index)
    }

    pub(crate) fn save(&self, path: &Path) -> std::io::Result<()> {
        write_synced(path, &self.encode())
    }
}

/// Timestamps → offsets: an entry whenever a batch raises the segment's largest timestamp.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct TimeIndex {
    /// (largest timestamp so far, offset relative to the base of a batch that has it).
    entries: Vec<(Timestamp, u32)>,
}

impl TimeIndex {
    /// Notes that the batch starting at `relative_offset` has `max_timestamp`, if it is larger
    /// than every timestamp before it.
    pub(crate) fn push(&mut self, max_timestamp: Timestamp, relative_offset: u32) {
        if self.entries.last().is_none_or(|&(t, _)| max_timestamp > t) {
            self.entries.push((max_timestamp, relative_offset));
        }
    }

    /// The relative offset of the last entry whose timestamp is below `timestamp`: records at
    /// or after `timestamp` can only be at or after it. 0 if there is none.
    pub(crate) fn offset_before(&self, timestamp: Timestamp) -> u32 {
        let i = self.entries.partition_point(|&(t, _)| t < timestamp);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].1
        }
    }

    /// The largest timestamp indexed, which is the segment's largest.
    pub(crate) fn max(&self) -> Option<Timestamp> {
        self.entries.last().map(|&(t, _)| t)
    }

    /// Drops the entries at or after `relative_offset`.
    pub(crate) fn truncate_to_offset(&mut self, relative_offset: u32) {
        let keep = self.entries.partition_point(|&(_, o)| o < relative_offset);
        self.entries.truncate(keep);
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * 12);
        for &(t, o) in &self.entries {
            out.extend_from_slice(&t.to_be_bytes());
            out.extend_from_slice(&o.to_be_bytes());
        }
        out
    }

    /// Reads a time index file; `None` if it is missing or malformed.
    pub(crate) fn load(path: &Path, segment_span: Offset) -> Option<Self> {
        let bytes = fs::read(path).ok()?;
        if bytes.len() % 12 != 0 {
            return None;
        }
        let mut index = Self::default();
        for chunk in bytes.chunks_exact(12) {
            let t = i64::from_be_bytes(chunk[..8].try_into().unwrap());
            let o = u32::from_be_bytes(chunk[8..].try_into().unwrap());
            let ordered = index
                .entries
                .last()
                .is_none_or(|&(lt, lo)| lt < t && lo <= o);
            if !ordered || i64::from(o) >= segment_span {
                return None;
            }
            index.entries.push((t, o));
        }
        Some(index)
    }

    pub(crate) fn save(&self, path: &Path) -> std::io::Result<()> {
        write_synced(path, &self.encode())
    }
}

/// Writes a file through a temporary name and renames it into place once it is on disk, so
/// a crash leaves either the old file or the new one.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let mut file = fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_data()?;
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_lookup_finds_the_last_entry_at_or_before() {
        let mut index = OffsetIndex::default();
        index.push(0, 0);
        index.push(10, 4096);
        index.push(25, 9000);
        assert_eq!(index.position_at_or_before(0), 0);
        assert_eq!(index.position_at_or_before(9), 0);
        assert_eq!(index.position_at_or_before(10), 4096);
        assert_eq!(index.position_at_or_before(24), 4096);
        assert_eq!(index.position_at_or_before(1000), 9000);
        index.truncate_to_position(9000);
        assert_eq!(index.position_at_or_before(1000), 4096);
    }

    #[test]
    fn time_lookup_never_skips_a_record_at_or_after_the_target() {
        let mut index = TimeIndex::default();
        index.push(100, 0);
        index.push(90, 5); // not larger: no entry
        index.push(200, 10);
        index.push(300, 20);
        assert_eq!(index.entries.len(), 3);
        assert_eq!(index.offset_before(50), 0);
        assert_eq!(index.offset_before(100), 0);
        assert_eq!(index.offset_before(150), 0);
        assert_eq!(index.offset_before(201), 10);
        assert_eq!(index.offset_before(10_000), 20);
    }

    #[test]
    fn index_files_round_trip_and_bad_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = OffsetIndex::default();
        index.push(0, 0);
        index.push(7, 5000);
        let path = dir.path().join("0.index");
        index.save(&path).unwrap();
        assert_eq!(OffsetIndex::load(&path, 6000), Some(index.clone()));
        assert_eq!(
            OffsetIndex::load(&path, 5000),
            None,
            "a position past the segment"
        );
        fs::write(&path, [0u8; 7]).unwrap();
        assert_eq!(OffsetIndex::load(&path, 6000), None, "a torn entry");

        let mut times = TimeIndex::default();
        times.push(5, 0);
        times.push(9, 3);
        let path = dir.path().join("0.timeindex");
        times.save(&path).unwrap();
        assert_eq!(TimeIndex::load(&path, 10), Some(times));
        assert_eq!(TimeIndex::load(&path, 3), None);
    }
}
