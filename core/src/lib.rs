//! eddy-core: the vocabulary that eddy's broker and runtime share, and everything that can be
//! pure.
//!
//! Nothing in this crate opens a socket or a file or spawns a task: it takes bytes and values
//! and returns bytes and values, so every part of it can be tested without I/O.
//!
//! - [`log`]: topics, partitions, offsets, records, and the partitioners of the Java client.
//! - [`wire`]: the Apache Kafka wire format: RecordBatch v2, compression, varints.
//! - [`serde`]: how keys and values become bytes and back, with Kafka's serdes' layouts.
//! - [`streams`]: the streams engine: DSL, topology, Processor API, stores, task engine.
//! - [`testing`]: the `TestDriver`, which runs a topology with no broker.
//! - [`clock`]: the system's wall clock, read in one place.

pub mod clock;
pub mod log;
pub mod serde;
pub mod streams;
pub mod testing;
pub mod wire;
