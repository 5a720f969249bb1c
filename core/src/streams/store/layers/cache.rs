//! [`RecordCache`]: Kafka Streams' record cache (`statestore.cache.max.bytes`). Writes stay in
//! the cache, the last one per key, until the cache is flushed (at commit) or runs out of
//! room, when the least recently written entries go down to the layers below — and so to
//! the changelog — oldest first. A key updated a thousand times in a commit interval reaches
//! the changelog and the inner store once. Reads and scans see the cache over the store.
//! When its writer forwards at flush (Kafka's cache flush listener), the cache keeps what it
//! sends down, with the value it replaced, in a [`Flushed`] for the writer to forward.

use std::ops::Bound;

use super::cache_budget::CacheBudget;
use super::overlay::{merged_len, merged_scan, Overlay};
use super::use_order::{Place, UseOrder};
use super::{Checkpoint, StoreLayer};
use crate::streams::store::changelog::ChangelogBatch;
use crate::streams::store::inner::Visit;
use crate::streams::store::UpdateBytes;

/// What an entry costs beyond its key and value, as the cache counts its bytes.
const ENTRY_OVERHEAD: usize = 64;

/// One cached key.
struct CacheEntry {
    value: Option<Box<[u8]>>,
    /// Written since it last went down.
    dirty: bool,
    /// When it was last written: the order a flush forwards in.
    used: u64,
    /// Its place in [`RecordCache::by_use`].
    place: Place,
}

impl CacheEntry {
    fn size(&self, key: &[u8]) -> usize {
        key.len() + self.value.as_deref().map_or(0, <[u8]>::len) + ENTRY_OVERHEAD
    }
}

fn value_of(entry: &CacheEntry) -> Option<&[u8]> {
    entry.value.as_deref()
}

/// The entries a record cache sent down since they were last taken, in the order it sent
/// them: key, new value (`None`: deleted) and, when asked for, the value it replaced below.
///
/// An entry is its bytes, key then values, in one buffer for all, and 32 bytes of where they
/// are: a flush of a large cache keeps a copy of every entry it sends down until the writer
/// has forwarded them, so the copy is kept small.
#[derive(Debug, Default)]
pub struct Flushed {
    bytes: Vec<u8>,
    entries: Vec<FlushedEntry>,
    /// Where [`Flushed::order_from`] places entries by their tick, then which goes where.
    ticks: Vec<u32>,
}

/// The length of a value that is not there.
const ABSENT: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct FlushedEntry {
    /// Where the key starts in [`Flushed::bytes`]; the new value follows it, then the old.
    start: usize,
    key_len: u32,
    /// [`ABSENT`]: deleted.
    new_len: u32,
    /// [`ABSENT`]: not kept.
    old_len: u32,
    /// When the entry was last written: the order a flush forwards in.
    used: u64,
}

/// The length of a key or value a flush keeps. Whatever a cache holds went through a
/// serializer into memory and is on its way to a changelog record, whose length Kafka's
/// record format holds in an `i32`: it is shorter than [`ABSENT`].
fn kept_len(bytes: &[u8]) -> u32 {
    u32::try_from(bytes.len())
        .ok()
        .filter(|&n| n != ABSENT)
        .expect("a cached key or value is shorter than 4 GiB")
}

impl Flushed {
    fn push(&mut self, key: &[u8], new: Option<&[u8]>, old: Option<&[u8]>, used: u64) {
        let start = self.bytes.len();
        let mut len = |value: Option<&[u8]>| match value {
            Some(v) => {
                self.bytes.extend_from_slice(v);
                kept_len(v)
            }
            None => ABSENT,
        };
        let entry = FlushedEntry {
            start,
            key_len: len(Some(key)),
            new_len: len(new),
            old_len: len(old),
            used,
        };
        self.entries.push(entry);
    }

    /// Puts the entries from `start` on in the order they were written. The cache's clock
    /// gives every write a tick of its own, so entries whose ticks lie close together (a
    /// cache whose keys were each written about once since the last flush) are placed at
    /// their ticks and moved to their places in one pass rather than sorted; otherwise, or
    /// if two share a tick, they are sorted.
    fn order_from(&mut self, start: usize) {
        let run = &mut self.entries[start..];
        let (Some(first), Some(last)) = (
            run.iter().map(|e| e.used).min(),
            run.iter().map(|e| e.used).max(),
        ) else {
            return;
        };
        let span = last - first + 1;
        let close = u32::try_from(run.len()).is_ok_and(|n| span <= u64::from(n) * 4);
        if close && place_by_tick(run, first, span, &mut self.ticks) {
            return;
        }
        run.sort_unstable_by_key(|e| e.used);
    }

