//! The records of a batch checked one by one, as a broker must before it stores a batch: a
//! header can claim any count and the records any lengths, and a consumer trusts both.
//! Nothing is copied or allocated per record; a compressed batch is decompressed once, into
//! a buffer the caller keeps, within a budget.

use super::{read_length, BatchHeader, HEADER_LEN, MIN_RECORD_LEN};
use crate::log::Timestamp;
use crate::wire::varint::{read_varint, read_varlong};
use crate::wire::WireError;

/// One record, as [`check_records`] shows it to its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedRecord {
    /// Its place in the batch (and its offset delta): 0 for the first record.
    pub index: i32,
    /// Its timestamp (the batch's base timestamp plus the record's delta).
    pub timestamp: Timestamp,
    /// Whether it has a key (not null).
    pub has_key: bool,
}

/// Walks every record of one whole batch whose header and CRC were checked (`batch` is the
/// batch, `header` its header), checking what a consumer relies on: each record's length
/// within the records, its varints, key, value and header lengths that are -1 (null) or fit
/// in the record, header keys that are not null, offset deltas equal to the record's place,
/// as many records as the header says and nothing after the last. A compressed batch is
/// decompressed into `scratch` first, failing past `decompressed_limit` bytes. `each` sees
/// every record, in order, once the record is known to be well formed.
pub fn check_records(
    batch: &[u8],
    header: &BatchHeader,
    decompressed_limit: usize,
    scratch: &mut Vec<u8>,
    mut each: impl FnMut(CheckedRecord),
) -> Result<(), WireError> {
    let compressed = batch
        .get(HEADER_LEN..)
        .ok_or(WireError::Truncated("record batch header"))?;
    let records: &[u8] = match header.compression()? {
        super::Compression::None => compressed,
        codec => {
            codec.decompress_into(compressed, decompressed_limit, scratch)?;
            scratch
        }
    };
    let count = usize::try_from(header.record_count)
        .ok()
        .filter(|&n| n > 0 && n <= records.len() / MIN_RECORD_LEN)
        .ok_or_else(|| {
            WireError::Corrupt(format!(
                "{} records cannot be held in {} bytes",
                header.record_count,
                records.len()
            ))
        })?;
    let mut rest = records;
    for index in 0..count {
        let len = read_varint(&mut rest)?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&n| n <= rest.len())
            .ok_or_else(|| {
                WireError::Corrupt(format!(
                    "record {index} claims {len} bytes, {} remain",
                    rest.len()
                ))
            })?;
        let (body, after) = rest.split_at(len);
        rest = after;
        let index = i32::try_from(index).map_err(|_| WireError::Corrupt("record count".into()))?;
        each(check_record(header, body, index)?);
    }
    if !rest.is_empty() {
        return Err(WireError::Corrupt(format!(
            "{} bytes after the last of {count} records",
            rest.len()
        )));
    }
    Ok(())
}

/// Checks one record's body (what its length covers).
#[inline]
fn check_record(header: &BatchHeader, body: &[u8], index: i32) -> Result<CheckedRecord, WireError> {
    let mut cursor = body
        .get(1..) // attributes, unused in magic 2
        .ok_or(WireError::Truncated("record attributes"))?;
    let timestamp_delta = read_varlong(&mut cursor)?;
    let offset_delta = read_varint(&mut cursor)?;
    if offset_delta != index {
        return Err(WireError::Corrupt(format!(
            "record {index} has offset delta {offset_delta}"
        )));
    }
    let has_key = skip_bytes(&mut cursor, "record key")?;
    skip_bytes(&mut cursor, "record value")?;
    let headers = read_varint(&mut cursor)?;
    let headers = usize::try_from(headers)
        .ok()
        .filter(|&n| n <= cursor.len() / 2)
        .ok_or_else(|| WireError::Corrupt(format!("header count {headers} out of bounds")))?;
    for _ in 0..headers {
        if !skip_bytes(&mut cursor, "header key")? {
            return Err(WireError::Corrupt("a header with a null key".into()));
        }
        skip_bytes(&mut cursor, "header value")?;
    }
    if !cursor.is_empty() {
        return Err(WireError::Corrupt(format!(
            "{} bytes after record {index}'s headers",
            cursor.len()
        )));
    }
    Ok(CheckedRecord {
        index,
        timestamp: header.base_timestamp.wrapping_add(timestamp_delta),
        has_key,
    })
}

