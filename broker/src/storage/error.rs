//! What can go wrong in the storage layer.

use eddy_core::log::Offset;
use eddy_core::wire::WireError;

/// An error of the storage layer. Handlers map each to a Kafka error code.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A record batch sent for append is malformed or fails its CRC.
    #[error("corrupt record batch: {0}")]
    CorruptBatch(#[from] WireError),
    /// A record batch is well formed but not acceptable (say, records out of order).
    #[error("invalid record batch: {0}")]
    InvalidBatch(String),
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
    /// The partition was deleted while the operation ran.
    #[error("the partition was deleted")]
    Deleted,
    /// The disk failed us.
    #[error("storage I/O error: {0}")]
    Io(#[from] std::io::Error),
}
