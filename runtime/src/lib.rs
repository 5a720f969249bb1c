//! eddy: stateful stream processing in Rust on a partitioned, replayable log, in the style of
//! Kafka Streams, with a bundled broker that speaks the Apache Kafka wire protocol.
//!
//! This crate is what applications depend on. It re-exports the shared vocabulary of
//! [`eddy_core`] and adds everything that does I/O: for now the [`embedded`] broker.

pub use eddy_core::{log, wire};

#[cfg(feature = "embedded")]
pub mod embedded;
