//! eddy: stateful stream processing in Rust on a partitioned, replayable log, in the style of
//! Kafka Streams, with a bundled broker that speaks the Apache Kafka wire protocol.
//!
//! This crate is what applications depend on. It re-exports the shared vocabulary of
//! [`eddy_core`] and adds everything that does I/O: the [`client`] (producer, consumer,
//! administration, transactions), the streams [`app`] (a topology running as members of a
//! consumer group), state [`store`]s on disk and the [`embedded`] broker. The `eddy` command's
//! own code (`cli`, and the operator commands and load generators under `internals`) is
//! compiled in but is not part of the API.

pub use eddy_core::{log, serde, streams, testing};

mod allocator;
pub mod app;
mod blocking;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
pub mod client;
#[doc(hidden)]
pub mod internals;
pub mod store;
mod time;

#[cfg(feature = "embedded")]
pub mod embedded;
