//! Reads of stored batches, done without the partition's lock: a [`ReadPlan`] names a
//! segment file and a starting position, taken under the lock; the file is append-only below
//! the plan's end, so reading it afterwards is safe even while appends continue, and a
//! deleted segment stays readable through the plan's handle.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use eddy_core::log::{Offset, Timestamp};
use eddy_core::wire::batch::{decode_records, BatchHeader, HEADER_LEN};

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

/// Batches read from a segment.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReadBatches {
    /// Whole batches: the first holds `offset` (or is the first after it), the last ends
    /// below the upper bound. Empty if the segment has nothing at or after `offset`.
    pub(crate) bytes: Bytes,
}

impl ReadPlan {
    /// Reads whole batches from the first one holding an offset at or after `offset`, up to
    /// `max_bytes` — but always the whole first batch, however large, so a consumer can make
    /// progress (KIP-74).
    pub(crate) fn read(&self, max_bytes: usize) -> io::Result<ReadBatches> {
        let Some((position, first)) = self.find_first_batch()? else {
            return Ok(ReadBatches::default());
        };
        let available = (self.end_position - position) as usize;
        let len = available.min(max_bytes.max(first.size()));
        let mut buf = BytesMut::zeroed(len);
        self.file.read_exact_at(&mut buf, position)?;
        // Keep the whole batches below the upper bound.
        let mut keep = 0;
        while keep + HEADER_LEN <= buf.len() {
            let Ok(header) = BatchHeader::parse(&buf[keep..]) else {
                break;
            };
            if keep + header.size() > buf.len() || header.last_offset() >= self.upper_bound {
                break;
            }
            keep += header.size();
        }
        buf.truncate(keep);
        Ok(ReadBatches {
            bytes: buf.freeze(),
        })
    }

    /// The position and header of the first batch whose last offset is at or after `offset`
    /// and which starts below the upper bound.
    fn find_first_batch(&self) -> io::Result<Option<(u64, BatchHeader)>> {
        let mut position = self.start_position;
        let mut header_bytes = [0u8; HEADER_LEN];
        while position + HEADER_LEN as u64 <= self.end_position {
            self.file.read_exact_at(&mut header_bytes, position)?;
            let header = BatchHeader::parse(&header_bytes)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
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
        let mut header_bytes = [0u8; HEADER_LEN];
        while position + HEADER_LEN as u64 <= self.end_position {
            self.file.read_exact_at(&mut header_bytes, position)?;
            let header = BatchHeader::parse(&header_bytes)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
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
