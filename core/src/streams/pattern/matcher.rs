//! The pattern processor: runs a compiled pattern per key over a keyed stream in event time.
//! Records are matched in timestamp order (ties in arrival order) once stream time minus the
//! allowed lateness has reached them; records older than that are dropped and counted. Each
//! key's state lives in the pattern's key-value store (so it has a changelog, is restored and
//! is covered by exactly-once like any store) and is read back whole when the task starts.

use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use bytes::Bytes;

use super::automaton::Nfa;
use super::engine::Automaton;
use super::nfa::Scratch;
use super::output::PatternMatch;
use super::sequence::Sequence;
use super::state::KeyState;
use super::timeline::Timeline;
use crate::log::Timestamp;
use crate::serde::{Serde, SerdeError};
use crate::streams::processor::{Data, KeyValueStoreHandle, Processor, ProcessorContext};
use crate::streams::record::Record;
use crate::streams::store::small_bytes::SmallKey;
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
    /// The time of the key's entry in the deadline index: never later than its deadline.
    scheduled: Option<Timestamp>,
    first_waiting: Option<(Timestamp, u64)>,
}

/// The processor's settings and its store.
struct Shared<K, V> {
    nfa: Arc<Nfa<V>>,
    /// The pattern as a sequence, when it is one (run without the general automaton).
    sequence: Option<Sequence<V>>,
    store: String,
    keys: Arc<dyn Serde<Value = K>>,
    values: Arc<dyn Serde<Value = V>>,
    lateness: i64,
    outputs: Outputs,
    handle: Option<KeyValueStoreHandle<Bytes, Bytes>>,
    /// Where a record's key and a key's state are serialized.
    key: Vec<u8>,
    scratch: Vec<u8>,
    automaton: Scratch,
    /// States of keys gone back to their start, emptied, their room kept for new keys.
    spare: Vec<KeyState<V>>,
}

/// The most emptied key states kept for reuse.
const SPARE: usize = 64;

/// When keys need stream time's attention: when their first partial match times out and
/// when their first waiting event is due, earliest first. Entries are never searched for and
/// removed: a key's deadline entry is added when its deadline comes sooner than the one
/// scheduled (a later deadline is rescheduled when the earlier entry comes up), and an entry
/// no longer its key's is skipped.
#[derive(Default)]
struct Index {
    deadlines: Timeline<SmallKey>,
    waiting: BinaryHeap<Reverse<(Timestamp, u64, SmallKey)>>,
}

