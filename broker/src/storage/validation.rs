//! What a producer's batch must hold, record by record, before it is stored, as Kafka's log
//! validator has it: records that fill the batch as its header says (framing errors are
//! `INVALID_RECORD`), a key on every record of a compacted topic, and with `CreateTime`
//! timestamps within `message.timestamp.before.max.ms` / `after.max.ms` of the broker's clock
//! (`INVALID_TIMESTAMP`). Records refused one by one are reported one by one, with their place
//! in the batch, as Kafka's record errors are.

use eddy_core::log::{Timestamp, TopicPartition};
use eddy_core::wire::batch::{check_records, BatchHeader, CheckedRecord};

use super::{LogConfig, StorageError};

/// The most a compressed batch's records may take once decompressed. Kafka has no such
/// budget; a batch of at most `max.message.bytes` that expands past it is refused.
pub(crate) const DECOMPRESSED_LIMIT: usize = 64 << 20;

/// A record refused on its own: its place in the batch and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordError {
    /// The record's index in its batch.
    pub index: i32,
    /// Why it was refused.
    pub message: String,
}

/// Why a batch's records were refused one by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordsRefusal {
    /// A record's timestamp is out of the range the topic accepts (`INVALID_TIMESTAMP`).
    Timestamp,
    /// A record is not acceptable in this topic (`INVALID_RECORD`).
    Record,
}

/// Checks the records of one producer's batch (`bytes`, whose header and CRC were checked) for
/// `partition` with `config` at the broker's time `now`. `scratch` holds a compressed batch's
/// records while they are checked.
pub(crate) fn check_producer_batch(
    partition: &TopicPartition,
    config: &LogConfig,
    bytes: &[u8],
    header: &BatchHeader,
    now: Timestamp,
    scratch: &mut Vec<u8>,
) -> Result<(), StorageError> {
    let mut errors: Vec<RecordError> = Vec::new();
    let mut bad_timestamp = false;
    let accepted = accepted_timestamps(config, now);
    let check = |record: CheckedRecord| {
        if config.compact && !record.has_key {
            errors.push(RecordError {
                index: record.index,
                message: format!(
                    "Compacted topic cannot accept message without key in topic partition {partition}"
                ),
            });
        } else if let Some(range) = accepted
            .as_ref()
            .filter(|r| record.timestamp != NO_TIMESTAMP && !r.contains(&record.timestamp))
        {
            bad_timestamp = true;
            errors.push(RecordError {
                index: record.index,
                message: format!(
                    "Timestamp {} of message with offset {} is out of range. The timestamp \
                     should be within [{}, {}]",
                    record.timestamp,
                    record.index,
                    range.start(),
                    range.end()
                ),
            });
        }
    };
    check_records(bytes, header, DECOMPRESSED_LIMIT, scratch, check)
        .map_err(|e| StorageError::InvalidBatch(e.to_string()))?;
    if errors.is_empty() {
        return Ok(());
    }
    let (kind, message) = if bad_timestamp {
        (
            RecordsRefusal::Timestamp,
            "One or more records have been rejected due to invalid timestamp".to_string(),
        )
    } else {
        let shown: Vec<_> = errors
            .iter()
            .take(3)
            .map(|e| {
                format!(
                    "RecordError(batchIndex={}, message='{}')",
                    e.index, e.message
                )
            })
            .collect();
        (
            RecordsRefusal::Record,
            format!(
                "One or more records have been rejected due to {} record errors in total, and \
                 only showing the first three errors at most: [{}]",
                errors.len(),
                shown.join(", ")
            ),
        )
    };
    Err(StorageError::RecordsRefused {
        kind,
        message,
        errors,
    })
}

/// The timestamp a producer writes when it gives none.
const NO_TIMESTAMP: Timestamp = -1;

/// The timestamps a `CreateTime` topic accepts at `now`; `None` for a `LogAppendTime` topic,
/// whose records get the broker's time.
fn accepted_timestamps(
    config: &LogConfig,
    now: Timestamp,
) -> Option<std::ops::RangeInclusive<Timestamp>> {
    (!config.log_append_time).then(|| {
        now.saturating_sub(config.timestamp_before_max_ms)
            ..=now.saturating_add(config.timestamp_after_max_ms)
    })
}
