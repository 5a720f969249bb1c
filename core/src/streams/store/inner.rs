//! The inner store every state store is layered over ([`BytesStore`]): serialized keys and
//! values in the byte order of the keys, with point reads and writes, range and prefix
//! iteration, and a batch of writes applied at once together with the changelog offset it
//! reaches. [`InMemoryBytesStore`] is the one in memory; the runtime's is on disk. Key-value,
//! window and session stores, change-logging, the record cache and the exactly-once write
//! buffer are all built over this trait (see [`super::layers`]).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Condvar, Mutex};

use super::small_bytes::{SeededHashing, SmallKey, SmallValue};
use super::UpdateBytes;

/// What a scan calls for each entry in key order: key and value; `false` stops the scan.
pub type Visit<'a> = dyn FnMut(&[u8], &[u8]) -> bool + 'a;

/// One write of a batch: a key and its new value, `None` deleting it.
pub type BatchWrite<'a> = (&'a [u8], Option<&'a [u8]>);

/// Writes handed to a store to apply on another thread, in key order (`None` deleting),
/// shared with the layer above, which keeps reading them until they are applied.
pub type SharedWrites = Arc<BTreeMap<Box<[u8]>, Option<Box<[u8]>>>>;

type BatchOutcome = Arc<(Mutex<Option<Result<(), String>>>, Condvar)>;

/// A batch a store applies on another thread ([`BytesStore::write_batch_later`]).
#[derive(Debug, Clone)]
pub struct PendingBatch(BatchOutcome);

/// What says a [`PendingBatch`] is applied; dropped unsaid, the batch failed.
#[derive(Debug)]
pub struct BatchDone(Option<BatchOutcome>);

impl PendingBatch {
    /// A batch not applied yet, and the means to say it is.
    pub fn new() -> (Self, BatchDone) {
        let outcome: BatchOutcome = Arc::new((Mutex::new(None), Condvar::new()));
        (Self(outcome.clone()), BatchDone(Some(outcome)))
    }

