//! [`WriteBuffer`]: the exactly-once layer. Writes are held above the inner store (reads and
//! scans see them). A commit closes the writes of its interval: they are committed but stay
//! held, so that a key written in many intervals reaches the inner store once; a
//! [`checkpoint`](super::StoreLayer::checkpoint) hands every committed write to the inner
//! store as one batch together with the changelog offset they reach, which a store on disk
//! applies on another thread while the layer keeps reading the batch above it. Records
//! restored from the changelog are held as committed writes too, so restoring is not bound by
//! the inner store's writes. If a transaction aborts, the writes of its interval are dropped
//! and the store reads as the last commit left it. The inner store only ever holds committed
//! state, with the offset it reaches, so a crash at any point needs no wipe of local state:
//! restoration replays the changelog after that offset.
//!
//! An interval can be sealed while its transaction commits ([`StoreLayer::seal`]): the next
//! interval's writes go on above it, and a checkpoint waits until the sealed interval is
//! committed. A key written in both keeps the sealed value as the one an abort of the next
//! interval brings back; should the sealed interval's commit fail, both are abandoned.

use std::cmp::Ordering;
use std::ops::Bound;

use std::sync::Arc;

use super::key_filter::{KeyFilter, KeyHash};
use super::overlay::{key_head, merged_len, merged_scan, Overlay, SortedRun};
use super::{Checkpoint, StoreLayer};
use crate::streams::store::changelog::ChangelogBatch;
use crate::streams::store::inner::{BytesStore, PendingBatch, SharedWrites, Visit};
use crate::streams::store::UpdateBytes;

/// The interval of writes restored from the changelog: before every open one.
const COMMITTED: u64 = 0;

/// What a held entry costs beyond its key and values: its share of the map's nodes (the key's
/// and the entry's slots, two thirds of a node's slots filled), the allocator's headers of
/// its boxes, and its two to four bytes in the filter of held keys. Measured: 1M keys of 16
/// bytes with values of 8 take 207 bytes an entry, keys of 30 with values of 100 take 303
/// (195 and 291 when the map kept eight bytes of each key's head: the eight more cost 12
/// bytes an entry, measured alike), before the filter.
const ENTRY_OVERHEAD: usize = 184;

/// A run of writes at least this many times smaller than what is held is written key by
/// key: merging would touch every held entry for a few writes.
const MERGE_RATIO: usize = 16;

/// The last write of a key that the inner store does not have yet.
struct Held {
    /// The value written (`None`: deleted).
    value: Option<Box<[u8]>>,
    /// The commit interval it was written in; those before the open one are committed.
    interval: u64,
    /// The committed value this interval's write replaced, when that value was held too:
    /// what an abort of the interval brings back. `None` when the key's committed value is
    /// the inner store's. Stale once `interval` is committed.
    replaced: Option<Option<Box<[u8]>>>,
}

impl Held {
    fn bytes(&self, key: &[u8]) -> usize {
        let len = |v: &Option<Box<[u8]>>| v.as_ref().map_or(0, |v| v.len());
        ENTRY_OVERHEAD + key.len() + len(&self.value) + self.replaced.as_ref().map_or(0, len)
    }

    /// A record restored from the changelog, committed: a write of the open interval is
    /// newer and stays above it, and the restored value is what an abort brings back.
    fn restore(&mut self, value: Option<&[u8]>, open: u64) {
        let restored = value.map(Box::from);
        if self.interval == open {
            self.replaced = Some(restored);
        } else {
            self.value = restored;
        }
    }

    /// Writes `value` in the open interval, keeping the committed value it replaces.
    fn write(&mut self, value: &[u8], present: bool, open: u64) {
        if self.interval < open {
            self.replaced = Some(self.value.take());
            self.interval = open;
        }
        match &mut self.value {
            // A value of the same length (a count, a sum) is rewritten in place.
            Some(old) if present && old.len() == value.len() => old.copy_from_slice(value),
            slot => *slot = present.then(|| Box::from(value)),
        }
    }
}

fn value_of(entry: &Held) -> Option<&[u8]> {
    entry.value.as_deref()
}

fn applying_value(entry: &Option<Box<[u8]>>) -> Option<&[u8]> {
    entry.as_deref()
}

/// A checkpoint's batch while the inner store applies it.
struct Applying {
    writes: SharedWrites,
    /// The keys of `writes` (and perhaps a few more).
    keys: KeyFilter,
    /// What the batch costs in memory until it lands, counted as it was held.
    bytes: usize,
    changelog_offset: Option<i64>,
    pending: PendingBatch,
}

