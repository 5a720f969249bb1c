//! The pattern processor: runs a compiled pattern per key over a keyed stream in event time.
//! Records are matched in timestamp order (ties in arrival order) once stream time minus the
//! allowed lateness has reached them; records older than that are dropped and counted. Each
//! key's state lives in the pattern's key-value store (so it has a changelog, is restored and
//! is covered by exactly-once like any store) and is read back whole when the task starts.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use bytes::Bytes;

use super::compiler::Nfa;
use super::nfa::KeyNfa;
use super::output::PatternMatch;
use super::state::KeyState;
use crate::log::Timestamp;
use crate::serde::{Serde, SerdeError};
use crate::streams::processor::{Data, KeyValueStoreHandle, Processor, ProcessorContext};
use crate::streams::record::Record;
use crate::streams::StreamsError;

/// Where the processor sends what it finds.
#[derive(Clone)]
pub(crate) enum Outputs {
    /// Matches to every child; no timeouts.
    Matches,
    /// Matches and timed-out partial matches to these children.
    Split { matches: String, timeouts: String },
}

struct Keyed<K, V> {
    key: K,
    state: KeyState<V>,
    /// Whether the store holds a value for the key.
    stored: bool,
    deadline: Option<Timestamp>,
    first_waiting: Option<(Timestamp, u64)>,
}

pub(crate) struct Matcher<K, V> {
    pub(crate) nfa: Arc<Nfa<V>>,
    pub(crate) store: String,
    pub(crate) keys: Arc<dyn Serde<Value = K>>,
    pub(crate) values: Arc<dyn Serde<Value = V>>,
    pub(crate) lateness: i64,
    pub(crate) outputs: Outputs,
    states: HashMap<Bytes, Keyed<K, V>, BuildHasherDefault<KeyHasher>>,
    /// When keys' first partial matches time out, earliest first. An entry whose time is no
    /// longer its key's deadline is stale and skipped: entries are added when a deadline
    /// changes, never searched for and removed.
    deadlines: BinaryHeap<Reverse<(Timestamp, Bytes)>>,
    /// When keys' first waiting events are due, earliest first; stale entries as above.
    waiting: BinaryHeap<Reverse<(Timestamp, u64, Bytes)>>,
    observed: Option<Timestamp>,
    handle: Option<KeyValueStoreHandle<Bytes, Bytes>>,
    touched: Vec<Bytes>,
    scratch: Vec<u8>,
}

impl<K: Data, V: Data> Matcher<K, V> {
    pub(crate) fn new(
        nfa: Arc<Nfa<V>>,
        store: String,
        keys: Arc<dyn Serde<Value = K>>,
        values: Arc<dyn Serde<Value = V>>,
        lateness: i64,
        outputs: Outputs,
    ) -> Self {
        Matcher {
            nfa,
            store,
            keys,
            values,
            lateness,
            outputs,
            states: HashMap::default(),
            deadlines: BinaryHeap::new(),
            waiting: BinaryHeap::new(),
            observed: None,
            handle: None,
            touched: Vec::new(),
            scratch: Vec::new(),
        }
    }

    fn timeouts(&self) -> bool {
        matches!(self.outputs, Outputs::Split { .. })
    }

    fn emit(
        &self,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
        key: &K,
        found: PatternMatch<V>,
        timestamp: Timestamp,
        timeout: bool,
    ) -> Result<(), StreamsError> {
        let record = Record {
            key: key.clone(),
            value: found,
            timestamp,
            headers: Vec::new(),
        };
        match &self.outputs {
            Outputs::Matches => ctx.forward(record),
            Outputs::Split { matches, timeouts } => {
                let child = if timeout { timeouts } else { matches };
                ctx.forward_to(child, record)?;
            }
        }
        Ok(())
    }

