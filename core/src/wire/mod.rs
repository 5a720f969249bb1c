//! The Apache Kafka wire format, with no I/O: bytes in, bytes out.
//!
//! - [`batch`]: RecordBatch v2 (magic 2), the unit in which producers write, the broker stores
//!   and consumers read records: its header, CRC-32C, records, headers and control batches.
//! - [`consumer_protocol`]: the assignments a consumer group leader hands out.
//! - [`compression`]: none, gzip, snappy (raw and the Java client's framing), lz4 and zstd,
//!   with a bound on the decompressed size.
//! - [`frame`]: the size-prefixed frames requests and responses travel in.
//! - [`varint`]: the zig-zag varints of the record format.
//!
//! Every length and count read from the input is checked against the bytes that remain before
//! anything is allocated for it, so no input of N bytes makes a decoder allocate much more than
//! N bytes (decompression is bounded by an explicit limit instead).

pub mod batch;
pub mod compression;
pub mod consumer_protocol;
mod error;
pub mod frame;
pub mod varint;

pub use error::WireError;