/// Holds writes until a checkpoint after their commit.
pub struct WriteBuffer {
    inner: Box<dyn BytesStore>,
    /// The last write of each key the inner store does not have yet.
    held: Overlay<Held>,
    /// The keys of `held` (and perhaps some it no longer holds): a read of a key it does
    /// not have skips the map.
    held_keys: KeyFilter,
    /// The open commit interval.
    open: u64,
    /// What the held entries cost, roughly, in bytes.
    bytes: usize,
    /// The changelog offset the committed writes reach, once a commit gave one that the
    /// inner store does not have yet.
    committed_offset: Option<i64>,
    /// Where values are built before they are held.
    scratch: Vec<u8>,
    /// Where a value read from the inner store goes before an update.
    read: Vec<u8>,
    /// The last checkpoint's batch, until the inner store has it.
    applying: Option<Applying>,
    /// Why a checkpoint's batch could not be applied.
    failed: Option<String>,
    /// The interval whose transaction commits while the next one is open.
    sealed: Option<u64>,
    /// Whether a key of the sealed interval was written again in the open one: its value
    /// before the sealed interval is gone, so abandoning both intervals cannot bring it back.
    spanned: bool,
}

impl WriteBuffer {
    /// A buffer over `inner`, holding nothing.
    pub fn new(inner: Box<dyn BytesStore>) -> Self {
        Self {
            inner,
            held: Overlay::new(),
            held_keys: KeyFilter::default(),
            open: 1,
            bytes: 0,
            committed_offset: None,
            scratch: Vec::new(),
            read: Vec::new(),
            applying: None,
            failed: None,
            sealed: None,
            spanned: false,
        }
    }

    /// Waits for the last checkpoint's batch, if the inner store still applies it: before
    /// anything else writes to the inner store.
    fn settle_applying(&mut self) {
        if let Some(applying) = self.applying.take() {
            if let Err(e) = applying.pending.wait() {
                self.failed.get_or_insert(e);
            }
        }
    }

    /// Forgets the last checkpoint's batch once the inner store has it.
    fn forget_applied(&mut self) {
        if self
            .applying
            .as_ref()
            .is_some_and(|a| a.pending.outcome().is_some())
        {
            self.settle_applying();
        }
    }

    /// Scans the inner store under the batch it is applying.
    fn scan_below(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, visit: &mut Visit<'_>) {
        match &self.applying {
            Some(applying) => merged_scan(
                |from, to| {
                    applying
                        .writes
                        .range::<[u8], _>((from, to))
                        .map(|(k, v)| (&k[..], v))
                },
                applying_value,
                from,
                to,
                |from, to, visit| self.inner.scan(from, to, visit),
                visit,
            ),
            None => self.inner.scan(from, to, visit),
        }
    }

    /// Reads `key` (of `hash`) from the inner store under the batch it is applying.
    fn get_below(&self, key: &[u8], hash: KeyHash, out: &mut Vec<u8>) -> bool {
        if let Some(applying) = self.applying.as_ref().filter(|a| a.keys.may_hold(hash)) {
            if let Some(value) = applying.writes.get(key) {
                return match value {
                    Some(v) => {
                        out.extend_from_slice(v);
                        true
                    }
                    None => false,
                };
            }
        }
        self.inner.get_into(key, out)
    }

    /// Holds a run of writes of the open interval, in strictly ascending key order, in one
    /// pass over the held writes beside it: a key held already is written in place, and the
    /// keys not held yet, in order too, are merged into the map at the end. No search per
    /// key.
    fn merge_run(&mut self, run: &[(&[u8], Option<&[u8]>)]) {
        let open = self.open;
        let sealed = self.sealed;
        let mut spanned = false;
        let mut bytes = self.bytes;
        let mut fresh = SortedRun::with_capacity(run.len());
        let add = |fresh: &mut SortedRun<Held>, key: &[u8], value: Option<&[u8]>| {
            let held = Held {
                value: value.map(Box::from),
                interval: open,
                replaced: None,
            };
            let added = held.bytes(key);
            fresh.push(key, held);
            added
        };
        // The walk compares the heads the map holds beside its keys first, and reads a held
        // key's bytes (most often a miss of the processor's cache) only where heads tie.
        let head_at = |at: usize| run.get(at).map_or(0, |(key, _)| key_head(key));
        let (mut at, mut head) = (0, head_at(0));
        for (held_head, key, held) in self.held.iter_mut_headed() {
            let order = loop {
                let Some(&(new_key, value)) = run.get(at) else {
                    break None;
                };
                let order = head.cmp(&held_head).then_with(|| new_key.cmp(key));
                if order.is_ge() {
                    break Some((order, value));
                }
                bytes += add(&mut fresh, new_key, value);
                at += 1;
                head = head_at(at);
            };
            match order {
                None => break,
                Some((Ordering::Equal, value)) => {
                    bytes -= held.bytes(key);
                    spanned |= sealed == Some(held.interval);
                    held.write(value.unwrap_or_default(), value.is_some(), open);
                    bytes += held.bytes(key);
                    at += 1;
                    head = head_at(at);
                }
                Some(_) => {}
            }
        }
        for &(key, value) in &run[at..] {
            bytes += add(&mut fresh, key, value);
        }
        self.bytes = bytes;
        self.spanned |= spanned;
        for key in fresh.keys() {
            self.held_keys.add(KeyHash::of(key));
        }
        if fresh.len().saturating_mul(MERGE_RATIO) < self.held.len() {
            self.held.insert_run(fresh);
        } else {
            // Both in key order: merged in one pass.
            self.held.merge_run(fresh);
        }
        self.fit_held_keys();
    }

