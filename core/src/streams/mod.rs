//! The streams engine, as Kafka Streams defines it: so far the window definitions that
//! windowed aggregations and joins are built on ([`windows`]) and the state stores with their
//! changelogs ([`store`]).

pub mod store;
pub mod windows;
