//! One key's matcher state — its automaton state, its shared buffer and the events waiting
//! for stream time to pass them — and how it is kept in the pattern's store.
//!
//! The store's key is the record key's bytes (the stream's key serde); its value, the
//! changelog's layout, is one format byte and then the state in bincode's standard encoding.
//! Format 1, the general automaton's state: the partial matches in queue order, the completed
//! matches waiting on them, the buffered events (id, lock count, value bytes in the stream's
//! value serde), the buffer's nodes (id, lock count, edges back with their versions and lock
//! counts), the next event number, the events waiting for stream time (timestamp, arrival
//! number, value bytes) and the next arrival number. Format 2, a sequence's state (see
//! [`super::sequence`]): its runs, earliest started first, each the events it took (id, value
//! bytes), then the next event number, the waiting events and the next arrival number as in
//! format 1. A key whose state is back to its start is deleted.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
#[cfg(test)]
use serde::{Serialize, Serializer};

use super::automaton::Nfa;
use super::buffer::{Event, EventId, Node, NodeId, Seq, SharedBuffer};
use super::engine::Automaton;
use super::heap::JavaHeap;
use super::nfa::{Computation, KeyNfa};
use super::sequence::{Run, Runs, Taken};
use super::version::Version;
use crate::log::Timestamp;
use crate::serde::{Serde, SerdeError};
use crate::streams::store::small_bytes::SmallValue;

/// The format byte of the general automaton's states.
const FORMAT: u8 = 1;
/// The format byte of a sequence's states.
const FORMAT_SEQUENCE: u8 = 2;
/// The most a stored state may decode to.
const LIMIT: usize = 64 << 20;

/// An event waiting for stream time to reach it (out of order within the allowed lateness).
pub(crate) struct Waiting<V> {
    pub(crate) timestamp: Timestamp,
    pub(crate) arrival: u64,
    pub(crate) value: V,
    pub(crate) bytes: Option<SmallValue>,
}

/// One key's state.
pub(crate) struct KeyState<V> {
    pub(crate) automaton: Automaton<V>,
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

    /// Back to a new key's state (the start state alone), the vectors' room kept.
    pub(crate) fn clear(&mut self, nfa: &Nfa<V>)
    where
        V: Clone,
    {
        match &mut self.automaton {
            Automaton::General(key) => key.reset(nfa),
            Automaton::Sequence(runs) => runs.clear(),
        }
        self.waiting.clear();
        self.next_arrival = 0;
    }

    /// The timestamp and arrival of the first waiting event.
    pub(crate) fn first_waiting(&self) -> Option<(Timestamp, u64)> {
        self.waiting.first().map(|w| (w.timestamp, w.arrival))
    }
}

/// Bytes written as bincode bytes (a length, then the bytes), not as a sequence of numbers.
#[cfg(test)]
struct Raw<'a>(&'a [u8]);

#[cfg(test)]
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

