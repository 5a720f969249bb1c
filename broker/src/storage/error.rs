//! What can go wrong in the storage layer.

use eddy_core::log::Offset;
use eddy_core::wire::WireError;

/// An error of the storage layer. Handlers map each to a Kafka error code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StorageError {
    /// A record batch sent for append is malformed or fails its CRC.
    #[error("corrupt record batch: {0}")]
    CorruptBatch(#[from] WireError),
    /// A record batch is well formed but not acceptable (say, records out of order).
    #[error("invalid record batch: {0}")]
    InvalidBatch(String),
    /// Records of a batch were refused one by one (Kafka's record errors).
    #[error("{message}")]
    RecordsRefused {
        /// Which error code the refusal is answered with.
        kind: super::RecordsRefusal,
        /// What the refusal says of the batch as a whole.
        message: String,
        /// Each refused record.
        errors: Vec<super::RecordError>,
    },
    /// A record batch is larger than `max.message.bytes`.
    #[error("record batch of {size} bytes is larger than max.message.bytes ({max})")]
    BatchTooLarge {
        /// The batch's size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A read asked for an offset the log does not hold.
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: Offset,
        /// The first offset the log holds.
        log_start_offset: Offset,
        /// The offset the next append will get.
        log_end_offset: Offset,
    },
    /// An idempotent producer's batch does not follow on from its last one.
    #[error("producer {producer_id}: sequence {got} where {expected} was due")]
    OutOfOrderSequence {
        /// The producer.
        producer_id: i64,
        /// The batch's first sequence number.
        got: i32,
        /// The sequence number that would follow on.
        expected: i32,
    },
    /// An idempotent producer's epoch is older than one the partition has seen.
    #[error("producer {producer_id}: epoch {got} is older than epoch {current}")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: i64,
        /// The batch's epoch.
        got: i16,
        /// The newest epoch seen.
        current: i16,
    },
    /// A retried batch arrived together with others in one request.
    #[error("producer {producer_id}: a batch already written, sent again with other batches")]
    DuplicateSequence {
        /// The producer.
        producer_id: i64,
    },
    /// A transactional batch would open a transaction in a partition its producer did not add
    /// to the transaction (KIP-890), or from a producer that is not transactional.
    #[error("producer {producer_id} has not added this partition to a transaction")]
    NotInTransaction {
        /// The producer.
        producer_id: i64,
    },
    /// The partition was deleted while the operation ran.
    #[error("the partition was deleted")]
    Deleted,
    /// An fsync (or a segment roll, which fsyncs) failed: what was written may or may not be
    /// on disk, and a later fsync could not tell, so the partition goes offline.
    #[error("fsync failed, the partition goes offline: {0}")]
    FsyncFailed(std::io::Error),
    /// The partition went offline after a failed fsync; a restart of the broker recovers it
    /// from what is on disk, as Kafka takes a failed log directory offline.
    #[error("the partition is offline after a failed fsync; restart the broker to recover it")]
    Offline,
    /// The disk failed us.
    #[error("storage I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl From<crate::internal_records::TooLong> for StorageError {
    /// A coordinator record that cannot be written is refused as a batch would be.
    fn from(e: crate::internal_records::TooLong) -> Self {
        StorageError::InvalidBatch(e.to_string())
    }
}