    /// How the batch went, once it is applied or failed; `None` before.
    pub fn outcome(&self) -> Option<Result<(), String>> {
        self.0 .0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until the batch is applied; why it failed, if it did.
    pub fn wait(&self) -> Result<(), String> {
        let (outcome, ready) = &*self.0;
        let mut outcome = outcome.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(result) = &*outcome {
                return result.clone();
            }
            outcome = ready.wait(outcome).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl BatchDone {
    /// Says the batch is applied, or why it is not.
    pub fn finish(mut self, result: Result<(), String>) {
        self.settle(result);
    }

    fn settle(&mut self, result: Result<(), String>) {
        if let Some(outcome) = self.0.take() {
            let (slot, ready) = &*outcome;
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            ready.notify_all();
        }
    }
}

impl Drop for BatchDone {
    fn drop(&mut self) {
        self.settle(Err("the batch was dropped before it was applied".into()));
    }
}

/// A store of serialized keys and values, scanned in the byte order of the keys: what an
/// inner store (in memory, or on disk) provides, and all it has to.
pub trait BytesStore: Send {
    /// Appends the value of `key` to `out`; `false` when there is none.
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool;

    /// Writes `value` for `key`.
    fn put(&mut self, key: &[u8], value: &[u8]);

    /// Deletes `key`.
    fn delete(&mut self, key: &[u8]);

    /// Calls `visit` for the entries with keys within the bounds, in key order, until it
    /// returns `false`. Bounds that hold no key (the start after the end) visit nothing.
    fn scan(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, visit: &mut Visit<'_>);

    /// The number of entries.
    fn len(&self) -> usize {
        let mut n = 0;
        self.scan(Bound::Unbounded, Bound::Unbounded, &mut |_, _| {
            n += 1;
            true
        });
        n
    }

    /// Whether the store holds nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads the value of `key` and writes what `update` makes of it (given the old value or
    /// `None` and a buffer, it returns whether the buffer holds a new value; `false` deletes),
    /// in one lookup where the store can.
    fn update(&mut self, key: &[u8], update: &mut UpdateBytes<'_>) {
        let mut old = Vec::new();
        let had = self.get_into(key, &mut old);
        let mut new = Vec::new();
        if update(had.then_some(&old[..]), &mut new) {
            self.put(key, &new);
        } else if had {
            self.delete(key);
        }
    }

    /// Applies `writes` in order, at once where the store can (nothing of a batch survives a
    /// crash without all of it), and records that the store now holds its changelog up to
    /// `changelog_offset` (exclusive) when one is given.
    fn write_batch(
        &mut self,
        writes: &mut dyn Iterator<Item = BatchWrite<'_>>,
        changelog_offset: Option<i64>,
    );

    /// Applies `writes` with `changelog_offset` as [`write_batch`](Self::write_batch) does,
    /// on another thread where the store can: the caller keeps reading `writes` above the
    /// store, and writes nothing to it, until the [`PendingBatch`] returned is done. `None`
    /// when the batch is applied already, as by default.
    fn write_batch_later(
        &mut self,
        writes: SharedWrites,
        changelog_offset: Option<i64>,
    ) -> Option<PendingBatch> {
        let mut all = writes.iter().map(|(k, v)| (&k[..], v.as_deref()));
        self.write_batch(&mut all, changelog_offset);
        None
    }

    /// The changelog offset the store's contents reach (the next offset to restore from), as
    /// the last batch recorded it.
    fn changelog_offset(&self) -> Option<i64>;

    /// What went wrong, once a read or a write failed (a store on disk that could not read
    /// or write its files): the store is then unusable, and its task stops before any output
    /// of the records it processed since leaves. A store in memory never fails.
    fn failure(&self) -> Option<String> {
        None
    }
}

/// Whether `(from, to)` may hold a key: what ordered maps need before they are asked for a
/// range (they refuse a start after the end).
pub fn bounds_hold_keys(from: Bound<&[u8]>, to: Bound<&[u8]>) -> bool {
    match (from, to) {
        (Bound::Included(a), Bound::Included(b)) => a <= b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a < b,
        _ => true,
    }
}

/// The smallest key after every key that starts with `prefix`, or `None` when there is none
/// (the prefix is empty or all `0xff`).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Calls `visit` for the entries of `scan` whose key starts with `prefix`.
pub(crate) fn scan_prefix(
    prefix: &[u8],
    scan: impl FnOnce(Bound<&[u8]>, Bound<&[u8]>, &mut Visit<'_>),
    visit: &mut Visit<'_>,
) {
    let end = prefix_end(prefix);
    let to = match &end {
        Some(end) => Bound::Excluded(&end[..]),
        None => Bound::Unbounded,
    };
    scan(Bound::Included(prefix), to, visit);
}

/// An inner store in memory: a hash map for reads and writes, short keys and values held
/// inline, so that a write to a key the store already holds allocates nothing; and the keys
/// in order for scans, kept only while scans use them (see `KeyOrder`).
#[derive(Debug, Clone, Default)]
pub struct InMemoryBytesStore {
    values: HashMap<SmallKey, SmallValue, SeededHashing>,
    order: KeyOrder,
    changelog_offset: Option<i64>,
    /// Where updates write new values: kept, so that an update allocates nothing.
    buffer: Vec<u8>,
}

/// The keys of an in-memory store in order, for scans: built by the first scan, then kept up
/// to date by each insert and delete, and dropped when more keys than the store holds (and at
/// least [`KeyOrder::CHURN`]) came or went without a scan in between, so that a store only
/// written and read by key (a pattern's, read whole once when its task starts) does not pay
/// for an order nothing reads. A store scanned again rebuilds it in one sort.
#[derive(Debug, Clone, Default)]
struct KeyOrder {
    keys: RefCell<Option<BTreeSet<SmallKey>>>,
    /// Keys inserted or deleted since the last scan.
    churn: Cell<usize>,
}

impl KeyOrder {
    /// The fewest keys that come and go without a scan before the order is dropped.
    const CHURN: usize = 4096;

    fn insert(&mut self, key: &SmallKey, len: usize) {
        if let Some(keys) = self.keys.get_mut() {
            keys.insert(key.clone());
            self.churned(len);
        }
    }

    fn remove(&mut self, key: &[u8], len: usize) {
        if let Some(keys) = self.keys.get_mut() {
            keys.remove(key);
            self.churned(len);
        }
    }

    fn churned(&mut self, len: usize) {
        let churn = self.churn.get_mut();
        *churn += 1;
        if *churn > len.max(Self::CHURN) {
            *self.keys.get_mut() = None;
        }
    }

    /// The keys in order, built from `values`' keys when they are not kept. A scan within a
    /// scan finds them built and shares them.
    fn keys(
        &self,
        values: &HashMap<SmallKey, SmallValue, SeededHashing>,
    ) -> std::cell::Ref<'_, Option<BTreeSet<SmallKey>>> {
        self.churn.set(0);
        if self.keys.borrow().is_none() {
            *self.keys.borrow_mut() = Some(values.keys().cloned().collect());
        }
        self.keys.borrow()
    }
}

impl InMemoryBytesStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value of `key`, to change in place.
    #[inline]
    fn slot_mut(&mut self, key: &[u8]) -> Option<&mut SmallValue> {
        match SmallKey::inline(key) {
            Some(key) => self.values.get_mut(&key),
            None => self.values.get_mut(key),
        }
    }

    fn insert(&mut self, key: &[u8], value: &[u8]) {
        let key = SmallKey::copy(key);
        self.order.insert(&key, self.values.len());
        self.values.insert(key, SmallValue::copy(value));
    }
}

impl BytesStore for InMemoryBytesStore {
    #[inline]
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
        let slot = match SmallKey::inline(key) {
            Some(key) => self.values.get(&key),
            None => self.values.get(key),
        };
        match slot {
            Some(v) => {
                out.extend_from_slice(v.as_slice());
                true
            }
            None => false,
        }
    }

    fn put(&mut self, key: &[u8], value: &[u8]) {
        match self.slot_mut(key) {
            Some(old) => old.assign(value),
            None => self.insert(key, value),
        }
    }

    fn delete(&mut self, key: &[u8]) {
        if self.values.remove(key).is_some() {
            self.order.remove(key, self.values.len());
        }
    }

    fn scan(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, visit: &mut Visit<'_>) {
        if !bounds_hold_keys(from, to) {
            return;
        }
        let order = self.order.keys(&self.values);
        let Some(keys) = order.as_ref() else {
            return;
        };
        for key in keys.range::<[u8], _>((from, to)) {
            if let Some(value) = self.values.get(key.as_slice()) {
                if !visit(key.as_slice(), value.as_slice()) {
                    break;
                }
            }
        }
    }

    fn len(&self) -> usize {
        self.values.len()
    }

    fn update(&mut self, key: &[u8], update: &mut UpdateBytes<'_>) {
        // The buffer is moved out while the map is borrowed, and back at the end.
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.clear();
        match self.slot_mut(key) {
            Some(old) => {
                if update(Some(old.as_slice()), &mut buffer) {
                    old.assign(&buffer);
                } else {
                    self.delete(key);
                }
            }
            None => {
                if update(None, &mut buffer) {
                    self.insert(key, &buffer);
                }
            }
        }
        self.buffer = buffer;
    }

    fn write_batch(
        &mut self,
        writes: &mut dyn Iterator<Item = BatchWrite<'_>>,
        changelog_offset: Option<i64>,
    ) {
        for (key, value) in writes {
            match value {
                Some(value) => self.put(key, value),
                None => self.delete(key),
            }
        }
        if changelog_offset.is_some() {
            self.changelog_offset = changelog_offset;
        }
    }

    fn changelog_offset(&self) -> Option<i64> {
        self.changelog_offset
    }
}

/// An inner store in memory that tests can look into while layers own it: clones share
/// the same store. One made [`later`](Self::later) applies batches handed over with
/// `write_batch_later` on a thread of its own, a moment later, as a store on disk does.
#[cfg(test)]
#[derive(Clone, Default)]
pub(crate) struct SharedBytesStore {
    store: std::sync::Arc<std::sync::Mutex<InMemoryBytesStore>>,
    later: bool,
    /// When set, handed-over batches land only once it is opened.
    gate: Option<std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>>,
}

#[cfg(test)]
impl SharedBytesStore {
    /// A store that applies handed-over batches on another thread.
    pub(crate) fn later() -> Self {
        Self {
            later: true,
            ..Self::default()
        }
    }

    /// A store that applies handed-over batches on another thread once
    /// [`open_gate`](Self::open_gate) is called.
    pub(crate) fn gated() -> Self {
        Self {
            later: true,
            gate: Some(std::sync::Arc::default()),
            ..Self::default()
        }
    }

    /// Lets the batches handed over so far, and those to come, land.
    pub(crate) fn open_gate(&self) {
        if let Some(gate) = &self.gate {
            *gate.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
            gate.1.notify_all();
        }
    }

    /// Opens the gate when dropped: declared after a store over this one, it lets the
    /// store's batches land when a test fails before it opens the gate, so that the store's
    /// drop (which waits for them) does not hang the test.
    pub(crate) fn opened_on_drop(&self) -> impl Drop + use<> {
        struct Opener(SharedBytesStore);
        impl Drop for Opener {
            fn drop(&mut self) {
                self.0.open_gate();
            }
        }
        Opener(self.clone())
    }

    /// Whether it applies handed-over batches on another thread.
    pub(crate) fn is_later(&self) -> bool {
        self.later
    }

    fn store(&self) -> std::sync::MutexGuard<'_, InMemoryBytesStore> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every entry, in key order.
    pub(crate) fn contents(&self) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
        let mut all = std::collections::BTreeMap::new();
        self.scan(Bound::Unbounded, Bound::Unbounded, &mut |k, v| {
            all.insert(k.to_vec(), v.to_vec());
            true
        });
        all
    }
}

#[cfg(test)]
impl BytesStore for SharedBytesStore {
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
        self.store().get_into(key, out)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.store().put(key, value)
    }