    /// Whether nothing was sent down.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets the entries. The room stays for the next flush, about as much as this one
    /// used: what a much larger flush before took is given back.
    pub fn clear(&mut self) {
        fit(&mut self.bytes);
        fit(&mut self.entries);
        fit(&mut self.ticks);
        self.bytes.clear();
        self.entries.clear();
    }

    /// The entries: key, new value, old value.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>, Option<&[u8]>)> + '_ {
        self.entries.iter().map(|e| {
            let mut at = e.start;
            let mut take = |len: u32| {
                // Lengths were taken from slices of `bytes`, laid down in this order.
                let len = len as usize;
                let slice = &self.bytes[at..at + len];
                at += len;
                slice
            };
            let key = take(e.key_len);
            let new = (e.new_len != ABSENT).then(|| take(e.new_len));
            let old = (e.old_len != ABSENT).then(|| take(e.old_len));
            (key, new, old)
        })
    }
}

/// Gives back the room of `items` beyond twice what it holds.
fn fit<T>(items: &mut Vec<T>) {
    if items.capacity() / 2 > items.len() {
        items.shrink_to(items.len());
    }
}

/// Puts `run` in the order of its ticks, which lie from `first` over `span` ticks, by placing
/// each entry at its tick and then moving each to its place; `false`, with `run` unchanged,
/// if two entries share a tick.
fn place_by_tick(run: &mut [FlushedEntry], first: u64, span: u64, ticks: &mut Vec<u32>) -> bool {
    const EMPTY: u32 = u32::MAX;
    let Ok(span) = usize::try_from(span) else {
        return false;
    };
    ticks.clear();
    ticks.resize(span, EMPTY);
    for (i, entry) in run.iter().enumerate() {
        // Within the span by how `first` and `span` were taken; `run` is shorter than EMPTY.
        let tick = &mut ticks[(entry.used - first) as usize];
        if *tick != EMPTY {
            return false;
        }
        *tick = i as u32;
    }
    // The entries in the order of their ticks, written over the front of the ticks' room
    // while it is read further on (the k-th entry met is at a tick of index k or more).
    let mut rank = 0;
    for at in 0..span {
        let i = ticks[at];
        if i != EMPTY {
            ticks[rank] = i;
            rank += 1;
        }
    }
    // `ticks[..run.len()]` now holds, for each place, the entry that goes there: each cycle
    // of that is followed once, a place marked done by pointing at itself.
    let from = &mut ticks[..run.len()];
    for start in 0..run.len() {
        if from[start] as usize == start {
            continue;
        }
        let held = run[start];
        let mut place = start;
        loop {
            let next = from[place] as usize;
            from[place] = place as u32;
            if next == start {
                run[place] = held;
                break;
            }
            run[place] = run[next];
            place = next;
        }
    }
    true
}

/// Whether a cache keeps what it flushes, and with which old values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Forwarding {
    Off,
    /// The old value only of a deletion (to tell a deletion of nothing from one of something).
    NewValues,
    /// The old value of every entry (`sendOldValues`).
    OldValues,
}

/// Keeps a dirty entry, last written at `used`, for forwarding when asked to, with the value
/// it replaces below: called before the entry goes down. As Kafka's caching store, a
/// deletion of a key the store below does not hold is not forwarded.
fn keep_for_forwarding(
    below: &dyn StoreLayer,
    forwarding: Forwarding,
    flushed: &mut Flushed,
    old: &mut Vec<u8>,
    key: &[u8],
    value: Option<&[u8]>,
    used: u64,
) {
    if forwarding != Forwarding::Off {
        old.clear();
        let wants_old = forwarding == Forwarding::OldValues || value.is_none();
        let had = wants_old && below.get_into(key, old);
        if value.is_some() || had {
            let kept = (had && forwarding == Forwarding::OldValues).then_some(&old[..]);
            flushed.push(key, value, kept, used);
        }
    }
}

