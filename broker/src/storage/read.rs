//! Reads of stored batches, done without the partition's lock: a [`ReadPlan`] names a
//! segment file and a starting position, taken under the lock; the file is append-only below
//! the plan's end, so reading it afterwards is safe even while appends continue, and a
//! deleted segment stays readable through the plan's handle.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::BytesMut;
use eddy_core::log::{Offset, Timestamp};
use eddy_core::wire::batch::{decode_records, BatchHeader, HEADER_LEN};

use super::segment::read_header_at;

/// Where to read one partition's batches from.
#[derive(Debug, Clone)]
pub(crate) struct ReadPlan {
    pub(crate) file: Arc<File>,
    /// An indexed batch start at or before the batch holding `offset`.
    pub(crate) start_position: u64,
    /// The segment's size when the plan was made.
    pub(crate) end_position: u64,
    /// The first offset wanted.
    pub(crate) offset: Offset,
    /// No batch reaching this offset is returned.
    pub(crate) upper_bound: Offset,
}

/// A range of a segment file holding whole batches, to be sent as it is.
#[derive(Debug, Clone)]
pub(crate) struct FileRange {
    /// The segment file (kept open: a deleted segment stays readable through it).
    pub file: Arc<File>,
    /// Where the first batch starts.
    pub position: u64,
    /// Bytes of whole batches from there.
    pub len: u64,
    /// The offset after the last record of the last batch.
    pub end_offset: Offset,
}

impl ReadPlan {
    /// The range of whole batches from the first one holding an offset at or after `offset`,
    /// up to `max_bytes` — but always the whole first batch, however large, so a consumer can
    /// make progress (KIP-74) — and all below the upper bound. Only batch headers are read.
    pub(crate) fn locate(&self, max_bytes: usize) -> io::Result<Option<FileRange>> {
        let Some((start, first)) = self.find_first_batch()? else {
            return Ok(None);
        };
        let mut end = start + first.size() as u64;
        let mut end_offset = first.next_offset();
        if end > self.end_position || first.last_offset() >= self.upper_bound {
            return Ok(None);
        }
        while end + HEADER_LEN as u64 <= self.end_position {
            let header = read_header_at(&self.file, end)?;
            let next_end = end + header.size() as u64;
            if next_end > self.end_position
                || next_end - start > max_bytes as u64
                || header.last_offset() >= self.upper_bound
            {
                break;
            }
            end = next_end;
            end_offset = header.next_offset();
        }
        Ok(Some(FileRange {
            file: Arc::clone(&self.file),
            position: start,
            len: end - start,
            end_offset,
        }))
    }

    /// The position and header of the first batch whose last offset is at or after `offset`
    /// and which starts below the upper bound.
    fn find_first_batch(&self) -> io::Result<Option<(u64, BatchHeader)>> {
        let mut position = self.start_position;
        while position + HEADER_LEN as u64 <= self.end_position {
            let header = read_header_at(&self.file, position)?;
            if header.base_offset >= self.upper_bound {
                return Ok(None);
            }
            if header.last_offset() >= self.offset {
                return Ok(Some((position, header)));
            }
            position += header.size() as u64;
        }
        Ok(None)
    }

    /// The first record at or after `timestamp` below the upper bound, scanning from the
    /// plan's position: its offset and timestamp.
    pub(crate) fn find_timestamp(
        &self,
        timestamp: Timestamp,
    ) -> io::Result<Option<(Offset, Timestamp)>> {
        let mut position = self.start_position;
        while position + HEADER_LEN as u64 <= self.end_position {
            let header = read_header_at(&self.file, position)?;
            if header.base_offset >= self.upper_bound {
                return Ok(None);
            }
            if header.max_timestamp >= timestamp
                && header.last_offset() >= self.offset
                && !header.is_control()
            {
                let mut bytes = BytesMut::zeroed(header.size());
                self.file.read_exact_at(&mut bytes, position)?;
                let (_, records) = decode_records(&bytes.freeze(), 64 << 20)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                if let Some(r) = records
                    .iter()
                    .find(|r| r.offset >= self.offset && r.record.timestamp >= timestamp)
                {
                    return Ok(Some((r.offset, r.record.timestamp)));
                }
            }
            position += header.size() as u64;
        }
        Ok(None)
    }
}
