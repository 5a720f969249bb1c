//! [`WriteBuffer`]: the exactly-once layer. Writes are held above the inner store (reads and
//! scans see them). A commit closes the writes of its interval: they are committed but stay
//! held, so that a key written in many intervals reaches the inner store once; a
//! [`checkpoint`](super::StoreLayer::checkpoint) applies every committed write to the inner
//! store in one batch together with the changelog offset they reach. If a transaction
//! aborts, the writes of its interval are dropped and the store reads as the last commit
//! left it. The inner store only ever holds committed state, with the offset it reaches, so a
//! crash at any point needs no wipe of local state: restoration replays the changelog after
//! that offset.

use std::ops::Bound;

use super::overlay::{merged_len, merged_scan, Overlay};
use super::restored::RestoreBatch;
use super::StoreLayer;
use crate::streams::store::changelog::ChangelogBatch;
use crate::streams::store::inner::{BytesStore, Visit};
use crate::streams::store::UpdateBytes;

/// What a held entry costs beyond its key and values: the map's node share and the boxes.
const ENTRY_OVERHEAD: usize = 64;

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

    /// The value as of the last commit, if held.
    fn committed(&self, open: u64) -> Option<Option<&[u8]>> {
        if self.interval < open {
            Some(self.value.as_deref())
        } else {
            self.replaced.as_ref().map(|v| v.as_deref())
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

/// Holds writes until a checkpoint after their commit.
pub struct WriteBuffer {
    inner: Box<dyn BytesStore>,
    /// The last write of each key the inner store does not have yet.
    held: Overlay<Held>,
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
    /// Restored writes, committed ones, on their way to the inner store.
    restored: RestoreBatch,
}

impl WriteBuffer {
    /// A buffer over `inner`, holding nothing.
    pub fn new(inner: Box<dyn BytesStore>) -> Self {
        Self {
            inner,
            held: Overlay::new(),
            open: 1,
            bytes: 0,
            committed_offset: None,
            scratch: Vec::new(),
            read: Vec::new(),
            restored: RestoreBatch::default(),
        }
    }

    /// How many keys are held.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The inner store, without what is held.
    pub fn inner(&self) -> &dyn BytesStore {
        &*self.inner
    }

    fn hold(&mut self, key: &[u8], value: Option<&[u8]>) {
        let open = self.open;
        match self.held.get_mut(key) {
            Some(held) => {
                self.bytes -= held.bytes(key);
                held.write(value.unwrap_or_default(), value.is_some(), open);
                self.bytes += held.bytes(key);
            }
            None => {
                let held = Held {
                    value: value.map(Box::from),
                    interval: open,
                    replaced: None,
                };
                self.bytes += held.bytes(key);
                self.held.insert(key.into(), held);
            }
        }
    }
}

impl StoreLayer for WriteBuffer {
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
        debug_assert!(
            self.restored.is_empty(),
            "a read before restored writes settled"
        );
        match self.held.get(key) {
            Some(Held { value: Some(v), .. }) => {
                out.extend_from_slice(v);
                true
            }
            Some(_) => false,
            None => self.inner.get_into(key, out),
        }
    }

    fn scan(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, visit: &mut Visit<'_>) {
        debug_assert!(
            self.restored.is_empty(),
            "a scan before restored writes settled"
        );
        merged_scan(
            &self.held,
            value_of,
            from,
            to,
            |from, to, visit| self.inner.scan(from, to, visit),
            visit,
        )
    }

    fn len(&self) -> usize {
        merged_len(&self.held, value_of, |from, to, visit| {
            self.inner.scan(from, to, visit)
        })
    }

    fn put(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.hold(key, value)
    }

    fn update(&mut self, key: &[u8], update: &mut UpdateBytes<'_>) {
        let mut new = std::mem::take(&mut self.scratch);
        new.clear();
        if let Some(held) = self.held.get_mut(key) {
            let present = update(held.value.as_deref(), &mut new);
            self.bytes -= held.bytes(key);
            held.write(&new, present, self.open);
            self.bytes += held.bytes(key);
        } else {
            self.read.clear();
            let had = self.inner.get_into(key, &mut self.read);
            let present = update(had.then_some(&self.read[..]), &mut new);
            if present || had {
                self.hold(key, present.then_some(&new[..]));
            }
        }
        self.scratch = new;
    }

    fn put_unlogged(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.hold(key, value)
    }

    fn restore(&mut self, key: &[u8], value: Option<&[u8]>) {
        // Restored records are committed: they go to the inner store. A write held for the
        // same key is newer and stays above it.
        self.restored.push(&mut *self.inner, key, value)
    }

    fn settle_restored(&mut self) {
        self.restored.apply(&mut *self.inner, None);
    }

    fn changelog(&self) -> ChangelogBatch<'_> {
        ChangelogBatch::EMPTY
    }

    fn clear_changelog(&mut self) {}

    fn flush(&mut self) {}

    fn commit(&mut self, changelog_offset: Option<i64>) {
        self.open += 1;
        if changelog_offset.is_some() {
            self.committed_offset = changelog_offset;
        }
        if self.held.is_empty() {
            // Nothing waits for the inner store: it takes the offset (and any restored
            // writes) at once.
            self.checkpoint();
        } else {
            // The inner store must not claim an offset its contents do not reach yet.
            self.restored.apply(&mut *self.inner, None);
        }
    }

    fn checkpoint(&mut self) {
        let open = self.open;
        let mut writes = self
            .held
            .iter()
            .filter_map(|(k, held)| Some((&k[..], held.committed(open)?)));
        // Restored writes are older than held ones: they land first, in the same batch.
        self.restored.apply_followed_by(
            &mut *self.inner,
            &mut writes,
            self.committed_offset.take(),
        );
        let mut bytes = 0;
        self.held.retain(|key, held| {
            held.replaced = None;
            let keep = held.interval == open;
            if keep {
                bytes += held.bytes(key);
            }
            keep
        });
        self.bytes = bytes;
    }

    fn held_bytes(&self) -> usize {
        self.bytes
    }

    fn abort(&mut self) {
        let open = self.open;
        let mut bytes = 0;
        self.held.retain(|key, held| {
            if held.interval == open {
                match held.replaced.take() {
                    Some(committed) => {
                        held.value = committed;
                        held.interval = open - 1;
                    }
                    None => return false,
                }
            }
            held.replaced = None;
            bytes += held.bytes(key);
            true
        });
        self.bytes = bytes;
        self.restored.apply(&mut *self.inner, None);
    }

    fn changelog_offset(&self) -> Option<i64> {
        self.committed_offset
            .or_else(|| self.inner.changelog_offset())
    }

    fn failure(&self) -> Option<String> {
        self.inner.failure()
    }
}