/// A cache of writes over a store, bounded in bytes.
pub struct RecordCache {
    below: Box<dyn StoreLayer>,
    entries: Overlay<CacheEntry>,
    /// The cached keys by last write, oldest first.
    by_use: UseOrder,
    clock: u64,
    /// The clock at the last flush: no entry is dirty while it has not moved.
    flushed_at: u64,
    held: Held,
    /// Where a value read from below goes before an update.
    scratch: Vec<u8>,
    /// Where an update builds its value.
    built: Vec<u8>,
    forwarding: Forwarding,
    /// What went down since the writer last took it, when it forwards at flush.
    flushed: Flushed,
    /// Where an old value is read from below before a flushed entry replaces it.
    old: Vec<u8>,
}

impl RecordCache {
    /// A cache of at most `max_bytes` over `below`.
    pub fn new(below: Box<dyn StoreLayer>, max_bytes: usize) -> Self {
        Self::sharing(below, CacheBudget::new(max_bytes))
    }

    /// A cache over `below` drawing from `budget`, which other caches may share: while they
    /// hold more than it together, a write to this cache sends its oldest entries down.
    pub fn sharing(below: Box<dyn StoreLayer>, budget: CacheBudget) -> Self {
        Self {
            below,
            entries: Overlay::new(),
            by_use: UseOrder::default(),
            clock: 0,
            flushed_at: 0,
            held: Held { bytes: 0, budget },
            scratch: Vec::new(),
            built: Vec::new(),
            forwarding: Forwarding::Off,
            flushed: Flushed::default(),
            old: Vec::new(),
        }
    }

    /// The bytes the cache counts as held.
    pub fn bytes(&self) -> usize {
        self.held.bytes
    }

    /// How many keys are cached.
    pub fn cached(&self) -> usize {
        self.entries.len()
    }

    fn write(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.clock += 1;
        let used = self.clock;
        match self.entries.get_mut(key) {
            Some(entry) => {
                rewrite(entry, key, value, used, &mut self.by_use, &mut self.held);
                self.evict();
            }
            None => self.insert_new(key, value, used),
        }
    }

    /// Caches `key`, which the cache does not hold, last written at `used`.
    fn insert_new(&mut self, key: &[u8], value: Option<&[u8]>, used: u64) {
        let entry = CacheEntry {
            value: value.map(Box::from),
            dirty: true,
            used,
            place: self.by_use.push_newest(key.into()),
        };
        self.held.add(entry.size(key));
        self.entries.insert(key.into(), entry);
        self.evict();
    }

    /// Sends the oldest entries down while the caches of the budget hold more than it.
    fn evict(&mut self) {
        while self.held.budget.exceeded() {
            let Some(key) = self.by_use.pop_oldest() else {
                break;
            };
            let entry = self.entries.remove(&key).expect("a key in use is cached");
            self.held.sub(entry.size(&key));
            if entry.dirty {
                let value = entry.value.as_deref();
                let (below, flushed, old) = (&mut self.below, &mut self.flushed, &mut self.old);
                keep_for_forwarding(
                    &**below,
                    self.forwarding,
                    flushed,
                    old,
                    &key,
                    value,
                    entry.used,
                );
                below.put(&key, value);
            }
        }
    }

    /// Writes what `update` makes of the value of `key`: a key the cache holds is found
    /// once.
    fn update_cached(&mut self, key: &[u8], update: &mut UpdateBytes<'_>, new: &mut Vec<u8>) {
        if let Some(entry) = self.entries.get_mut(key) {
            let had = entry.value.is_some();
            let present = update(entry.value.as_deref(), new);
            if present || had {
                self.clock += 1;
                let value = present.then_some(&new[..]);
                let (by_use, held) = (&mut self.by_use, &mut self.held);
                rewrite(entry, key, value, self.clock, by_use, held);
                self.evict();
            }
            return;
        }
        self.scratch.clear();
        let had = self.below.get_into(key, &mut self.scratch);
        let present = update(had.then_some(&self.scratch[..]), new);
        if present || had {
            // Not cached, as looked up above: inserted without a second search.
            self.clock += 1;
            self.insert_new(key, present.then_some(&new[..]), self.clock);
        }
    }

    /// Forgets `key`, returning its entry.
    fn forget(&mut self, key: &[u8]) -> Option<CacheEntry> {
        let entry = self.entries.remove(key)?;
        self.held.sub(entry.size(key));
        self.by_use.remove(entry.place);
        Some(entry)
    }
}

