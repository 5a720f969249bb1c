//! eddy-broker: the broker bundled with eddy, a single node that speaks the Apache Kafka wire
//! protocol.
//!
//! A request travels `server` (listener, connections, framing) → `handler` (one module per
//! API family, translating requests into calls on the domain and errors into Kafka error
//! codes) → the domain: [`storage`] (partition logs) and [`metadata`] (topics and their
//! configurations). Handlers never touch files; storage never sees a request.

pub mod storage;
