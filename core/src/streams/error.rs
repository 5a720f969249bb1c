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
#[derive(Debug, thiserror::Error)]
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
    /// A processor failed: the error it gave is kept whole, as the [`source`] of this one.
    ///
    /// [`source`]: std::error::Error::source
    #[error("processor {processor} failed: {source}")]
    Processor {
        /// The processor.
        processor: String,
        /// What it gave.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StreamsError {
    /// A processor's failure: `error` may be any error (kept as the source) or a message.
    pub fn processor(
        processor: impl Into<String>,
        error: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Processor {
            processor: processor.into(),
            source: error.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::StreamsError;

    #[derive(Debug, thiserror::Error)]
    #[error("seat {0} is held twice")]
    struct DoubleHold(u32);

    #[test]
    fn a_processors_error_is_kept_as_the_source() {
        let error = StreamsError::processor("seats", DoubleHold(7));
        assert_eq!(
            error.to_string(),
            "processor seats failed: seat 7 is held twice"
        );
        let source = error.source().expect("a source");
        assert_eq!(source.downcast_ref::<DoubleHold>().map(|d| d.0), Some(7));
        let said = StreamsError::processor("seats", "no seat");
        assert_eq!(said.to_string(), "processor seats failed: no seat");
    }
}