/// The bytes a cache holds, counted against its budget as well.
struct Held {
    bytes: usize,
    budget: CacheBudget,
}

impl Held {
    fn add(&mut self, bytes: usize) {
        self.bytes += bytes;
        self.budget.take(bytes);
    }

    fn sub(&mut self, bytes: usize) {
        self.bytes -= bytes;
        self.budget.give_back(bytes);
    }

    fn clear(&mut self) {
        self.sub(self.bytes);
    }
}

/// A cache dropped (its task closed) gives its bytes back.
impl Drop for Held {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Writes `value` to the cached entry of `key`, last used at `used` now.
fn rewrite(
    entry: &mut CacheEntry,
    key: &[u8],
    value: Option<&[u8]>,
    used: u64,
    by_use: &mut UseOrder,
    held: &mut Held,
) {
    by_use.touch(entry.place);
    held.sub(entry.size(key));
    match (&mut entry.value, value) {
        // A value of the same length (a count, a sum) is rewritten in place.
        (Some(old), Some(new)) if old.len() == new.len() => old.copy_from_slice(new),
        (slot, value) => *slot = value.map(Box::from),
    }
    entry.dirty = true;
    entry.used = used;
    held.add(entry.size(key));
}

impl StoreLayer for RecordCache {
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
        match self.entries.get(key) {
            Some(entry) => match &entry.value {
                Some(v) => {
                    out.extend_from_slice(v);
                    true
                }
                None => false,
            },
            None => self.below.get_into(key, out),
        }
    }

    fn scan(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, visit: &mut Visit<'_>) {
        merged_scan(
            |from, to| self.entries.range(from, to),
            value_of,
            from,
            to,
            |from, to, visit| self.below.scan(from, to, visit),
            visit,
        )
    }

    fn len(&self) -> usize {
        let held = |from: Bound<&[u8]>, to: Bound<&[u8]>| self.entries.range(from, to);
        merged_len(held, value_of, |from, to, visit| {
            self.below.scan(from, to, visit)
        })
    }

    fn put(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.write(key, value);
    }

    fn update(&mut self, key: &[u8], update: &mut UpdateBytes<'_>) {
        let mut new = std::mem::take(&mut self.built);
        new.clear();
        self.update_cached(key, update, &mut new);
        self.built = new;
    }

    fn put_unlogged(&mut self, key: &[u8], value: Option<&[u8]>) {
        // A write the cache still holds goes down first, so the changelog keeps it.
        if let Some(entry) = self.forget(key).filter(|e| e.dirty) {
            let value = entry.value.as_deref();
            let (below, flushed, old) = (&mut self.below, &mut self.flushed, &mut self.old);
            keep_for_forwarding(
                &**below,
                self.forwarding,
                flushed,
                old,
                key,
                value,
                entry.used,
            );
            below.put(key, value);
        }
        self.below.put_unlogged(key, value);
    }

    fn restore(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.forget(key);
        self.below.restore(key, value);
    }

    fn settle_restored(&mut self) {
        self.below.settle_restored()
    }

