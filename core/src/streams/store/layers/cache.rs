//! [`RecordCache`]: Kafka Streams' record cache (`statestore.cache.max.bytes`). Writes stay in
//! the cache, the last one per key, until the cache is flushed (at commit) or runs out of
//! room, when the least recently written entries go down to the layers below — and so to
//! the changelog — oldest first. A key updated a thousand times in a commit interval reaches
//! the changelog and the inner store once. Reads and scans see the cache over the store.
//! What a flush sent down stays cached, clean, while lookups find it again; in a state far
//! larger than the cache, where they seldom do ([`Reuse`]), a flush drops the entries not
//! written since the last one, rather than evict one for each key the next interval writes.
//! When its writer forwards at flush (Kafka's cache flush listener), the cache keeps what it
//! sends down, with the value it replaced, in a [`Flushed`] for the writer to forward.

use std::cell::Cell;
use std::ops::Bound;

use super::cache_budget::CacheBudget;
use super::flushed::Flushed;
use super::overlay::{merged_len, merged_scan, Overlay, Slot};
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
    /// Whether updates are mostly of keys not cached.
    misses: Misses,
    /// How often clean entries were found since the last flush.
    reuse: Reuse,
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
            misses: Misses::default(),
            reuse: Reuse::default(),
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
                self.reuse.found(entry);
                rewrite(entry, key, value, used, &mut self.by_use, &mut self.held);
                self.evict();
            }
            None => {
                self.reuse.missed();
                self.insert_new(key, value, used)
            }
        }
    }

    /// Caches `key`, which the cache does not hold, last written at `used`.
    fn insert_new(&mut self, key: &[u8], value: Option<&[u8]>, used: u64) {
        let entry = self.held.entry(key, value, used, &mut self.by_use);
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
    /// once, and so is the place of one it does not, while most updates are of keys it does
    /// not hold (a state of many more keys than the cache holds): then the key's bytes are
    /// copied before the search, rather than searched for twice.
    fn update_cached(&mut self, key: &[u8], update: &mut UpdateBytes<'_>, new: &mut Vec<u8>) {
        let clock = &mut self.clock;
        if self.misses.mostly() {
            match self.entries.slot(key.into()) {
                Slot::Held(entry) => {
                    self.misses.hit();
                    self.reuse.found(entry);
                    let (by_use, held) = (&mut self.by_use, &mut self.held);
                    update_entry(entry, key, update, new, clock, by_use, held);
                }
                Slot::Vacant(slot) => {
                    self.misses.miss();
                    self.reuse.missed();
                    let (below, scratch) = (&*self.below, &mut self.scratch);
                    if let Some(present) = update_below(below, scratch, key, update, new) {
                        *clock += 1;
                        let value = present.then_some(&new[..]);
                        slot.insert(self.held.entry(key, value, *clock, &mut self.by_use));
                    }
                }
            }
            return self.evict();
        }
        if let Some(entry) = self.entries.get_mut(key) {
            self.misses.hit();
            self.reuse.found(entry);
            let (by_use, held) = (&mut self.by_use, &mut self.held);
            update_entry(entry, key, update, new, clock, by_use, held);
            return self.evict();
        }
        self.misses.miss();
        self.reuse.missed();
        let (below, scratch) = (&*self.below, &mut self.scratch);
        if let Some(present) = update_below(below, scratch, key, update, new) {
            self.clock += 1;
            self.insert_new(key, present.then_some(&new[..]), self.clock);
        }
    }

    /// Forgets the entries not written since the last flush.
    fn drop_clean(&mut self) {
        let (by_use, held) = (&mut self.by_use, &mut self.held);
        self.entries.retain(|key, entry| {
            if !entry.dirty {
                held.sub(entry.size(key));
                by_use.remove(entry.place);
            }
            entry.dirty
        });
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

    /// A new entry of `key`, dirty, last written at `used`, counted and made the newest in
    /// `by_use`.
    fn entry(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        used: u64,
        by_use: &mut UseOrder,
    ) -> CacheEntry {
        let entry = CacheEntry {
            value: value.map(Box::from),
            dirty: true,
            used,
            place: by_use.push_newest(key.into()),
        };
        self.add(entry.size(key));
        entry
    }
}

/// Whether most of a cache's recent updates were of keys it did not hold: a count up by
/// each miss and down by each hit, within `0..=MISSES_COUNTED`.
#[derive(Default)]
struct Misses(u8);

const MISSES_COUNTED: u8 = 16;

impl Misses {
    fn hit(&mut self) {
        self.0 = self.0.saturating_sub(1);
    }

    fn miss(&mut self) {
        self.0 = (self.0 + 1).min(MISSES_COUNTED);
    }

    fn mostly(&self) -> bool {
        self.0 > MISSES_COUNTED / 2
    }
}

/// How the entries a cache kept past its last flush served since: a cache of a state far
/// larger than itself seldom finds them again, and keeping them costs an eviction for each
/// key it does not hold.
#[derive(Default)]
struct Reuse {
    /// Lookups that found a clean entry (written before the last flush, not since); counted
    /// by reads too, which see the cache through a shared borrow.
    clean: Cell<u32>,
    /// Writes of keys the cache did not hold.
    missed: u32,
}

/// A cache keeps its clean entries past a flush while lookups found one at least once for
/// every this many writes of keys it did not hold. Scans are not counted: a scan reads the
/// store below as well, whatever the cache holds.
const CLEAN_FOUND_PER_MISSED: u64 = 8;

impl Reuse {
    fn found(&self, entry: &CacheEntry) {
        if !entry.dirty {
            self.clean.set(self.clean.get().saturating_add(1));
        }
    }

    fn missed(&mut self) {
        self.missed = self.missed.saturating_add(1);
    }

    /// Whether the clean entries earned their room since the last flush; counts anew.
    fn take_earned(&mut self) -> bool {
        let clean = u64::from(self.clean.take());
        let missed = u64::from(std::mem::take(&mut self.missed));
        clean * CLEAN_FOUND_PER_MISSED >= missed
    }
}

/// Makes with `update`, into `new`, the value of `key`, which the cache does not hold, from
/// its value below (read into `scratch`): `Some(present)` when there is an entry to cache,
/// `None` when there was no value and `update` made none.
fn update_below(
    below: &dyn StoreLayer,
    scratch: &mut Vec<u8>,
    key: &[u8],
    update: &mut UpdateBytes<'_>,
    new: &mut Vec<u8>,
) -> Option<bool> {
    scratch.clear();
    let had = below.get_into(key, scratch);
    let present = update(had.then_some(&scratch[..]), new);
    (present || had).then_some(present)
}

/// Writes what `update` makes of a cached entry's value, if it makes or replaces one.
fn update_entry(
    entry: &mut CacheEntry,
    key: &[u8],
    update: &mut UpdateBytes<'_>,
    new: &mut Vec<u8>,
    clock: &mut u64,
    by_use: &mut UseOrder,
    held: &mut Held,
) {
    let had = entry.value.is_some();
    let present = update(entry.value.as_deref(), new);
    if present || had {
        *clock += 1;
        let value = present.then_some(&new[..]);
        rewrite(entry, key, value, *clock, by_use, held);
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
        match self.entries.get(key).inspect(|e| self.reuse.found(e)) {
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
        if !self.reuse.take_earned() {
            self.drop_clean();
        }
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
        let start = flushed.len();
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
