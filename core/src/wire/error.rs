//! The errors of decoding the wire format.

/// Why bytes could not be decoded. Every variant describes bad input; none is a bug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The input ended before the value that was being read.
    #[error("truncated input: {0}")]
    Truncated(&'static str),
    /// A record batch or record is malformed; the text says how.
    #[error("corrupt record batch: {0}")]
    Corrupt(String),
    /// The batch's stored CRC-32C does not match its bytes.
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// The CRC in the batch header.
        stored: u32,
        /// The CRC of the bytes that follow it.
        computed: u32,
    },
    /// The batch is not RecordBatch v2 (magic 2).
    #[error("unsupported record batch magic {0} (only magic 2 is supported)")]
    UnsupportedMagic(i8),
    /// The compression codec id is not one Kafka defines.
    #[error("unknown compression codec {0}")]
    UnknownCompression(i16),
    /// Compressed data could not be decompressed.
    #[error("{codec} decompression failed: {reason}")]
    Decompression {
        /// The codec's name.
        codec: &'static str,
        /// What the decompressor reported.
        reason: String,
    },
    /// Decompressed data would exceed the limit set by the caller.
    #[error("decompressed records exceed the limit of {limit} bytes")]
    DecompressedTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// A compression codec failed to compress (only on resource failures).
    #[error("{codec} compression failed: {reason}")]
    Compression {
        /// The codec's name.
        codec: &'static str,
        /// What the compressor reported.
        reason: String,
    },
}