    /// Builds the filter of the held keys again, larger, once it has taken too many.
    fn fit_held_keys(&mut self) {
        if self.held_keys.is_full() {
            self.held_keys = KeyFilter::of(self.held.len(), self.held.keys());
        }
    }

    /// Holds `value` for `key`, written in `interval`: the open one for a write of the
    /// store, [`COMMITTED`] for a record restored from the changelog.
    fn hold(&mut self, key: &[u8], value: Option<&[u8]>, interval: u64) {
        let open = self.open;
        match self.held.get_mut(key) {
            Some(held) => {
                self.bytes -= held.bytes(key);
                if interval == COMMITTED {
                    held.restore(value, open);
                } else {
                    self.spanned |= self.sealed == Some(held.interval);
                    held.write(value.unwrap_or_default(), value.is_some(), open);
                }
                self.bytes += held.bytes(key);
            }
            None => {
                let held = Held {
                    value: value.map(Box::from),
                    interval,
                    replaced: None,
                };
                self.bytes += held.bytes(key);
                self.held.insert(key.into(), held);
                self.held_keys.add(KeyHash::of(key));
                self.fit_held_keys();
            }
        }
    }
}

impl StoreLayer for WriteBuffer {
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
        let hash = KeyHash::of(key);
        let held = match self.held_keys.may_hold(hash) {
            true => self.held.get(key),
            false => None,
        };
        match held {
            Some(Held { value: Some(v), .. }) => {
                out.extend_from_slice(v);
                true
            }
            Some(_) => false,
            None => self.get_below(key, hash, out),
        }
    }

    fn scan(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, visit: &mut Visit<'_>) {
        merged_scan(
            |from, to| self.held.range(from, to),
            value_of,
            from,
            to,
            |from, to, visit| self.scan_below(from, to, visit),
            visit,
        )
    }

    fn len(&self) -> usize {
        let held = |from: Bound<&[u8]>, to: Bound<&[u8]>| self.held.range(from, to);
        merged_len(held, value_of, |from, to, visit| {
            self.scan_below(from, to, visit)
        })
    }

    fn put(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.hold(key, value, self.open)
    }

    fn put_run(&mut self, run: &[(&[u8], Option<&[u8]>)]) {
        let ascending = run.windows(2).all(|pair| pair[0].0 < pair[1].0);
        if !ascending || run.len().saturating_mul(MERGE_RATIO) < self.held.len() {
            for &(key, value) in run {
                self.hold(key, value, self.open);
            }
            return;
        }
        self.merge_run(run);
    }

    fn update(&mut self, key: &[u8], update: &mut UpdateBytes<'_>) {
        let mut new = std::mem::take(&mut self.scratch);
        new.clear();
        if let Some(held) = self.held.get_mut(key) {
            let present = update(held.value.as_deref(), &mut new);
            self.spanned |= self.sealed == Some(held.interval);
            self.bytes -= held.bytes(key);
            held.write(&new, present, self.open);
            self.bytes += held.bytes(key);
        } else {
            let mut read = std::mem::take(&mut self.read);
            read.clear();
            let had = self.get_below(key, KeyHash::of(key), &mut read);
            self.read = read;
            let present = update(had.then_some(&self.read[..]), &mut new);
            if present || had {
                self.hold(key, present.then_some(&new[..]), self.open);
            }
        }
        self.scratch = new;
    }

    fn put_unlogged(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.hold(key, value, self.open)
    }

    fn restore(&mut self, key: &[u8], value: Option<&[u8]>) {
        // Restored records are committed writes: held as committed, they reach the inner
        // store with the next checkpoint, in one batch with the offset they reach, so that
        // restoring is not bound by the inner store's writes.
        self.hold(key, value, COMMITTED)
    }

    fn settle_restored(&mut self) {}

    fn changelog(&self) -> ChangelogBatch<'_> {
        ChangelogBatch::EMPTY
    }

    fn clear_changelog(&mut self) {}

    fn flush(&mut self) {}

    fn commit(&mut self, changelog_offset: Option<i64>) {
        // A sealed interval was closed when it was sealed: the open one stays open.
        if self.sealed.take().is_none() {
            self.open += 1;
        }
        self.spanned = false;
        if changelog_offset.is_some() {
            self.committed_offset = changelog_offset;
        }
        self.forget_applied();
        if self.held.is_empty() && self.applying.is_none() {
            // Nothing waits for the inner store: it takes the offset at once. (With a batch
            // still landing, the offset waits for the next checkpoint rather than the commit
            // for the batch.)
            self.checkpoint(Checkpoint::Wait);
        }
    }

    fn seal(&mut self) {
        if self.sealed.is_none() {
            self.sealed = Some(self.open);
            self.open += 1;
        }
    }

    fn checkpoint(&mut self, when: Checkpoint) {
        if self.sealed.is_some() {
            // The sealed writes are not committed yet, and the open interval's writes over
            // them keep them as the values an abort brings back.
            return;
        }
        // One batch at a time reaches the inner store, in order.
        match when {
            Checkpoint::Wait => self.settle_applying(),
            Checkpoint::IfLanded => {
                self.forget_applied();
                if self.applying.is_some() {
                    return;
                }
            }
        }
        let open = self.open;
        let mut committed = Vec::new();
        let mut bytes = 0;
        let handed = self.bytes;
        let held = std::mem::take(&mut self.held);
        let keys = std::mem::take(&mut self.held_keys);
        for (key, mut held) in held.into_entries() {
            if held.interval < open {
                committed.push((key, held.value));
                continue;
            }
            // Written in the open interval: what it replaced is committed.
            if let Some(value) = held.replaced.take() {
                committed.push((key.clone(), value));
            }
            bytes += held.bytes(&key);
            self.held.insert(key, held);
        }
        self.bytes = bytes;
        // As large as the last one grew: the next interval's keys are about as many.
        self.held_keys = KeyFilter::of(keys.len().max(self.held.len()), self.held.keys());
        let changelog_offset = self.committed_offset.take();
        if committed.is_empty() && changelog_offset.is_none() {
            return;
        }
        // In key order already: the map is built without a search per key.
        let writes: SharedWrites = Arc::new(committed.into_iter().collect());
        if let Some(pending) = self
            .inner
            .write_batch_later(writes.clone(), changelog_offset)
        {
            self.applying = Some(Applying {
                writes,
                keys,
                bytes: handed.saturating_sub(bytes),
                changelog_offset,
                pending,
            });
        }
    }

    fn held_bytes(&self) -> usize {
        // A batch still landing holds its memory as much as the writes held.
        self.bytes + self.applying.as_ref().map_or(0, |a| a.bytes)
    }

    fn abort(&mut self) {
        let open = self.open;
        // Abandoned from this interval on: the sealed one's too, if its commit is in flight.
        let first = self.sealed.take().unwrap_or(open);
        if std::mem::take(&mut self.spanned) {
            self.failed.get_or_insert_with(|| {
                "writes were abandoned with a commit in flight that they had overwritten: \
                 the store must be reopened"
                    .to_string()
            });
        }
        let mut bytes = 0;
        self.held.retain(|key, held| {
            if held.interval >= first {
                match held.replaced.take() {
                    Some(committed) => {
                        held.value = committed;
                        held.interval = first - 1;
                    }
                    None => return false,
                }
            }
            held.replaced = None;
            bytes += held.bytes(key);
            true
        });
        self.bytes = bytes;
    }

    fn changelog_offset(&self) -> Option<i64> {
        self.committed_offset
            .or_else(|| self.applying.as_ref().and_then(|a| a.changelog_offset))
            .or_else(|| self.inner.changelog_offset())
    }

    fn failure(&self) -> Option<String> {
        let applying = self.applying.as_ref().and_then(|a| a.pending.outcome());
        self.failed
            .clone()
            .or_else(|| applying.and_then(Result::err))
            .or_else(|| self.inner.failure())
    }
}

impl Drop for WriteBuffer {
    /// The inner store has the last checkpoint's batch before it goes.
    fn drop(&mut self) {
        self.settle_applying();
    }
}
