//! One segment of a partition's log: a file of record batches stored exactly as producers
//! sent them (with the offsets the broker assigned), named by the offset of its first batch
//! (`00000000000000000000.log`), with its sparse indexes.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use eddy_core::log::{Offset, Timestamp};
use eddy_core::wire::batch::{self, BatchHeader, HEADER_LEN};

use super::index::{OffsetIndex, TimeIndex};

/// The largest offset a segment may hold relative to its base (the indexes store u32).
pub(crate) const MAX_RELATIVE_OFFSET: i64 = (u32::MAX / 2) as i64;

/// The header of the batch that starts at `position` of a segment file.
pub(crate) fn read_header_at(file: &File, position: u64) -> io::Result<BatchHeader> {
    let mut bytes = [0u8; HEADER_LEN];
    file.read_exact_at(&mut bytes, position)?;
    BatchHeader::parse(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The file name of the segment whose first offset is `base_offset`, with `extension`.
pub(crate) fn file_name(base_offset: Offset, extension: &str) -> String {
    format!("{base_offset:020}.{extension}")
}

/// The base offset named by a segment log file's name, if it is one.
pub(crate) fn parse_file_name(name: &str) -> Option<Offset> {
    let digits = name.strip_suffix(".log")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// A segment file with what is known about its contents.
#[derive(Debug)]
pub(crate) struct Segment {
    /// Offset of the first batch (or of where it will go, while empty).
    pub(crate) base_offset: Offset,
    pub(crate) file: Arc<File>,
    path: PathBuf,
    /// Bytes of whole batches in the file.
    pub(crate) size: u64,
    /// The offset after the last batch.
    pub(crate) next_offset: Offset,
    /// The largest batch timestamp, -1 while there is none.
    pub(crate) max_timestamp: Timestamp,
    /// Wall-clock time the segment was opened for appends, for `segment.ms`.
    pub(crate) created_ms: i64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    bytes_since_index: u64,
    index_interval: u64,
}

/// What a recovery scan found wrong at the end of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Truncation {
    /// Where the valid data ends.
    pub(crate) position: u64,
    /// Bytes dropped after it.
    pub(crate) dropped: u64,
    /// Why the first dropped byte was not a valid batch.
    pub(crate) reason: String,
}

impl Segment {
    /// A new, empty segment file in `dir`.
    pub(crate) fn create(
        dir: &Path,
        base_offset: Offset,
        index_interval: u64,
        now_ms: i64,
    ) -> io::Result<Self> {
        let path = dir.join(file_name(base_offset, "log"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        Ok(Self::unread(
            base_offset,
            file,
            path,
            index_interval,
            now_ms,
        ))
    }

    /// A segment over `file` of which nothing is known yet.
    fn unread(
        base_offset: Offset,
        file: File,
        path: PathBuf,
        index_interval: u64,
        now_ms: i64,
    ) -> Self {
        Self {
            base_offset,
            file: Arc::new(file),
            path,
            size: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            created_ms: now_ms,
            offset_index: OffsetIndex::default(),
            time_index: TimeIndex::default(),
            bytes_since_index: 0,
            index_interval,
        }
    }

    /// Opens an existing segment. With `verify`, every batch is checked (length, magic, CRC,
    /// offsets following on from `base_offset`) and the file is truncated at the first bad
    /// byte; without it, saved indexes are trusted when they are well formed and only batch
    /// headers are read to rebuild them otherwise. Offsets must be contiguous unless
    /// `allow_gaps` (a compacted log).
    pub(crate) fn open(
        dir: &Path,
        base_offset: Offset,
        index_interval: u64,
        verify: bool,
        allow_gaps: bool,
        now_ms: i64,
    ) -> io::Result<(Self, Option<Truncation>)> {
        let path = dir.join(file_name(base_offset, "log"));
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        let file_size = file.metadata()?.len();
        let mut segment = Self::unread(base_offset, file, path, index_interval, now_ms);
        if !verify {
            if let Some(()) = segment.load_saved_indexes(file_size) {
                return Ok((segment, None));
            }
        }
        let truncation = segment.scan(file_size, verify, allow_gaps)?;
        if let Some(t) = &truncation {
            segment.file.set_len(t.position)?;
            segment.file.sync_all()?;
        }
        Ok((segment, truncation))
    }

    /// Uses the saved indexes of a closed segment and reads only its last batch header.
    fn load_saved_indexes(&mut self, file_size: u64) -> Option<()> {
        let offsets = OffsetIndex::load(&self.sibling("index"), file_size)?;
        let last_position = offsets.position_at_or_before(u32::MAX);
        // Walk the headers after the last indexed batch to find the end.
        let mut position = u64::from(last_position);
        let mut next = self.base_offset;
        while position < file_size {
            let header = read_header_at(&self.file, position).ok()?;
            if position + header.size() as u64 > file_size {
                return None;
            }
            position += header.size() as u64;
            next = header.next_offset();
        }
        if position != file_size || (file_size > 0 && offsets.len() == 0) {
            return None;
        }
        let span = next - self.base_offset;
        let times = TimeIndex::load(&self.sibling("timeindex"), span.max(1))?;
        self.max_timestamp = times.max().unwrap_or(-1);
        self.size = file_size;
        self.next_offset = next;
        self.offset_index = offsets;
        self.time_index = times;
        Some(())
    }

    /// Reads the file from the start, rebuilding the indexes, and reports where it stops
    /// being a sequence of valid batches.
    fn scan(
        &mut self,
        file_size: u64,
        verify: bool,
        allow_gaps: bool,
    ) -> io::Result<Option<Truncation>> {
        let mut reader = io::BufReader::with_capacity(1 << 20, self.file.try_clone()?);
        let mut position = 0u64;
        let mut expected = self.base_offset;
        let mut buf = Vec::new();
        let stop = loop {
            if position == file_size {
                break None;
            }
            let mut header_bytes = [0u8; HEADER_LEN];
            if file_size - position < HEADER_LEN as u64 {
                break Some("a partial batch header".to_string());
            }
            reader.read_exact(&mut header_bytes)?;
            let header = match BatchHeader::parse(&header_bytes) {
                Ok(h) => h,
                Err(e) => break Some(e.to_string()),
            };
            let size = header.size() as u64;
            if size > file_size - position {
                break Some(format!(
                    "a batch of {size} bytes with {} bytes left",
                    file_size - position
                ));
            }
            // The base offset is outside the CRC: check it against what must come next.
            let in_range = header.last_offset() - self.base_offset <= MAX_RELATIVE_OFFSET;
            let follows = if allow_gaps {
                header.base_offset >= expected
            } else {
                header.base_offset == expected
            };
            if !(follows && in_range) {
                break Some(format!(
                    "a batch at offset {} where offset {expected} was due",
                    header.base_offset
                ));
            }
            buf.clear();
            buf.extend_from_slice(&header_bytes);
            buf.resize(size as usize, 0);
            reader.read_exact(&mut buf[HEADER_LEN..])?;
            if verify {
                if let Err(e) = batch::validate(&buf) {
                    break Some(e.to_string());
                }
            }
            self.index_batch(&header, position);
            position += size;
            expected = header.next_offset();
        };
        self.size = position;
        self.next_offset = expected;
        Ok(stop.map(|reason| Truncation {
            position,
            dropped: file_size - position,
            reason,
        }))
    }

    fn index_batch(&mut self, header: &BatchHeader, position: u64) {
        let relative = (header.base_offset - self.base_offset) as u32;
        if self.offset_index.len() == 0 || self.bytes_since_index >= self.index_interval {
            self.offset_index.push(relative, position as u32);
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += header.size() as u64;
        self.time_index.push(header.max_timestamp, relative);
        self.max_timestamp = self.max_timestamp.max(header.max_timestamp);
    }

    /// Appends whole batches that already carry their offsets; `headers` describes them in
    /// order. The bytes reach the page cache; durability is the caller's business.
    pub(crate) fn append(&mut self, bytes: &[u8], headers: &[BatchHeader]) -> io::Result<()> {
        self.file.write_all_at(bytes, self.size)?;
        let mut position = self.size;
        for header in headers {
            self.index_batch(header, position);
            position += header.size() as u64;
        }
        self.size = position;
        if let Some(last) = headers.last() {
            self.next_offset = last.next_offset();
        }
        Ok(())
    }

    /// Calls `f` with the header and position of every batch of the segment, in order,
    /// reading only the headers.
    pub(crate) fn for_each_header(
        &self,
        mut f: impl FnMut(&BatchHeader, u64) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut position = 0u64;
        while position + HEADER_LEN as u64 <= self.size {
            let header = read_header_at(&self.file, position)?;
            f(&header, position)?;
            position += header.size() as u64;
        }
        Ok(())
    }

    /// Where to start looking for `offset`: the position of an indexed batch at or before it.
    pub(crate) fn position_for(&self, offset: Offset) -> u64 {
        let relative = (offset - self.base_offset).clamp(0, u32::MAX as i64) as u32;
        u64::from(self.offset_index.position_at_or_before(relative))
    }

    /// Where to start looking for the first record with a timestamp at or after `timestamp`.
    pub(crate) fn position_for_timestamp(&self, timestamp: Timestamp) -> u64 {
        let relative = self.time_index.offset_before(timestamp);
        u64::from(self.offset_index.position_at_or_before(relative))
    }

    /// Writes the indexes beside the segment and makes file and indexes durable: the segment
    /// takes no more appends.
    pub(crate) fn close_for_appends(&self) -> io::Result<()> {
        self.file.sync_data()?;
        self.offset_index.save(&self.sibling("index"))?;
        self.time_index.save(&self.sibling("timeindex"))
    }

    /// Removes the segment's files. Readers holding its file keep reading it until they drop it.
    pub(crate) fn delete_files(&self) -> io::Result<()> {
        for extension in ["index", "timeindex", "txnindex"] {
            match fs::remove_file(self.sibling(extension)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        fs::remove_file(&self.path)
    }

    /// The segment's log file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn sibling(&self, extension: &str) -> PathBuf {
        self.path.with_extension(extension)
    }

    /// Truncates the in-memory indexes to match a file cut at `position` (used after a
    /// failed append).
    pub(crate) fn truncate_to(&mut self, position: u64, next_offset: Offset) -> io::Result<()> {
        self.file.set_len(position)?;
        self.offset_index.truncate_to_position(position as u32);
        self.time_index
            .truncate_to_offset((next_offset - self.base_offset) as u32);
        self.size = position;
        self.next_offset = next_offset;
        Ok(())
    }
}