/// The layout as a serde type: what the hand-written encoder must write, byte for byte (a
/// test checks it).
#[cfg(test)]
#[derive(Serialize)]
struct StoredRef<'a> {
    partial: &'a [Computation],
    completed: &'a [Computation],
    events: Vec<(EventId, u32, Raw<'a>)>,
    nodes: &'a [Node],
    next_seq: Seq,
    waiting: Vec<(Timestamp, u64, Raw<'a>)>,
    next_arrival: u64,
}

/// A sequence's layout (format 2), as read back.
#[derive(Deserialize)]
struct StoredRuns {
    runs: Vec<Vec<(EventId, Owned)>>,
    next_seq: Seq,
    waiting: Vec<(Timestamp, u64, Owned)>,
    next_arrival: u64,
}

/// A sequence's layout as a serde type, for the test that the encoder writes it.
#[cfg(test)]
#[derive(Serialize)]
struct StoredRunsRef<'a> {
    runs: Vec<Vec<(EventId, Raw<'a>)>>,
    next_seq: Seq,
    waiting: Vec<(Timestamp, u64, Raw<'a>)>,
    next_arrival: u64,
}

#[derive(Deserialize)]
struct Stored {
    partial: Vec<Computation>,
    completed: Vec<Computation>,
    events: Vec<(EventId, u32, Owned)>,
    nodes: Vec<Node>,
    next_seq: Seq,
    waiting: Vec<(Timestamp, u64, Owned)>,
    next_arrival: u64,
}

/// Writes the state as bincode's standard configuration does (little-endian, integers as
/// varints, signed ones zigzagged, lengths before sequences and bytes, a byte before an
/// option), without serde's per-field dispatch or the intermediate vectors it would need.
struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn unsigned(&mut self, v: u64) {
        match v {
            0..=250 => self.0.push(v as u8),
            251..=0xffff => {
                self.0.push(251);
                self.0.extend_from_slice(&(v as u16).to_le_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                self.0.push(252);
                self.0.extend_from_slice(&(v as u32).to_le_bytes());
            }
            _ => {
                self.0.push(253);
                self.0.extend_from_slice(&v.to_le_bytes());
            }
        }
    }

    fn signed(&mut self, v: i64) {
        self.unsigned(((v << 1) ^ (v >> 63)) as u64);
    }

    fn len(&mut self, n: usize) {
        self.unsigned(n as u64);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.0.extend_from_slice(b);
    }

    fn event_id(&mut self, id: EventId) {
        self.signed(id.timestamp);
        self.unsigned(u64::from(id.seq.number()));
    }

    fn node_id(&mut self, id: NodeId) {
        self.event_id(id.event);
        self.unsigned(u64::from(id.page));
    }

    fn option_node(&mut self, id: Option<NodeId>) {
        match id {
            None => self.0.push(0),
            Some(id) => {
                self.0.push(1);
                self.node_id(id);
            }
        }
    }

    fn version(&mut self, v: &Version) {
        let digits = v.digits();
        self.len(digits.len());
        for &d in digits {
            self.unsigned(u64::from(d));
        }
    }

    fn computations(&mut self, all: &[Computation]) {
        self.len(all.len());
        for c in all {
            self.unsigned(u64::from(c.state));
            self.option_node(c.previous);
            self.version(&c.version);
            self.signed(c.start_timestamp);
            self.signed(c.previous_timestamp);
            match c.start_event {
                None => self.0.push(0),
                Some(e) => {
                    self.0.push(1);
                    self.event_id(e);
                }
            }
        }
    }

    /// The general automaton's part of a format 1 state.
    fn general<V>(&mut self, nfa: &KeyNfa<V>) {
        self.computations(nfa.partial.as_slice());
        self.computations(nfa.completed.as_slice());
        self.len(nfa.buffer.events.len());
        for e in &nfa.buffer.events {
            self.event_id(e.id);
            self.unsigned(u64::from(e.locks));
            self.bytes(raw(&e.bytes));
        }
        self.len(nfa.buffer.nodes.len());
        for n in &nfa.buffer.nodes {
            self.node_id(n.id);
            self.unsigned(u64::from(n.locks));
            self.len(n.edges.len());
            for edge in &n.edges {
                self.option_node(edge.target);
                self.version(&edge.version);
                self.unsigned(u64::from(edge.locks));
            }
        }
        self.unsigned(u64::from(nfa.buffer.next_seq.number()));
    }
}

fn raw(bytes: &Option<SmallValue>) -> &[u8] {
    bytes.as_ref().map_or(&[], SmallValue::as_slice)
}

/// Serializes `value` once, at the end of `out` and then apart (inline when short), so that
/// later writes of the state copy its bytes.
fn bytes_of<V: 'static>(
    values: &dyn Serde<Value = V>,
    store: &str,
    value: &V,
    bytes: &mut Option<SmallValue>,
    out: &mut Vec<u8>,
) -> Result<(), SerdeError> {
    if bytes.is_none() {
        let at = out.len();
        values.serialize_into(store, value, out)?;
        *bytes = Some(SmallValue::copy(&out[at..]));
        out.truncate(at);
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
        for w in &mut self.waiting {
            bytes_of(values, store, &w.value, &mut w.bytes, out)?;
        }
        match &mut self.automaton {
            Automaton::General(nfa) => {
                for e in &mut nfa.buffer.events {
                    bytes_of(values, store, &e.value, &mut e.bytes, out)?;
                }
                out.push(FORMAT);
                Writer(out).general(nfa);
            }
            Automaton::Sequence(runs) => {
                for taken in runs.runs.iter_mut().flat_map(|r| r.iter_mut()) {
                    bytes_of(values, store, &taken.value, &mut taken.bytes, out)?;
                }
                out.push(FORMAT_SEQUENCE);
                let w = &mut Writer(out);
                w.len(runs.runs.len());
                for run in &runs.runs {
                    w.len(run.len());
                    for taken in run {
                        w.event_id(taken.id);
                        w.bytes(raw(&taken.bytes));
                    }
                }
                w.unsigned(u64::from(runs.next_seq.number()));
            }
        }
        let w = &mut Writer(out);
        w.len(self.waiting.len());
        for waiting in &self.waiting {
            w.signed(waiting.timestamp);
            w.unsigned(waiting.arrival);
            w.bytes(raw(&waiting.bytes));
        }
        w.unsigned(self.next_arrival);
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
        let value = |b: &[u8]| -> Result<(V, Option<SmallValue>), SerdeError> {
            Ok((values.deserialize(store, b)?, Some(SmallValue::copy(b))))
        };
        let (automaton, waiting, next_arrival) = match format {
            FORMAT => {
                let stored: Stored = read(rest).map_err(bad)?;
                let mut events = Vec::with_capacity(stored.events.len());
                for (id, locks, Owned(b)) in stored.events {
                    let (value, bytes) = value(&b)?;
                    events.push(Event {
                        id,
                        value,
                        bytes,
                        locks,
                    });
                }
                let nfa = KeyNfa {
                    partial: JavaHeap::from_array(stored.partial),
                    completed: JavaHeap::from_array(stored.completed),
                    buffer: SharedBuffer {
                        events,
                        nodes: stored.nodes,
                        next_seq: stored.next_seq,
                    },
                };
                (Automaton::General(nfa), stored.waiting, stored.next_arrival)
            }
            FORMAT_SEQUENCE => {
                let stored: StoredRuns = read(rest).map_err(bad)?;
                let mut runs = Runs::default();
                for run in stored.runs {
                    let mut taken = Run::new();
                    for (id, Owned(b)) in run {
                        let (value, bytes) = value(&b)?;
                        taken.push(Taken { id, value, bytes });
                    }
                    runs.runs.push(taken);
                }
                runs.next_seq = stored.next_seq;
                (
                    Automaton::Sequence(runs),
                    stored.waiting,
                    stored.next_arrival,
                )
            }
            other => return Err(bad(format!("unknown format {other}"))),
        };
        let mut held = Vec::with_capacity(waiting.len());
        for (timestamp, arrival, Owned(b)) in waiting {
            let (value, bytes) = value(&b)?;
            held.push(Waiting {
                timestamp,
                arrival,
                value,
                bytes,
            });
        }
        Ok(KeyState {
            automaton,
            waiting: held,
            next_arrival,
        })
    }
}

/// A layout read whole from `bytes` (within the size limit), nothing left over.
fn read<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let config = bincode::config::standard().with_limit::<LIMIT>();
    let (stored, read): (T, usize) =
        bincode::serde::decode_from_slice(bytes, config).map_err(|e| e.to_string())?;
    if read != bytes.len() {
        return Err(format!("{} bytes after the state", bytes.len() - read));
    }
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serde::StringSerde;
    use crate::streams::pattern::compile;
    use crate::streams::pattern::nfa::Scratch;
    use crate::streams::pattern::sequence::Sequence;
    use crate::streams::pattern::Pattern;

    fn waiting(state: &KeyState<String>) -> Vec<(Timestamp, u64, Raw<'_>)> {
        state
            .waiting
            .iter()
            .map(|w| (w.timestamp, w.arrival, Raw(raw(&w.bytes))))
            .collect()
    }

    /// Encodes `state`, checks the bytes against bincode's encoding of `theirs` after
    /// `format`, and that they read back to a state that encodes alike.
    fn round_trip(mut state: KeyState<String>, theirs: impl Fn(&KeyState<String>) -> Vec<u8>) {
        let mut ours = Vec::new();
        state.encode(&StringSerde, "s", &mut ours).unwrap();
        assert_eq!(ours, theirs(&state));
        let mut back = KeyState::decode(&StringSerde, "s", &ours).unwrap();
        let mut again = Vec::new();
        back.encode(&StringSerde, "s", &mut again).unwrap();
        assert_eq!(again, ours);
        assert!(KeyState::<String>::decode(&StringSerde, "s", &ours[..ours.len() - 1]).is_err());
        assert!(KeyState::<String>::decode(&StringSerde, "s", &[3]).is_err());
    }

    fn bincode_of(format: u8, layout: &impl Serialize) -> Vec<u8> {
        let mut bytes = vec![format];
        bincode::serde::encode_into_std_write(layout, &mut bytes, bincode::config::standard())
            .unwrap();
        bytes
    }

    /// The hand-written encoder writes exactly what bincode writes for the serde layout of
    /// the general automaton's state, and a state read back encodes to the same bytes.
    #[test]
    fn the_encoder_writes_bincodes_layout_and_states_read_back_alike() {
        let pattern = Pattern::<String>::begin("a")
            .where_(|e| e.starts_with('a'))
            .followed_by_any("b")
            .where_(|e| e.starts_with('b'))
            .one_or_more()
            .within(std::time::Duration::from_secs(1_000_000));
        let nfa = compile(&pattern).unwrap();
        let mut state = KeyState {
            automaton: Automaton::new(&nfa, None),
            waiting: Vec::new(),
            next_arrival: 0,
        };
        let mut scratch = Scratch::default();
        for (i, e) in ["a", "b", "x", "a", "b", "b"].iter().enumerate() {
            let t = i64::try_from(i).unwrap() * 70_000 - 300;
            state
                .automaton
                .process(&nfa, None, &mut scratch, &e.to_string(), t);
        }
        state.wait("later".to_string(), 9_000_000_000);
        state.wait("b-late".to_string(), -5);
        round_trip(state, |state| {
            let Automaton::General(nfa) = &state.automaton else {
                panic!("a general automaton's state");
            };
            assert!(nfa.buffer.events.len() > 2 && nfa.buffer.nodes.len() > 2);
            let stored = StoredRef {
                partial: nfa.partial.as_slice(),
                completed: nfa.completed.as_slice(),
                events: nfa
                    .buffer
                    .events
                    .iter()
                    .map(|e| (e.id, e.locks, Raw(raw(&e.bytes))))
                    .collect(),
                nodes: &nfa.buffer.nodes,
                next_seq: nfa.buffer.next_seq,
                waiting: waiting(state),
                next_arrival: state.next_arrival,
            };
            bincode_of(FORMAT, &stored)
        });
    }

    /// A sequence's state (format 2) likewise.
    #[test]
    fn a_sequences_state_is_written_in_its_own_layout_and_read_back_alike() {
        let starts = |c: char| move |e: &String| e.starts_with(c);
        let pattern = Pattern::<String>::begin("h")
            .where_(starts('h'))
            .next("r")
            .where_(starts('r'))
            .next("h2")
            .where_(starts('h'))
            .next("r2")
            .where_(starts('r'))
            .within(std::time::Duration::from_secs(600));
        let nfa = compile(&pattern).unwrap();
        let sequence = Sequence::of(&nfa).unwrap();
        let mut state = KeyState {
            automaton: Automaton::new(&nfa, Some(&sequence)),
            waiting: Vec::new(),
            next_arrival: 0,
        };
        let mut scratch = Scratch::default();
        for (i, e) in ["h1", "r1", "h2"].iter().enumerate() {
            let t = i64::try_from(i).unwrap() * 70_000 + 1_700_000_000_000;
            let found =
                state
                    .automaton
                    .process(&nfa, Some(&sequence), &mut scratch, &e.to_string(), t);
            assert!(found.is_empty());
        }
        state.wait("r-late".to_string(), 1_700_000_500_000);
        round_trip(state, |state| {
            let Automaton::Sequence(runs) = &state.automaton else {
                panic!("a sequence's state");
            };
            assert_eq!(runs.runs.len(), 2, "h1 r1 h2, and h2");
            let stored = StoredRunsRef {
                runs: runs
                    .runs
                    .iter()
                    .map(|r| r.iter().map(|t| (t.id, Raw(raw(&t.bytes)))).collect())
                    .collect(),
                next_seq: runs.next_seq,
                waiting: waiting(state),
                next_arrival: state.next_arrival,
            };
            bincode_of(FORMAT_SEQUENCE, &stored)
        });
    }
}