impl Index {
    /// Brings the index up to date with `entry`'s state.
    fn update<K, V: Clone>(&mut self, nfa: &Nfa<V>, key: &SmallKey, entry: &mut Keyed<K, V>) {
        entry.deadline = entry.state.automaton.deadline(nfa);
        if let Some(d) = entry.deadline {
            if entry.scheduled.is_none_or(|s| d < s) {
                entry.scheduled = Some(d);
                self.deadlines.push(d, key.clone());
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

    /// Whether a key's waiting event or deadline is due at `watermark`.
    fn due(&self, watermark: Timestamp) -> bool {
        self.deadlines.first().is_some_and(|t| t <= watermark)
            || self
                .waiting
                .peek()
                .is_some_and(|Reverse((t, _, _))| *t <= watermark)
    }
}

pub(crate) struct Matcher<K, V> {
    shared: Shared<K, V>,
    /// The keys' states by the keys' bytes, held inline when short, so that a lookup
    /// compares keys without following a pointer.
    states: HashMap<SmallKey, Keyed<K, V>, BuildHasherDefault<KeyHasher>>,
    index: Index,
    observed: Option<Timestamp>,
    touched: Vec<SmallKey>,
}

impl<K: Data, V: Data> Shared<K, V> {
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

    /// Moves the key to `timestamp` (timing out what its window passed), then feeds it
    /// `value`.
    fn run(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
        entry: &mut Keyed<K, V>,
        value: &V,
        timestamp: Timestamp,
    ) -> Result<(), StreamsError> {
        self.advance(ctx, entry, timestamp)?;
        let found = entry.state.automaton.process(
            &self.nfa,
            self.sequence.as_ref(),
            &mut self.automaton,
            value,
            timestamp,
        );
        for m in found {
            self.emit(ctx, &entry.key, m, timestamp, false)?;
        }
        Ok(())
    }

    /// Moves the key to `timestamp`: its timed-out partial matches go, and a pending match
    /// waiting for its window completes.
    fn advance(
        &self,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
        entry: &mut Keyed<K, V>,
        timestamp: Timestamp,
    ) -> Result<(), StreamsError> {
        let (matches, timed_out) = entry.state.automaton.advance_time(
            &self.nfa,
            self.sequence.as_ref(),
            timestamp,
            self.timeouts(),
        );
        for m in matches {
            self.emit(ctx, &entry.key, m, timestamp, false)?;
        }
        for (m, at) in timed_out {
            self.emit(ctx, &entry.key, m, at, true)?;
        }
        Ok(())
    }

    /// Writes the key's state to the store; `true` when the key is back at its start and its
    /// entry deleted (the caller drops it, with [`Shared::recycle`]).
    fn write(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
        key: &SmallKey,
        entry: &mut Keyed<K, V>,
    ) -> Result<bool, StreamsError> {
        let Some(handle) = &self.handle else {
            return Ok(false);
        };
        if entry.state.automaton.is_idle(&self.nfa) && entry.state.waiting.is_empty() {
            if entry.stored {
                ctx.key_value_store(handle)
                    .bytes()
                    .put_slice(key.as_slice(), None);
            }
            return Ok(true);
        }
        self.scratch.clear();
        entry
            .state
            .encode(&*self.values, &self.store, &mut self.scratch)?;
        ctx.key_value_store(handle)
            .bytes()
            .put_slice(key.as_slice(), Some(&self.scratch));
        entry.stored = true;
        Ok(false)
    }

    /// Keeps the state of a key gone back to its start for a new key.
    fn recycle(&mut self, entry: Keyed<K, V>) {
        if self.spare.len() < SPARE {
            let mut state = entry.state;
            state.clear(&self.nfa);
            self.spare.push(state);
        }
    }

    /// A new key's state: the start state alone.
    fn fresh(&mut self) -> KeyState<V> {
        self.spare.pop().unwrap_or_else(|| KeyState {
            automaton: Automaton::new(&self.nfa, self.sequence.as_ref()),
            waiting: Vec::new(),
            next_arrival: 0,
        })
    }
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
            shared: Shared {
                sequence: Sequence::of(&nfa),
                nfa,
                store,
                keys,
                values,
                lateness,
                outputs,
                handle: None,
                key: Vec::new(),
                scratch: Vec::new(),
                automaton: Scratch::default(),
                spare: Vec::new(),
            },
            states: HashMap::default(),
            index: Index::default(),
            observed: None,
            touched: Vec::new(),
        }
    }

    /// Matches the waiting events stream time has reached, oldest first.
    fn release_waiting(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
        watermark: Timestamp,
    ) -> Result<(), StreamsError> {
        while let Some(Reverse((timestamp, arrival, key))) = self.index.waiting.peek().cloned() {
            if timestamp > watermark {
                break;
            }
            self.index.waiting.pop();
            let Some(entry) = self.states.get_mut(&key) else {
                continue;
            };
            if entry.first_waiting != Some((timestamp, arrival)) {
                continue;
            }
            while entry
                .state
                .waiting
                .first()
                .is_some_and(|w| w.timestamp <= watermark)
            {
                let w = entry.state.waiting.remove(0);
                self.shared.run(ctx, entry, &w.value, w.timestamp)?;
            }
            self.index.update(&self.shared.nfa, &key, entry);
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
        while let Some((deadline, key)) = self.index.deadlines.pop_until(watermark) {
            let Some(entry) = self.states.get_mut(&key) else {
                continue;
            };
            if entry.scheduled != Some(deadline) {
                continue;
            }
            entry.scheduled = None;
            match entry.deadline {
                Some(d) if d <= watermark => {}
                Some(d) => {
                    // The deadline moved later since it was scheduled.
                    entry.scheduled = Some(d);
                    self.index.deadlines.push(d, key);
                    continue;
                }
                None => continue,
            }
            self.shared.advance(ctx, entry, watermark)?;
            self.index.update(&self.shared.nfa, &key, entry);
            self.touched.push(key);
        }
        Ok(())
    }

    /// Writes the states of the keys stream time moved, deleting those back at their start.
    fn persist(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
    ) -> Result<(), StreamsError> {
        let mut touched = std::mem::take(&mut self.touched);
        for key in touched.drain(..) {
            let Some(entry) = self.states.get_mut(&key) else {
                continue;
            };
            if self.shared.write(ctx, &key, entry)? {
                if let Some(entry) = self.states.remove(&key) {
                    self.shared.recycle(entry);
                }
            }
        }
        self.touched = touched;
        Ok(())
    }

    fn restore(&mut self, key: &[u8], bytes: &[u8]) -> Result<(), SerdeError> {
        let shared = &self.shared;
        let state = KeyState::decode(&*shared.values, &shared.store, bytes)?;
        if !state.automaton.fits(&shared.nfa, shared.sequence.as_ref()) {
            return Err(SerdeError::new(
                "pattern state",
                &shared.store,
                "a state the pattern does not have (was the pattern changed?)",
            ));
        }
        let mut entry = Keyed {
            key: shared.keys.deserialize(&shared.store, key)?,
            state,
            stored: true,
            deadline: None,
            scheduled: None,
            first_waiting: None,
        };
        let key = SmallKey::copy(key);
        self.index.update(&shared.nfa, &key, &mut entry);
        self.states.insert(key, entry);
        Ok(())
    }
}

impl<K: Data, V: Data> Processor<K, V, K, PatternMatch<V>> for Matcher<K, V> {
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
    ) -> Result<(), StreamsError> {
        let handle = ctx.key_value_store_handle::<Bytes, Bytes>(&self.shared.store)?;
        // What a restored store holds is every key's state.
        for (key, value) in ctx.key_value_store(&handle).all()? {
            self.restore(&key, &value)?;
        }
        self.shared.handle = Some(handle);
        Ok(())
    }

    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K, PatternMatch<V>>,
    ) -> Result<(), StreamsError> {
        let timestamp = r.timestamp;
        let lateness = self.shared.lateness;
        if let Some(observed) = self.observed {
            if timestamp < observed.saturating_sub(lateness) {
                ctx.record_dropped();
                return Ok(());
            }
        }
        let observed = self.observed.map_or(timestamp, |o| o.max(timestamp));
        self.observed = Some(observed);
        let watermark = observed.saturating_sub(lateness);
        let shared = &mut self.shared;
        shared.key.clear();
        shared
            .keys
            .serialize_into(&shared.store, &r.key, &mut shared.key)?;
        let key = SmallKey::copy(&shared.key);
        let entry = match self.states.entry(key.clone()) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(vacant) => vacant.insert(Keyed {
                key: r.key,
                state: shared.fresh(),
                stored: false,
                deadline: None,
                scheduled: None,
                first_waiting: None,
            }),
        };
        if timestamp <= watermark && entry.state.waiting.is_empty() {
            shared.run(ctx, entry, &r.value, timestamp)?;
        } else {
            entry.state.wait(r.value, timestamp);
        }
        self.index.update(&shared.nfa, &key, entry);
        if shared.write(ctx, &key, entry)? {
            if let Some(entry) = self.states.remove(&key) {
                shared.recycle(entry);
            }
        }
        if self.index.due(watermark) {
            self.release_waiting(ctx, watermark)?;
            self.expire(ctx, watermark)?;
            self.persist(ctx)?;
        }
        Ok(())
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