/// Skips a varint length and that many bytes: whether they were present (-1 is null; any
/// other negative length is refused).
#[inline]
fn skip_bytes(cursor: &mut &[u8], what: &'static str) -> Result<bool, WireError> {
    let Some(len) = read_length(cursor, what)? else {
        return Ok(false);
    };
    *cursor = &cursor[len..];
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::Record;
    use crate::wire::batch::{validate, BatchBuilder};
    use crate::wire::compression::Compression;
    use bytes::Bytes;

    fn record(key: Option<&'static [u8]>, timestamp: Timestamp) -> Record {
        Record {
            key: key.map(Bytes::from_static),
            value: Some(Bytes::from_static(b"value")),
            headers: vec![crate::log::Header {
                key: "h".into(),
                value: None,
            }],
            timestamp,
        }
    }

    fn checked(batch: &[u8]) -> Result<Vec<CheckedRecord>, WireError> {
        let header = validate(batch)?;
        let mut seen = Vec::new();
        check_records(batch, &header, 1 << 20, &mut Vec::new(), |r| seen.push(r))?;
        Ok(seen)
    }

    /// Rewrites the CRC after a change, so that only the change is wrong.
    fn resealed(mut batch: Vec<u8>) -> Vec<u8> {
        let crc = crc32c::crc32c(&batch[21..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
        batch
    }

    #[test]
    fn every_record_of_a_good_batch_is_seen_whatever_its_compression() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut builder = BatchBuilder::new(codec);
            builder.append(&record(Some(b"a"), 1_000));
            builder.append(&record(None, 990));
            builder.append(&record(Some(b"c"), 1_500));
            let seen = checked(&builder.build(0).unwrap()).unwrap();
            let expected = [(0, 1_000, true), (1, 990, false), (2, 1_500, true)];
            let got: Vec<_> = seen
                .iter()
                .map(|r| (r.index, r.timestamp, r.has_key))
                .collect();
            assert_eq!(got, expected, "{codec:?}");
        }
    }

    fn one_record_batch(codec: Compression) -> Vec<u8> {
        let mut builder = BatchBuilder::new(codec);
        builder.append(&Record {
            key: Some(Bytes::from_static(b"k")),
            value: None,
            headers: Vec::new(),
            timestamp: 5,
        });
        builder.build(0).unwrap()
    }

    #[test]
    fn a_count_the_records_do_not_fill_is_refused() {
        for codec in [Compression::None, Compression::Lz4] {
            for (count, last_delta) in [(2, 1), (i32::MAX, i32::MAX - 1)] {
                let mut batch = one_record_batch(codec);
                batch[57..61].copy_from_slice(&count.to_be_bytes());
                batch[23..27].copy_from_slice(&last_delta.to_be_bytes());
                assert!(checked(&resealed(batch)).is_err(), "{codec:?} {count}");
            }
        }
    }

    #[test]
    fn lengths_that_leave_the_record_or_are_negative_are_refused() {
        // The last two bytes of the one record: the value length (null, -1, zigzag 1) and
        // the header count (0).
        for bad_value_length in [40u8 /* 20 */, 13 /* -7 */, 3 /* -2 */] {
            let mut batch = one_record_batch(Compression::None);
            let at = batch.len() - 2;
            batch[at] = bad_value_length;
            assert!(
                checked(&resealed(batch)).is_err(),
                "value length byte {bad_value_length}"
            );
        }
        let mut batch = one_record_batch(Compression::None);
        let last = batch.len() - 1;
        batch[last] = 2; // one header, with nothing behind it
        assert!(checked(&resealed(batch)).is_err());
    }

    #[test]
    fn offset_deltas_must_follow_the_records_order() {
        for codec in [Compression::None, Compression::Gzip] {
            let mut builder = BatchBuilder::new(codec);
            builder.append_at(0, &record(Some(b"a"), 1));
            builder.append_at(2, &record(Some(b"b"), 1));
            let mut batch = builder.build(0).unwrap();
            batch[23..27].copy_from_slice(&1i32.to_be_bytes());
            assert!(checked(&resealed(batch)).is_err(), "{codec:?}");
        }
    }

    #[test]
    fn bytes_after_the_last_record_and_empty_batches_are_refused() {
        let mut batch = one_record_batch(Compression::None);
        batch.extend_from_slice(&[0, 0]);
        let length = i32::try_from(batch.len() - 12).unwrap();
        batch[8..12].copy_from_slice(&length.to_be_bytes());
        assert!(checked(&resealed(batch)).is_err());
        let mut empty = one_record_batch(Compression::None);
        empty[57..61].copy_from_slice(&0i32.to_be_bytes());
        assert!(checked(&resealed(empty)).is_err());
    }

    #[test]
    fn decompression_stops_at_the_budget() {
        let mut builder = BatchBuilder::new(Compression::Zstd);
        let big = Bytes::from(vec![0u8; 1 << 20]);
        builder.append(&Record {
            key: None,
            value: Some(big),
            headers: Vec::new(),
            timestamp: 0,
        });
        let batch = builder.build(0).unwrap();
        let header = validate(&batch).unwrap();
        let error = check_records(&batch, &header, 1 << 16, &mut Vec::new(), |_| {}).unwrap_err();
        assert!(
            matches!(error, WireError::DecompressedTooLarge { .. }),
            "{error}"
        );
    }

    proptest::proptest! {
        #[test]
        fn garbage_records_never_panic(records: Vec<u8>, count in 0i32..50) {
            let mut batch = one_record_batch(Compression::None);
            batch.truncate(HEADER_LEN);
            batch.extend_from_slice(&records);
            batch[57..61].copy_from_slice(&count.to_be_bytes());
            let length = i32::try_from(batch.len() - 12).unwrap();
            batch[8..12].copy_from_slice(&length.to_be_bytes());
            let _ = checked(&resealed(batch));
        }
    }
}
