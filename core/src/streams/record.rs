//! The records that flow between processors: a typed key and value with the timestamp and
//! headers they travel with, and the position in the log of the input record being processed.

use std::sync::Arc;

use crate::log::{Header, Offset, Timestamp};

/// A record inside a topology: its key and value as typed values (never bytes between the
/// processors of a sub-topology), its event time and its headers.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<K, V> {
    /// The key.
    pub key: K,
    /// The value.
    pub value: V,
    /// Event time, in milliseconds since the epoch.
    pub timestamp: Timestamp,
    /// Headers, in order.
    pub headers: Vec<Header>,
}

impl<K, V> Record<K, V> {
    /// A record without headers.
    pub fn new(key: K, value: V, timestamp: Timestamp) -> Self {
        Self {
            key,
            value,
            timestamp,
            headers: Vec::new(),
        }
    }

    /// The same record with another key.
    pub fn with_key<K2>(self, key: K2) -> Record<K2, V> {
        Record {
            key,
            value: self.value,
            timestamp: self.timestamp,
            headers: self.headers,
        }
    }

    /// The same record with another value.
    pub fn with_value<V2>(self, value: V2) -> Record<K, V2> {
        Record {
            key: self.key,
            value,
            timestamp: self.timestamp,
            headers: self.headers,
        }
    }

    /// The same record at another time.
    pub fn with_timestamp(mut self, timestamp: Timestamp) -> Self {
        self.timestamp = timestamp;
        self
    }

    /// The same record with these headers.
    pub fn with_headers(mut self, headers: Vec<Header>) -> Self {
        self.headers = headers;
        self
    }
}

/// Where the input record being processed was read: what Kafka Streams' `RecordMetadata`
/// gives a processor. Absent during a punctuation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// The input topic (an internal topic's full name, application id included).
    pub topic: Arc<str>,
    /// The input partition.
    pub partition: i32,
    /// The record's offset in that partition.
    pub offset: Offset,
}

/// An update of a table: the new value for a key and the one it replaces, `None` meaning
/// absent (a deletion when `new` is `None`). What flows between the nodes of a `KTable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change<V> {
    /// The value after the update; `None` when the key was deleted.
    pub new: Option<V>,
    /// The value before, when the node knows it.
    pub old: Option<V>,
}

impl<V> Change<V> {
    /// An update from `old` to `new`.
    pub fn new(new: Option<V>, old: Option<V>) -> Self {
        Self { new, old }
    }
}
