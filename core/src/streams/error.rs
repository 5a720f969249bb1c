//! What can go wrong in a topology: a topology that cannot be built ([`TopologyError`]) and a
//! record that cannot be processed ([`StreamsError`]).

use crate::serde::SerdeError;

/// Why a topology was refused when it was built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// Two nodes, two stores or two sources of one topic share a name.
    #[error("{what} {name} is already added")]
    Duplicate {
        /// `"processor"`, `"store"` or `"topic"`.
        what: &'static str,
        /// The name used twice.
        name: String,
    },
    /// A node names a parent or a store that does not exist, or a sink as a parent.
    #[error("{node}: {reason}")]
    BadConnection {
        /// The node being added.
        node: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A parent's records are not of the type a child takes.
    #[error("{child} takes {takes} but its parent {parent} forwards {forwards}")]
    TypeMismatch {
        /// The parent node.
        parent: String,
        /// The child node.
        child: String,
        /// What the parent forwards.
        forwards: &'static str,
        /// What the child takes.
        takes: &'static str,
    },
    /// An operation needs a serde the topology was not given and cannot infer.
    #[error(
        "{node} needs a {which} serde: give one with Consumed, Produced, Grouped or Materialized"
    )]
    MissingSerde {
        /// The node that needs it.
        node: String,
        /// `"key"` or `"value"`.
        which: &'static str,
    },
    /// Something else the topology cannot do, said in words.
    #[error("{0}")]
    Invalid(String),
}

/// Why a task could not process a record or a punctuation. As in Kafka Streams (whose default
/// handlers fail), the task stops at the first error and reports it; nothing is skipped
/// silently.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamsError {
    /// A key or value could not be read or written.
    #[error(transparent)]
    Serde(#[from] SerdeError),
    /// A record's timestamp is negative (Kafka's `FailOnInvalidTimestamp`).
    #[error("record at {topic}-{partition}@{offset} has the invalid timestamp {timestamp}")]
    InvalidTimestamp {
        /// The input topic.
        topic: String,
        /// The input partition.
        partition: i32,
        /// The record's offset.
        offset: i64,
        /// The timestamp the extractor gave.
        timestamp: i64,
    },
    /// A processor asked for a store it is not connected to, or with other types.
    #[error("processor {processor} has no store {store} of that kind and types")]
    UnknownStore {
        /// The processor.
        processor: String,
        /// The store it asked for.
        store: String,
    },
    /// A processor forwarded to a child it does not have.
    #[error("processor {processor} has no child {child}")]
    UnknownChild {
        /// The processor.
        processor: String,
        /// The child it named.
        child: String,
    },
    /// A store could not read or write its data.
    #[error("store {store} failed: {reason}")]
    Store {
        /// The store.
        store: String,
        /// What went wrong.
        reason: String,
    },
    /// A user processor failed.
    #[error("processor {processor} failed: {reason}")]
    Processor {
        /// The processor.
        processor: String,
        /// What it said.
        reason: String,
    },
}
