//! RecordBatch v2 (magic 2): the unit in which records are produced, stored and fetched.
//!
//! ```text
//! base_offset: i64 | batch_length: i32 | partition_leader_epoch: i32 | magic: i8 (2)
//! crc: u32 (CRC-32C of everything from attributes to the end)
//! attributes: i16 | last_offset_delta: i32 | base_timestamp: i64 | max_timestamp: i64
//! producer_id: i64 | producer_epoch: i16 | base_sequence: i32 | record_count: i32
//! records (compressed as a whole if the attributes say so), each:
//!   length: varint | attributes: i8 | timestamp_delta: varlong | offset_delta: varint
//!   key_length: varint, key | value_length: varint, value | header_count: varint,
//!   headers: (key_length: varint, key, value_length: varint, value)*
//! ```
//!
//! The broker stores batches exactly as producers send them and only rewrites
//! `base_offset`, which the CRC does not cover: [`validate`] checks a batch's header and CRC,
//! [`check_records`] its records, without copying them.

mod check;

use bytes::Bytes;

pub use check::{check_records, CheckedRecord};

use super::compression::Compression;
use super::varint::{
    read_varint, read_varlong, varint_len, varlong_len, write_varint, write_varlong,
};
use super::WireError;
use crate::log::{Header, Offset, Record, Timestamp};

/// Bytes of `base_offset` and `batch_length`, which precede what `batch_length` counts.
pub const LOG_OVERHEAD: usize = 12;
/// Bytes of the batch header, up to and including the record count.
pub const HEADER_LEN: usize = 61;
/// The only record format eddy reads and writes.
pub const MAGIC: i8 = 2;

const CRC_START: usize = 21;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;
const DELETE_HORIZON_BIT: i16 = 0x40;
/// The smallest record: length, attributes, deltas, key and value lengths and header count.
const MIN_RECORD_LEN: usize = 7;

/// The fixed header of a record batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: Offset,
    /// Bytes after this field, to the end of the batch.
    pub batch_length: i32,
    /// Set by the leader that wrote the batch.
    pub partition_leader_epoch: i32,
    /// The record format, always [`MAGIC`].
    pub magic: i8,
    /// CRC-32C from the attributes to the end.
    pub crc: u32,
    /// Compression, timestamp type, transactional and control bits.
    pub attributes: i16,
    /// Offset of the last record, relative to `base_offset`.
    pub last_offset_delta: i32,
    /// Timestamp of the first record (records store deltas from it).
    pub base_timestamp: Timestamp,
    /// The largest timestamp in the batch.
    pub max_timestamp: Timestamp,
    /// The idempotent or transactional producer's id, or -1.
    pub producer_id: i64,
    /// The producer's epoch, or -1.
    pub producer_epoch: i16,
    /// Sequence number of the first record, or -1.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub record_count: i32,
}

impl BatchHeader {
    /// Reads the header at the front of `bytes` and checks the magic and the batch length.
    pub fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        if bytes.len() < HEADER_LEN {
            return Err(WireError::Truncated("record batch header"));
        }
        let i64_at = |at: usize| i64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
        let i32_at = |at: usize| i32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
        let i16_at = |at: usize| i16::from_be_bytes(bytes[at..at + 2].try_into().unwrap());
        let header = Self {
            base_offset: i64_at(0),
            batch_length: i32_at(8),
            partition_leader_epoch: i32_at(12),
            magic: bytes[16] as i8,
            crc: i32_at(17) as u32,
            attributes: i16_at(21),
            last_offset_delta: i32_at(23),
            base_timestamp: i64_at(27),
            max_timestamp: i64_at(35),
            producer_id: i64_at(43),
            producer_epoch: i16_at(51),
            base_sequence: i32_at(53),
            record_count: i32_at(57),
        };
        if header.magic != MAGIC {
            return Err(WireError::UnsupportedMagic(header.magic));
        }
        if (header.batch_length as i64) < (HEADER_LEN - LOG_OVERHEAD) as i64 {
            return Err(WireError::Corrupt(format!(
                "batch length {} is shorter than a batch header",
                header.batch_length
            )));
        }
        if header.last_offset_delta < 0 || header.record_count < 0 {
            return Err(WireError::Corrupt(format!(
                "negative last offset delta {} or record count {}",
                header.last_offset_delta, header.record_count
            )));
        }
        // The offset after the batch must be one: `last_offset` and `next_offset` add.
        if header
            .base_offset
            .checked_add(i64::from(header.last_offset_delta) + 1)
            .is_none()
        {
            return Err(WireError::Corrupt(format!(
                "base offset {} with last offset delta {} passes the largest offset",
                header.base_offset, header.last_offset_delta
            )));
        }
        Ok(header)
    }

    /// The whole batch's size in bytes, headers included.
    pub fn size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> Offset {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// The offset after the batch.
    pub fn next_offset(&self) -> Offset {
        self.last_offset() + 1
    }

    /// The compression of the records section.
    pub fn compression(&self) -> Result<Compression, WireError> {
        Compression::from_attributes(self.attributes)
    }

    /// Whether the broker set the timestamps at append (`LogAppendTime`) rather than the
    /// producer (`CreateTime`).
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_BIT != 0
    }

    /// Whether the batch belongs to a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }

    /// Whether the batch holds a transaction marker rather than data.
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }

    /// Whether `base_timestamp` holds the compaction delete horizon.
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & DELETE_HORIZON_BIT != 0
    }

    /// Sequence number of the last record, wrapping past `i32::MAX` as Kafka does.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return -1;
        }
        let delta = self.last_offset_delta;
        if self.base_sequence > i32::MAX - delta {
            delta - (i32::MAX - self.base_sequence) - 1
        } else {
            self.base_sequence + delta
        }
    }
}