    fn changelog(&self) -> ChangelogBatch<'_> {
        self.below.changelog()
    }

    fn clear_changelog(&mut self) {
        self.below.clear_changelog()
    }

    fn flush(&mut self) {
        if self.flushed_at == self.clock {
            return self.below.flush();
        }
        self.flushed_at = self.clock;
        let Self {
            below,
            entries,
            forwarding,
            flushed,
            old,
            ..
        } = self;
        // The dirty entries go down as one run in key order, found in one pass over the
        // cache rather than a search each, which the store below merges into its own
        // order; what is forwarded goes in the order of last write, as Kafka's cache
        // flushes. The keys of a run are distinct, so each old value is read before any of
        // the run is written.
        let start = flushed.entries.len();
        let mut run = Vec::new();
        for (key, entry) in entries.iter_mut().filter(|(_, e)| e.dirty) {
            entry.dirty = false;
            let entry: &CacheEntry = entry;
            let value = entry.value.as_deref();
            keep_for_forwarding(&**below, *forwarding, flushed, old, key, value, entry.used);
            run.push((key, value));
        }
        below.put_run(&run);
        flushed.order_from(start);
        below.flush();
    }

    fn commit(&mut self, changelog_offset: Option<i64>) {
        self.below.commit(changelog_offset)
    }

    fn seal(&mut self) {
        self.below.seal()
    }

    fn checkpoint(&mut self, when: Checkpoint) {
        self.below.checkpoint(when)
    }

    fn held_bytes(&self) -> usize {
        self.below.held_bytes()
    }

    fn forward_flushes(&mut self, old_values: bool) -> bool {
        self.forwarding = if old_values {
            Forwarding::OldValues
        } else {
            Forwarding::NewValues
        };
        true
    }

    fn swap_flushed(&mut self, into: &mut Flushed) {
        std::mem::swap(&mut self.flushed, into);
    }

    fn abort(&mut self) {
        self.entries.clear();
        self.by_use.clear();
        self.held.clear();
        self.flushed.clear();
        self.below.abort()
    }

    fn changelog_offset(&self) -> Option<i64> {
        self.below.changelog_offset()
    }

    fn failure(&self) -> Option<String> {
        self.below.failure()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn flushed(ticks: &[u64]) -> Flushed {
        let mut flushed = Flushed::default();
        flushed.push(b"before", None, None, u64::MAX);
        for (i, tick) in ticks.iter().enumerate() {
            let new = i.to_string().repeat(i % 3);
            let old = (i % 2 == 1).then_some(&b"old"[..]);
            flushed.push(i.to_string().as_bytes(), Some(new.as_bytes()), old, *tick);
        }
        flushed
    }

    proptest! {
        /// Entries come out in the order of their ticks, whether the ticks are close, far
        /// apart or shared; the entries before `start` stay where they were.
        #[test]
        fn flushed_entries_are_put_in_the_order_they_were_written(
            ticks in prop_oneof![
                // Each its own tick, in any order; or some sharing one.
                proptest::collection::btree_set(0u64..64, 0..48)
                    .prop_map(Vec::from_iter)
                    .prop_shuffle(),
                proptest::collection::vec(0u64..64, 0..48),
            ],
            spread in prop_oneof![Just(1u64), Just(3), Just(1_000)],
        ) {
            let ticks: Vec<u64> = ticks.iter().map(|t| 10 + t * spread).collect();
            let mut flushed = flushed(&ticks);
            flushed.order_from(1);
            let mut expected: Vec<(u64, Vec<u8>)> = ticks
                .iter()
                .enumerate()
                .map(|(i, t)| (*t, i.to_string().into_bytes()))
                .collect();
            expected.sort();
            let got: Vec<u64> = flushed.entries.iter().map(|e| e.used).collect();
            prop_assert_eq!(got[0], u64::MAX);
            prop_assert_eq!(&got[1..], expected.iter().map(|(t, _)| *t).collect::<Vec<_>>());
            // Each entry kept its own key and value.
            let kept: Vec<_> = flushed.iter().collect();
            prop_assert_eq!(kept[0], (&b"before"[..], None, None));
            for (entry, (key, new, old)) in flushed.entries[1..].iter().zip(&kept[1..]) {
                let i: usize = std::str::from_utf8(key).unwrap().parse().unwrap();
                prop_assert_eq!(entry.used, ticks[i]);
                let value = i.to_string().repeat(i % 3);
                prop_assert_eq!(*new, Some(value.as_bytes()));
                prop_assert_eq!(*old, (i % 2 == 1).then_some(&b"old"[..]));
            }
        }
    }

    #[test]
    fn a_cleared_buffer_keeps_about_the_room_of_its_last_flush() {
        let mut flushed = flushed(&(0..10_000).collect::<Vec<_>>());
        flushed.order_from(1);
        flushed.clear();
        assert!(flushed.is_empty() && flushed.iter().next().is_none());
        // A small flush after a large one: the room of the large one is given back.
        flushed.push(b"k", Some(b"new"), Some(b"old"), 1);
        flushed.push(b"gone", None, Some(b""), 2);
        flushed.order_from(0);
        let kept: Vec<_> = flushed.iter().collect();
        assert_eq!(
            kept,
            [
                (&b"k"[..], Some(&b"new"[..]), Some(&b"old"[..])),
                (&b"gone"[..], None, Some(&b""[..]))
            ]
        );
        flushed.clear();
        assert!(flushed.bytes.capacity() < 1_000 && flushed.entries.capacity() < 100);
    }
}