    fn delete(&mut self, key: &[u8]) {
        self.store().delete(key)
    }

    fn scan(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, visit: &mut Visit<'_>) {
        self.store().scan(from, to, visit)
    }

    fn write_batch(
        &mut self,
        writes: &mut dyn Iterator<Item = BatchWrite<'_>>,
        changelog_offset: Option<i64>,
    ) {
        self.store().write_batch(writes, changelog_offset)
    }

    fn write_batch_later(
        &mut self,
        writes: SharedWrites,
        changelog_offset: Option<i64>,
    ) -> Option<PendingBatch> {
        if !self.later {
            let mut all = writes.iter().map(|(k, v)| (&k[..], v.as_deref()));
            self.write_batch(&mut all, changelog_offset);
            return None;
        }
        let (pending, done) = PendingBatch::new();
        let mut store = self.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_micros(200));
            if let Some(gate) = &store.gate {
                let mut open = gate.0.lock().unwrap_or_else(|e| e.into_inner());
                while !*open {
                    open = gate.1.wait(open).unwrap_or_else(|e| e.into_inner());
                }
            }
            let mut all = writes.iter().map(|(k, v)| (&k[..], v.as_deref()));
            store.write_batch(&mut all, changelog_offset);
            done.finish(Ok(()));
        });
        Some(pending)
    }

    fn changelog_offset(&self) -> Option<i64> {
        self.store().changelog_offset()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends_are_the_next_key_after_the_prefix() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn bounds_after_their_end_hold_nothing() {
        let mut store = InMemoryBytesStore::new();
        store.put(b"a", b"1");
        store.put(b"b", b"2");
        let mut seen = 0;
        store.scan(Bound::Included(b"b"), Bound::Included(b"a"), &mut |_, _| {
            seen += 1;
            true
        });
        store.scan(Bound::Excluded(b"a"), Bound::Excluded(b"a"), &mut |_, _| {
            seen += 1;
            true
        });
        assert_eq!(seen, 0);
        store.scan(Bound::Excluded(b"a"), Bound::Unbounded, &mut |k, _| {
            assert_eq!(k, b"b");
            seen += 1;
            true
        });
        assert_eq!(seen, 1);
    }

    fn keys(store: &InMemoryBytesStore, from: Bound<&[u8]>) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        store.scan(from, Bound::Unbounded, &mut |k, _| {
            keys.push(k.to_vec());
            true
        });
        keys
    }

    /// Scans see every key in order whether the order was kept through the writes, dropped
    /// after many writes without a scan, or rebuilt; and a scan within a scan shares it.
    #[test]
    fn scans_find_every_key_in_order_however_the_order_was_kept() {
        let mut store = InMemoryBytesStore::new();
        let key = |i: u32| i.wrapping_mul(2_654_435_761).to_be_bytes();
        store.put(&key(0), b"v");
        assert_eq!(keys(&store, Bound::Unbounded), vec![key(0).to_vec()]);
        assert!(store.order.keys.borrow().is_some());
        let n = u32::try_from(KeyOrder::CHURN).unwrap() * 3;
        for i in 1..n {
            store.put(&key(i), b"v");
            if i % 3 == 0 {
                store.delete(&key(i - 1));
            }
        }
        assert!(store.order.keys.borrow().is_none(), "dropped after churn");
        let mut expected: Vec<Vec<u8>> = (0..n)
            .filter(|i| !(i % 3 == 2 && i + 1 < n))
            .map(|i| key(i).to_vec())
            .collect();
        expected.sort();
        assert_eq!(keys(&store, Bound::Unbounded), expected);
        // Kept again once scanned: writes now update it.
        store.delete(&expected[0]);
        store.put(b"\x00", b"first");
        let mut nested = 0;
        store.scan(Bound::Unbounded, Bound::Unbounded, &mut |k, _| {
            nested += keys(&store, Bound::Excluded(k)).len();
            false
        });
        assert_eq!(nested, expected.len() - 1);
        let all = keys(&store, Bound::Unbounded);
        assert_eq!(all[0], b"\x00".to_vec());
        assert_eq!(&all[1..], &expected[1..]);
    }

    #[test]
    fn a_batch_records_the_changelog_offset_it_reaches() {
        let mut store = InMemoryBytesStore::new();
        assert_eq!(store.changelog_offset(), None);
        let writes: [BatchWrite<'_>; 2] = [(b"a", Some(b"1")), (b"a", None)];
        store.write_batch(&mut writes.into_iter(), Some(7));
        assert_eq!(store.changelog_offset(), Some(7));
        assert!(store.is_empty());
        store.write_batch(&mut std::iter::empty(), None);
        assert_eq!(store.changelog_offset(), Some(7));
    }
}