/// Checks one whole batch (`bytes` is exactly one batch): its header, its length, its CRC-32C,
/// and that it holds as many records as its offsets span.
pub fn validate(bytes: &[u8]) -> Result<BatchHeader, WireError> {
    let header = BatchHeader::parse(bytes)?;
    if bytes.len() != header.size() {
        return Err(WireError::Corrupt(format!(
            "batch length says {} bytes, {} were given",
            header.size(),
            bytes.len()
        )));
    }
    let computed = crc32c::crc32c(&bytes[CRC_START..]);
    if computed != header.crc {
        return Err(WireError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(header)
}

/// Overwrites a batch's base offset, as the broker does when it appends the batch. The CRC
/// does not cover it, so the batch stays valid.
///
/// # Panics
/// If `batch` is shorter than a batch header.
pub fn set_base_offset(batch: &mut [u8], base_offset: Offset) {
    batch[..8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Stamps a batch with the broker's clock (`LogAppendTime`): sets the timestamp type and the
/// max timestamp, and recomputes the CRC, which covers both.
///
/// # Panics
/// If `batch` is shorter than a batch header.
pub fn set_log_append_time(batch: &mut [u8], now: Timestamp) {
    let attributes = i16::from_be_bytes([batch[21], batch[22]]) | TIMESTAMP_TYPE_BIT;
    batch[21..23].copy_from_slice(&attributes.to_be_bytes());
    batch[35..43].copy_from_slice(&now.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Stamps a batch with the producer that sends it (id, epoch, first sequence number) and
/// recomputes the CRC, which covers them: a producer that gets a new id sends its unsent
/// batches again under it.
///
/// # Panics
/// If `batch` is shorter than a batch header.
pub fn set_producer(batch: &mut [u8], producer_id: i64, producer_epoch: i16, base_sequence: i32) {
    batch[43..51].copy_from_slice(&producer_id.to_be_bytes());
    batch[51..53].copy_from_slice(&producer_epoch.to_be_bytes());
    batch[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// The consecutive batches at the front of a buffer, as stored in a segment or returned by a
/// fetch. Iteration stops at the end or at a trailing partial batch (a fetch may end with
/// one); a malformed header yields one error and ends the iteration.
#[derive(Debug, Clone)]
pub struct Batches<'a> {
    rest: &'a [u8],
}

impl<'a> Batches<'a> {
    /// The batches of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    /// What is left after the batches iterated so far.
    pub fn remainder(&self) -> &'a [u8] {
        self.rest
    }
}

impl<'a> Iterator for Batches<'a> {
    type Item = Result<(BatchHeader, &'a [u8]), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.len() < HEADER_LEN {
            return None;
        }
        match BatchHeader::parse(self.rest) {
            Ok(header) if header.size() <= self.rest.len() => {
                let (batch, rest) = self.rest.split_at(header.size());
                self.rest = rest;
                Some(Ok((header, batch)))
            }
            Ok(_) => None,
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

/// A record read from a batch, with its offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchRecord {
    /// The record's offset in its partition.
    pub offset: Offset,
    /// The record.
    pub record: Record,
}

/// Decodes every record of one whole batch, after checking its CRC. Compressed records are
/// decompressed up to `decompressed_limit` bytes. Keys, values and headers share the batch's
/// memory when it is not compressed.
pub fn decode_records(
    batch: &Bytes,
    decompressed_limit: usize,
) -> Result<(BatchHeader, Vec<BatchRecord>), WireError> {
    // Room for the records the header counts, as many as the bytes could hold at most.
    let counted = BatchHeader::parse(batch).map_or(0, |h| h.record_count);
    let mut out = Vec::with_capacity(usize::try_from(counted).map_or(0, |n| n.min(batch.len())));
    let header = decode_records_with(batch, decompressed_limit, |r| out.push(r))?;
    Ok((header, out))
}

/// Decodes every record of one whole batch as [`decode_records`] does, giving each to `each`
/// in order instead of collecting them: a reader that keeps records in a queue of its own
/// moves each once.
pub fn decode_records_with(
    batch: &Bytes,
    decompressed_limit: usize,
    mut each: impl FnMut(BatchRecord),
) -> Result<BatchHeader, WireError> {
    let header = validate(batch)?;
    let records = match header.compression()? {
        Compression::None => batch.slice(HEADER_LEN..),
        codec => Bytes::from(codec.decompress(&batch[HEADER_LEN..], decompressed_limit)?),
    };
    let total = header.record_count as usize;
    if total > records.len() / MIN_RECORD_LEN {
        return Err(WireError::Corrupt(format!(
            "{total} records cannot fit in {} bytes",
            records.len()
        )));
    }
    let mut at = 0;
    for _ in 0..total {
        let mut cursor = &records[at..];
        let len = read_varint(&mut cursor)?;
        let start = records.len() - cursor.len();
        let len = usize::try_from(len)
            .ok()
            .filter(|&n| n <= cursor.len())
            .ok_or_else(|| WireError::Corrupt(format!("record length {len} out of bounds")))?;
        let mut record = decode_record(&header, &records, start..start + len)?;
        if header.is_log_append_time() {
            record.record.timestamp = header.max_timestamp;
        }
        each(record);
        at = start + len;
    }
    if at != records.len() {
        return Err(WireError::Corrupt(format!(
            "{} bytes after the last record",
            records.len() - at
        )));
    }
    Ok(header)
}

/// Decodes the record at `span` of `records`: its key, value and headers are slices of
/// `records` (taken without a slice of the whole record first, each slice being a count on
/// the buffer that the thread that drops the record must touch again).
fn decode_record(
    header: &BatchHeader,
    records: &Bytes,
    span: std::ops::Range<usize>,
) -> Result<BatchRecord, WireError> {
    let end = span.end;
    let mut cursor: &[u8] = &records[span];
    let Some((_attributes, rest)) = cursor.split_first() else {
        return Err(WireError::Truncated("record attributes"));
    };
    cursor = rest;
    let timestamp_delta = read_varlong(&mut cursor)?;
    let offset_delta = read_varint(&mut cursor)?;
    let key = read_bytes(records, end, &mut cursor, "record key")?;
    let value = read_bytes(records, end, &mut cursor, "record value")?;
    let header_count = read_varint(&mut cursor)?;
    let header_count = usize::try_from(header_count)
        .ok()
        .filter(|&n| n <= cursor.len() / 2)
        .ok_or_else(|| WireError::Corrupt(format!("header count {header_count} out of bounds")))?;
    let mut headers = Vec::with_capacity(header_count);
    for _ in 0..header_count {
        let name = read_bytes(records, end, &mut cursor, "header name")?
            .ok_or_else(|| WireError::Corrupt("header with a null name".into()))?;
        // As Java reads header keys: bytes that are not UTF-8 become U+FFFD, not an error
        // that would leave a consumer unable to pass the batch.
        let name = String::from_utf8_lossy(&name).into_owned();
        let value = read_bytes(records, end, &mut cursor, "header value")?;
        headers.push(Header { key: name, value });
    }
    if !cursor.is_empty() {
        return Err(WireError::Corrupt(format!(
            "{} bytes after the record's headers",
            cursor.len()
        )));
    }
    let offset = header
        .base_offset
        .checked_add(i64::from(offset_delta))
        .ok_or_else(|| WireError::Corrupt(format!("offset delta {offset_delta} overflows")))?;
    Ok(BatchRecord {
        offset,
        record: Record {
            key,
            value,
            headers,
            timestamp: header.base_timestamp.wrapping_add(timestamp_delta),
        },
    })
}

/// Reads a varint length of what follows in a record: `None` for -1 (null), the length if
/// the bytes that remain hold it; any other negative length is refused.
#[inline]
fn read_length(cursor: &mut &[u8], what: &'static str) -> Result<Option<usize>, WireError> {
    let len = read_varint(cursor)?;
    if len == -1 {
        return Ok(None);
    }
    usize::try_from(len)
        .ok()
        .filter(|&n| n <= cursor.len())
        .map(Some)
        .ok_or_else(|| WireError::Corrupt(format!("{what} length {len} out of bounds")))
}

/// Reads a varint length and that many bytes (`-1` is null) as a slice of `whole`, in which
/// `cursor` ends at `end`.
fn read_bytes(
    whole: &Bytes,
    end: usize,
    cursor: &mut &[u8],
    what: &'static str,
) -> Result<Option<Bytes>, WireError> {
    let Some(len) = read_length(cursor, what)? else {
        return Ok(None);
    };
    let start = end - cursor.len();
    *cursor = &cursor[len..];
    Ok(Some(whole.slice(start..start + len)))
}

/// Builds one record batch from records appended in offset order.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    compression: Compression,
    attributes: i16,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    base_timestamp: Option<Timestamp>,
    max_timestamp: Timestamp,
    count: i32,
    /// The offset delta of the last record appended.
    last_offset_delta: i32,
    records: Vec<u8>,
}

impl BatchBuilder {
    /// An empty batch whose records will be compressed with `compression`, written by no
    /// particular producer (producer id, epoch and sequence -1).
    pub fn new(compression: Compression) -> Self {
        Self {
            compression,
            attributes: compression.id(),
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            base_timestamp: None,
            max_timestamp: -1,
            count: 0,
            last_offset_delta: -1,
            records: Vec::new(),
        }
    }

    /// An empty batch as [`Self::new`] makes, with room for `bytes` of batch (header and
    /// records) before it grows.
    pub fn with_capacity(compression: Compression, bytes: usize) -> Self {
        let mut builder = Self::new(compression);
        builder.records = Vec::with_capacity(bytes.saturating_sub(HEADER_LEN));
        builder
    }

    /// A batch to hold some of the records of the batch `original` (as compaction keeps them):
    /// same producer fields, transactional and control bits, and offset span, so offsets and
    /// producer sequences stay as they were. Records are added with
    /// [`Self::append_at`].
    pub fn retaining(original: &BatchHeader, compression: Compression) -> Self {
        let mut builder = Self::new(compression).producer(
            original.producer_id,
            original.producer_epoch,
            original.base_sequence,
        );
        builder.attributes |= original.attributes & (TRANSACTIONAL_BIT | CONTROL_BIT);
        builder.last_offset_delta = original.last_offset_delta;
        builder
    }

    /// Marks the batch as written by an idempotent producer, its first record having
    /// sequence number `base_sequence`.
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Marks the batch as part of a transaction.
    pub fn transactional(mut self) -> Self {
        self.attributes |= TRANSACTIONAL_BIT;
        self
    }

    /// The number of records appended so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether no record was appended yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The bytes of batch (header and records) it has room for before it grows.
    pub fn capacity(&self) -> usize {
        HEADER_LEN + self.records.capacity()
    }

    /// The batch's size so far before compression.
    pub fn uncompressed_size(&self) -> usize {
        HEADER_LEN + self.records.len()
    }

    /// Appends a record; its offset will be the batch's base offset plus the number of records
    /// before it.
    pub fn append(&mut self, record: &Record) {
        self.append_parts(
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
            record.timestamp,
        );
    }

    /// Appends a record given by its parts.
    pub fn append_parts(
        &mut self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
        timestamp: Timestamp,
    ) {
        self.append_record(self.count, key, value, headers, timestamp);
        self.last_offset_delta = self.count - 1;
    }

    /// Appends a record at `offset_delta` from the batch's base offset, for a batch made by
    /// [`Self::retaining`]: deltas must increase and stay within the original batch's span.
    pub fn append_at(&mut self, offset_delta: i32, record: &Record) {
        self.append_record(
            offset_delta,
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
            record.timestamp,
        );
        self.last_offset_delta = self.last_offset_delta.max(offset_delta);
    }

    fn append_record(
        &mut self,
        offset_delta: i32,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
        timestamp: Timestamp,
    ) {
        let base = *self.base_timestamp.get_or_insert(timestamp);
        self.max_timestamp = self.max_timestamp.max(timestamp);
        let timestamp_delta = timestamp.wrapping_sub(base);
        let bytes_len = |b: Option<&[u8]>| match b {
            Some(b) => varint_len(b.len() as i32) + b.len(),
            None => varint_len(-1),
        };
        let mut body_len = 1
            + varlong_len(timestamp_delta)
            + varint_len(offset_delta)
            + bytes_len(key)
            + bytes_len(value)
            + varint_len(headers.len() as i32);
        for h in headers {
            body_len += bytes_len(Some(h.key.as_bytes())) + bytes_len(h.value.as_deref());
        }
        let out = &mut self.records;
        out.reserve(body_len + 5);
        write_varint(out, body_len as i32);
        out.push(0);
        write_varlong(out, timestamp_delta);
        write_varint(out, offset_delta);
        write_bytes(out, key);
        write_bytes(out, value);
        write_varint(out, headers.len() as i32);
        for h in headers {
            write_bytes(out, Some(h.key.as_bytes()));
            write_bytes(out, h.value.as_deref());
        }
        self.count += 1;
    }

    /// The finished batch with `base_offset` (producers send 0; the broker assigns offsets).
    ///
    /// # Panics
    /// If no record was appended: Kafka has no empty batches.
    pub fn build(self, base_offset: Offset) -> Result<Vec<u8>, WireError> {
        assert!(self.count > 0, "a record batch holds at least one record");
        let mut out = Vec::with_capacity(HEADER_LEN + self.records.len());
        out.extend_from_slice(&base_offset.to_be_bytes());
        out.extend_from_slice(&[0; 4]); // batch length, below
        out.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch: none
        out.push(MAGIC as u8);
        out.extend_from_slice(&[0; 4]); // crc, below
        out.extend_from_slice(&self.attributes.to_be_bytes());
        out.extend_from_slice(&self.last_offset_delta.to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.unwrap_or(-1).to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        self.compression.compress(&self.records, &mut out)?;
        let batch_length = (out.len() - LOG_OVERHEAD) as i32;
        out[8..12].copy_from_slice(&batch_length.to_be_bytes());
        let crc = crc32c::crc32c(&out[CRC_START..]);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        Ok(out)
    }
}

fn write_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => {
            write_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
        None => write_varint(out, -1),
    }
}

/// The two kinds of transaction marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlType {
    /// The transaction's records are discarded.
    Abort,
    /// The transaction's records become visible to `read_committed` consumers.
    Commit,
}

/// A control batch ending a producer's transaction in one partition: one record whose key is
/// (version 0, type) and whose value is (version 0, coordinator epoch).
pub fn control_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: ControlType,
    coordinator_epoch: i32,
    timestamp: Timestamp,
) -> Vec<u8> {
    let kind: i16 = match marker {
        ControlType::Abort => 0,
        ControlType::Commit => 1,
    };
    let mut key = [0u8; 4];
    key[2..].copy_from_slice(&kind.to_be_bytes());
    let mut value = [0u8; 6];
    value[2..].copy_from_slice(&coordinator_epoch.to_be_bytes());
    let mut builder =
        BatchBuilder::new(Compression::None).producer(producer_id, producer_epoch, -1);
    builder.attributes |= TRANSACTIONAL_BIT | CONTROL_BIT;
    builder.append_parts(Some(&key), Some(&value), &[], timestamp);
    builder
        .build(0)
        .expect("an uncompressed batch cannot fail to build")
}

/// The marker a control record carries, if its key is a control key eddy knows.
pub fn control_type(record: &Record) -> Option<ControlType> {
    match record.key.as_deref()? {
        [0, 0, 0, 0] => Some(ControlType::Abort),
        [0, 0, 0, 1] => Some(ControlType::Commit),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
