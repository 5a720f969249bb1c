//! eddy: stateful stream processing in Rust on a partitioned, replayable log, in the style of
//! Kafka Streams, with a bundled broker that speaks the Apache Kafka wire protocol.
//!
//! This crate is what applications depend on. It re-exports the shared vocabulary of
//! [`eddy_core`] and adds everything that does I/O: the [`client`] (producer, consumer,
//! administration, transactions), the streams [`app`] (a topology running as members of a
//! consumer group), state [`store`]s on disk, the [`embedded`] broker, the operator commands
//! behind the `eddy` tool ([`tools`]) and the load generators of `eddy bench`.

pub use eddy_core::{log, serde, streams, testing, wire};

pub mod app;
pub mod bench;
pub mod client;
pub mod store;
mod time;
pub mod tools;

#[cfg(feature = "embedded")]
pub mod embedded;
