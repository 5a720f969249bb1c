//! One key's matcher state — its automaton state, its shared buffer and the events waiting
//! for stream time to pass them — and how it is kept in the pattern's store.
//!
//! The store's key is the record key's bytes (the stream's key serde); its value, the
//! changelog's layout, is one format byte (1) and then, in bincode's standard encoding:
//! the partial matches in queue order, the completed matches waiting on them, the buffered
//! events (id, lock count, value bytes in the stream's value serde), the buffer's nodes
//! (id, lock count, edges back with their versions and lock counts), the next event number,
//! the events waiting for stream time (timestamp, arrival number, value bytes) and the next
//! arrival number. A key whose state is back to the start state alone is deleted.

use bytes::Bytes;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::buffer::{Event, EventId, Node, SharedBuffer};
use super::heap::JavaHeap;
use super::nfa::{Computation, KeyNfa};
use crate::log::Timestamp;
use crate::serde::{Serde, SerdeError};

/// The format byte of the store's values.
const FORMAT: u8 = 1;
/// The most a stored state may decode to.
const LIMIT: usize = 64 << 20;

/// An event waiting for stream time to reach it (out of order within the allowed lateness).
pub(crate) struct Waiting<V> {
    pub(crate) timestamp: Timestamp,
    pub(crate) arrival: u64,
    pub(crate) value: V,
    pub(crate) bytes: Option<Bytes>,
}

/// One key's state.
pub(crate) struct KeyState<V> {
    pub(crate) nfa: KeyNfa<V>,
    /// Ordered by timestamp, then arrival.
    pub(crate) waiting: Vec<Waiting<V>>,
    pub(crate) next_arrival: u64,
}

impl<V> KeyState<V> {
    /// Holds `value` until stream time reaches `timestamp`, after the events of the same
    /// timestamp that came before it.
    pub(crate) fn wait(&mut self, value: V, timestamp: Timestamp) {
        let arrival = self.next_arrival;
        self.next_arrival += 1;
        let at = self.waiting.partition_point(|w| w.timestamp <= timestamp);
        self.waiting.insert(
            at,
            Waiting {
                timestamp,
                arrival,
                value,
                bytes: None,
            },
        );
    }

    /// The timestamp and arrival of the first waiting event.
    pub(crate) fn first_waiting(&self) -> Option<(Timestamp, u64)> {
        self.waiting.first().map(|w| (w.timestamp, w.arrival))
    }
}

/// Bytes written as bincode bytes (a length, then the bytes), not as a sequence of numbers.
struct Raw<'a>(&'a [u8]);

impl Serialize for Raw<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// Bytes read back from [`Raw`].
struct Owned(Vec<u8>);

impl<'de> Deserialize<'de> for Owned {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl<'de> Visitor<'de> for Bytes {
            type Value = Owned;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Owned, E> {
                Ok(Owned(v.to_vec()))
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Owned, E> {
                Ok(Owned(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Owned, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element()? {
                    out.push(b);
                }
                Ok(Owned(out))
            }
        }
        d.deserialize_byte_buf(Bytes)
    }
}

#[derive(Serialize)]
struct StoredRef<'a> {
    partial: &'a [Computation],
    completed: &'a [Computation],
    events: Vec<(EventId, u32, Raw<'a>)>,
    nodes: &'a [Node],
    next_seq: u32,
    waiting: Vec<(Timestamp, u64, Raw<'a>)>,
    next_arrival: u64,
}

#[derive(Deserialize)]
struct Stored {
    partial: Vec<Computation>,
    completed: Vec<Computation>,
    events: Vec<(EventId, u32, Owned)>,
    nodes: Vec<Node>,
    next_seq: u32,
    waiting: Vec<(Timestamp, u64, Owned)>,
    next_arrival: u64,
}

fn raw(bytes: &Option<Bytes>) -> &[u8] {
    bytes.as_deref().unwrap_or_default()
}

fn bytes_of<V: 'static>(
    values: &dyn Serde<Value = V>,
    store: &str,
    value: &V,
    bytes: &mut Option<Bytes>,
) -> Result<(), SerdeError> {
    if bytes.is_none() {
        *bytes = Some(values.serialize(store, value)?);
    }
    Ok(())
}

impl<V: 'static> KeyState<V> {
    /// The state's bytes in the store's layout, serializing the values not serialized yet.
    pub(crate) fn encode(
        &mut self,
        values: &dyn Serde<Value = V>,
        store: &str,
        out: &mut Vec<u8>,
    ) -> Result<(), SerdeError> {
        for e in &mut self.nfa.buffer.events {
            bytes_of(values, store, &e.value, &mut e.bytes)?;
        }
        for w in &mut self.waiting {
            bytes_of(values, store, &w.value, &mut w.bytes)?;
        }
        let stored = StoredRef {
            partial: self.nfa.partial.as_slice(),
            completed: self.nfa.completed.as_slice(),
            events: self
                .nfa
                .buffer
                .events
                .iter()
                .map(|e| (e.id, e.locks, Raw(raw(&e.bytes))))
                .collect(),
            nodes: &self.nfa.buffer.nodes,
            next_seq: self.nfa.buffer.next_seq,
            waiting: self
                .waiting
                .iter()
                .map(|w| (w.timestamp, w.arrival, Raw(raw(&w.bytes))))
                .collect(),
            next_arrival: self.next_arrival,
        };
        out.push(FORMAT);
        bincode::serde::encode_into_std_write(&stored, out, bincode::config::standard())
            .map_err(|e| SerdeError::new("pattern state", store, e.to_string()))?;
        Ok(())
    }

    /// A state read back from the store.
    pub(crate) fn decode(
        values: &dyn Serde<Value = V>,
        store: &str,
        bytes: &[u8],
    ) -> Result<Self, SerdeError> {
        let bad = |reason: String| SerdeError::new("pattern state", store, reason);
        let Some((&format, rest)) = bytes.split_first() else {
            return Err(bad("an empty value".to_string()));
        };
        if format != FORMAT {
            return Err(bad(format!("unknown format {format}")));
        }
        let config = bincode::config::standard().with_limit::<LIMIT>();
        let (stored, read): (Stored, usize) =
            bincode::serde::decode_from_slice(rest, config).map_err(|e| bad(e.to_string()))?;
        if read != rest.len() {
            return Err(bad(format!("{} bytes after the state", rest.len() - read)));
        }
        let mut events = Vec::with_capacity(stored.events.len());
        for (id, locks, Owned(b)) in stored.events {
            events.push(Event {
                id,
                value: values.deserialize(store, &b)?,
                bytes: Some(Bytes::from(b)),
                locks,
            });
        }
        let mut waiting = Vec::with_capacity(stored.waiting.len());
        for (timestamp, arrival, Owned(b)) in stored.waiting {
            waiting.push(Waiting {
                timestamp,
                arrival,
                value: values.deserialize(store, &b)?,
                bytes: Some(Bytes::from(b)),
            });
        }
        Ok(KeyState {
            nfa: KeyNfa {
                partial: JavaHeap::from_array(stored.partial),
                completed: JavaHeap::from_array(stored.completed),
                buffer: SharedBuffer {
                    events,
                    nodes: stored.nodes,
                    next_seq: stored.next_seq,
                },
            },
            waiting,
            next_arrival: stored.next_arrival,
        })
    }
}
