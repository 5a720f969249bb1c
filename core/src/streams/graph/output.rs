//! What a task's sinks write: one buffer of bytes for all the keys and values written since
//! the output was last cleared, and the records as ranges of it, so that writing a record
//! allocates nothing; the producer (or the `TestDriver`) copies from the buffer.

use std::sync::Arc;

use bytes::Bytes;

use crate::log::{Header, Timestamp};
use crate::streams::reuse::clear_keeping_room;

/// The bytes of keys and values a task's output keeps room for once cleared, at least.
const KEPT_BYTES: usize = 16 << 10;

/// The records a task's output keeps room for once cleared, at least.
const KEPT_RECORDS: usize = 256;

/// A record a sink wrote, as the task keeps it.
#[derive(Debug, Clone)]
struct Written {
    topic: u32,
    partition: Option<i32>,
    key: Option<(u32, u32)>,
    value: Option<(u32, u32)>,
    timestamp: Timestamp,
    headers: Vec<Header>,
}

/// The records a task's sinks wrote since the output was last cleared.
#[derive(Debug, Default)]
pub struct Output {
    data: Vec<u8>,
    records: Vec<Written>,
    topics: Vec<Arc<str>>,
}

/// A record leaving a task for a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinkRecord<'a> {
    /// The topic's full name.
    pub topic: &'a str,
    /// The partition a custom partitioner chose; `None` for the default (murmur2 of the key).
    pub partition: Option<i32>,
    /// The serialized key.
    pub key: Option<&'a [u8]>,
    /// The serialized value.
    pub value: Option<&'a [u8]>,
    /// The record's timestamp.
    pub timestamp: Timestamp,
    /// Its headers.
    pub headers: &'a [Header],
}

/// The records of an [`Output`], in the order they were written: an iterator of a type of
/// its own (no closure), so that an async caller may hold it across an await.
#[derive(Debug, Clone)]
pub struct SinkRecords<'a> {
    output: &'a Output,
    records: std::slice::Iter<'a, Written>,
}

impl<'a> Iterator for SinkRecords<'a> {
    type Item = SinkRecord<'a>;

    fn next(&mut self) -> Option<SinkRecord<'a>> {
        let w = self.records.next()?;
        let data = &self.output.data;
        let range = |r: Option<(u32, u32)>| {
            r.map(|(from, len)| &data[from as usize..(from + len) as usize])
        };
        Some(SinkRecord {
            topic: &self.output.topics[w.topic as usize],
            partition: w.partition,
            key: range(w.key),
            value: range(w.value),
            timestamp: w.timestamp,
            headers: &w.headers,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.records.size_hint()
    }
}

impl ExactSizeIterator for SinkRecords<'_> {}

/// A record leaving a task, owning its bytes ([`Output::to_records`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputRecord {
    /// The topic's full name.
    pub topic: Arc<str>,
    /// The partition a custom partitioner chose; `None` for the default.
    pub partition: Option<i32>,
    /// The serialized key.
    pub key: Option<Bytes>,
    /// The serialized value.
    pub value: Option<Bytes>,
    /// The record's timestamp.
    pub timestamp: Timestamp,
    /// Its headers.
    pub headers: Vec<Header>,
}

impl Output {
    /// The number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Roughly how many bytes the records take: their keys and values and a record's
    /// bookkeeping each.
    pub fn bytes(&self) -> usize {
        self.data.len() + self.records.len() * std::mem::size_of::<Written>()
    }

    /// The records, in the order they were written.
    pub fn iter(&self) -> SinkRecords<'_> {
        SinkRecords {
            output: self,
            records: self.records.iter(),
        }
    }

    /// The records as records that own their bytes: the buffer is copied once for all of
    /// them, each key and value a slice of the copy (what a producer takes).
    pub fn to_records(&self) -> Vec<OutputRecord> {
        let data = Bytes::copy_from_slice(&self.data);
        let slice = |r: Option<(u32, u32)>| {
            r.map(|(from, len)| data.slice(from as usize..(from + len) as usize))
        };
        self.records
            .iter()
            .map(|w| OutputRecord {
                topic: self.topics[w.topic as usize].clone(),
                partition: w.partition,
                key: slice(w.key),
                value: slice(w.value),
                timestamp: w.timestamp,
                headers: w.headers.clone(),
            })
            .collect()
    }

    /// Forgets every record, keeping room for as many as were written since the last clear
    /// (a few KiB at least, 64 KiB at most): a task of many that once wrote a large batch
    /// does not hold its room while the others run, and one that writes as much at every run
    /// does not grow its buffers again each time.
    pub fn clear(&mut self) {
        clear_keeping_room(&mut self.data, KEPT_BYTES);
        clear_keeping_room(&mut self.records, KEPT_RECORDS);
    }

    /// The buffer keys and values are written into, and where the next one starts.
    pub(crate) fn data(&mut self) -> &mut Vec<u8> {
        &mut self.data
    }

    /// The index of `topic` in the output's table of topics.
    pub(crate) fn topic_index(&mut self, topic: &Arc<str>) -> u32 {
        if let Some(i) = self
            .topics
            .iter()
            .position(|t| Arc::ptr_eq(t, topic) || t == topic)
        {
            return i as u32;
        }
        self.topics.push(topic.clone());
        (self.topics.len() - 1) as u32
    }

    /// Records a written record whose key and value are the given ranges of the buffer.
    pub(crate) fn push(
        &mut self,
        topic: u32,
        partition: Option<i32>,
        key: Option<(u32, u32)>,
        value: Option<(u32, u32)>,
        timestamp: Timestamp,
        headers: Vec<Header>,
    ) {
        self.records.push(Written {
            topic,
            partition,
            key,
            value,
            timestamp,
            headers,
        });
    }
}