    /// Brings the time indexes up to date with the key's state: when its first partial match
    /// times out and when its first waiting event is due.
    fn reindex(&mut self, key: &Bytes) {
        let Some(entry) = self.states.get_mut(key) else {
            return;
        };
        let deadline = entry.state.nfa.deadline(&self.nfa);
        if deadline != entry.deadline {
            entry.deadline = deadline;
            if let Some(d) = deadline {
                self.deadlines.push(Reverse((d, key.clone())));
            }
        }
        let first_waiting = entry.state.first_waiting();
        if first_waiting != entry.first_waiting {
            entry.first_waiting = first_waiting;
            if let Some((t, a)) = first_waiting {
                self.waiting.push(Reverse((t, a, key.clone())));
            }
        }
    }

    /// Moves the key to `timestamp` and feeds it `value`.
    fn run(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
        key: &Bytes,
        value: &V,
        timestamp: Timestamp,
    ) -> Result<(), StreamsError> {
        let timeouts = self.timeouts();
        let nfa = self.nfa.clone();
        let Some(entry) = self.states.get_mut(key) else {
            return Ok(());
        };
        let (matches, timed_out) = entry.state.nfa.advance_time(&nfa, timestamp, timeouts);
        let found = entry.state.nfa.process(&nfa, value, timestamp);
        let k = entry.key.clone();
        for m in matches {
            self.emit(ctx, &k, m, timestamp, false)?;
        }
        for (m, at) in timed_out {
            self.emit(ctx, &k, m, at, true)?;
        }
        for m in found {
            self.emit(ctx, &k, m, timestamp, false)?;
        }
        self.reindex(key);
        Ok(())
    }

    /// Matches the waiting events stream time has reached, oldest first.
    fn release_waiting(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
        watermark: Timestamp,
    ) -> Result<(), StreamsError> {
        while let Some(Reverse((timestamp, arrival, key))) = self.waiting.peek().cloned() {
            if timestamp > watermark {
                break;
            }
            self.waiting.pop();
            let current = self.states.get(&key).and_then(|e| e.first_waiting);
            if current != Some((timestamp, arrival)) {
                continue;
            }
            while let Some(entry) = self.states.get_mut(&key) {
                if entry
                    .state
                    .waiting
                    .first()
                    .is_none_or(|w| w.timestamp > watermark)
                {
                    break;
                }
                let w = entry.state.waiting.remove(0);
                self.run(ctx, &key, &w.value, w.timestamp)?;
            }
            self.touched.push(key);
        }
        Ok(())
    }

    /// Times out the partial matches whose window stream time has passed.
    fn expire(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
        watermark: Timestamp,
    ) -> Result<(), StreamsError> {
        let timeouts = self.timeouts();
        let nfa = self.nfa.clone();
        while let Some(Reverse((deadline, key))) = self.deadlines.peek().cloned() {
            if deadline > watermark {
                break;
            }
            self.deadlines.pop();
            let Some(entry) = self.states.get_mut(&key) else {
                continue;
            };
            if entry.deadline != Some(deadline) {
                continue;
            }
            entry.deadline = None;
            let (matches, timed_out) = entry.state.nfa.advance_time(&nfa, watermark, timeouts);
            let k = entry.key.clone();
            for m in matches {
                self.emit(ctx, &k, m, watermark, false)?;
            }
            for (m, at) in timed_out {
                self.emit(ctx, &k, m, at, true)?;
            }
            self.reindex(&key);
            self.touched.push(key);
        }
        Ok(())
    }

    /// Writes the touched keys' states to the store, deleting those back to the start state.
    fn persist(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
    ) -> Result<(), StreamsError> {
        let Some(handle) = self.handle.clone() else {
            return Ok(());
        };
        let mut touched = std::mem::take(&mut self.touched);
        for key in touched.drain(..) {
            let Some(entry) = self.states.get_mut(&key) else {
                continue;
            };
            if entry.state.nfa.is_idle(&self.nfa) && entry.state.waiting.is_empty() {
                if entry.stored {
                    ctx.key_value_store(&handle).put(&key, None)?;
                }
                self.states.remove(&key);
                continue;
            }
            self.scratch.clear();
            entry
                .state
                .encode(&*self.values, &self.store, &mut self.scratch)?;
            let value = Bytes::copy_from_slice(&self.scratch);
            ctx.key_value_store(&handle).put(&key, Some(&value))?;
            entry.stored = true;
        }
        self.touched = touched;
        Ok(())
    }

