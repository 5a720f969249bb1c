//! Records and their coordinates in the log.

use std::fmt;

use bytes::Bytes;

/// The position of a record within its partition: 0 for the first record ever written, one
/// more for each record after it. Offsets never change once assigned, not even by compaction.
pub type Offset = i64;

/// Milliseconds since the Unix epoch, as Kafka stores them. `-1` means "no timestamp".
pub type Timestamp = i64;

/// One partition of one topic.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic's name.
    pub topic: String,
    /// The partition number, from 0.
    pub partition: i32,
}

impl TopicPartition {
    /// The partition `partition` of `topic`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// A header of a record: a UTF-8 name and an optional byte value. A record may carry several
/// headers of the same name; their order is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The header's name.
    pub key: String,
    /// The header's value; `None` is distinct from an empty value.
    pub value: Option<Bytes>,
}

impl Header {
    /// A header with a value.
    pub fn new(key: impl Into<String>, value: impl Into<Bytes>) -> Self {
        Self {
            key: key.into(),
            value: Some(value.into()),
        }
    }
}

/// One record as a producer writes it and a consumer reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The key; `None` for records without one (they are spread by the sticky partitioner).
    pub key: Option<Bytes>,
    /// The value; `None` is a tombstone, which deletes the key in a compacted topic.
    pub value: Option<Bytes>,
    /// Headers, in order.
    pub headers: Vec<Header>,
    /// The record's timestamp.
    pub timestamp: Timestamp,
}

impl Record {
    /// A record with a key and a value and no headers.
    pub fn new(key: impl Into<Bytes>, value: impl Into<Bytes>, timestamp: Timestamp) -> Self {
        Self {
            key: Some(key.into()),
            value: Some(value.into()),
            headers: Vec::new(),
            timestamp,
        }
    }
}