    fn restore(&mut self, key: Bytes, bytes: &[u8]) -> Result<(), SerdeError> {
        let state = KeyState::decode(&*self.values, &self.store, bytes)?;
        let states = self.nfa.states.len();
        let known = |c: &super::nfa::Computation| usize::from(c.state) < states;
        if !state.nfa.partial.iter().all(known) || !state.nfa.completed.iter().all(known) {
            return Err(SerdeError::new(
                "pattern state",
                &self.store,
                "a state the pattern does not have (was the pattern changed?)",
            ));
        }
        let k = self.keys.deserialize(&self.store, &key)?;
        self.states.insert(
            key.clone(),
            Keyed {
                key: k,
                state,
                stored: true,
                deadline: None,
                first_waiting: None,
            },
        );
        self.reindex(&key);
        Ok(())
    }
}

impl<K: Data, V: Data> Processor<K, V, K, PatternMatch<V>> for Matcher<K, V> {
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
    ) -> Result<(), StreamsError> {
        let handle = ctx.key_value_store_handle::<Bytes, Bytes>(&self.store)?;
        // What a restored store holds is every key's state.
        for (key, value) in ctx.key_value_store(&handle).all()? {
            self.restore(key, &value)?;
        }
        self.handle = Some(handle);
        Ok(())
    }

    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
    ) -> Result<(), StreamsError> {
        let timestamp = r.timestamp;
        if let Some(observed) = self.observed {
            if timestamp < observed.saturating_sub(self.lateness) {
                ctx.record_dropped();
                return Ok(());
            }
        }
        let observed = self.observed.map_or(timestamp, |o| o.max(timestamp));
        self.observed = Some(observed);
        let watermark = observed.saturating_sub(self.lateness);
        let key = self.keys.serialize(&self.store, &r.key)?;
        let nfa = self.nfa.clone();
        let entry = self.states.entry(key.clone()).or_insert_with(|| Keyed {
            key: r.key,
            state: KeyState {
                nfa: KeyNfa::new(&nfa),
                waiting: Vec::new(),
                next_arrival: 0,
            },
            stored: false,
            deadline: None,
            first_waiting: None,
        });
        if timestamp <= watermark && entry.state.waiting.is_empty() {
            self.run(ctx, &key, &r.value, timestamp)?;
        } else {
            entry.state.wait(r.value, timestamp);
            self.reindex(&key);
        }
        self.touched.push(key);
        self.release_waiting(ctx, watermark)?;
        self.expire(ctx, watermark)?;
        self.persist(ctx)
    }
}

/// Hashes record keys' bytes for the key map: word by word, as FxHash does, then mixed
/// with MurmurHash3's finalizer, so that keys differing only in their high bytes (big-endian
/// integers) still spread over the table's low bits.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(SEED);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(SEED);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(SEED);
    }

    /// MurmurHash3's finalizer: every input bit moves every output bit.
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::hash::{BuildHasher, BuildHasherDefault};

    use super::KeyHasher;

    #[test]
    fn big_endian_integer_keys_spread_over_the_low_bits() {
        let hasher = BuildHasherDefault::<KeyHasher>::default();
        let buckets: HashSet<u64> = (0..4096i64)
            .map(|k| hasher.hash_one(bytes::Bytes::copy_from_slice(&k.to_be_bytes())) & 4095)
            .collect();
        // 4,096 keys in 4,096 buckets: a good hash fills about 63% of them.
        assert!(buckets.len() > 2_400, "{} buckets", buckets.len());
    }
}
