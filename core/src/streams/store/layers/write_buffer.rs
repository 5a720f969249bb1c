//! [`WriteBuffer`]: the exactly-once layer. The writes of a commit interval are held above
//! the inner store (reads and scans see them); once the transaction that carries their
//! changelog records has committed, they are applied to the inner store in one batch
//! together with the changelog offset they reach. If the transaction aborts, they are
//! dropped and the inner store still holds exactly the last committed state, so a crash at
//! any point needs no wipe of local state.

use std::ops::Bound;

use super::overlay::{merged_len, merged_scan, Overlay};
use super::restored::RestoreBatch;
use super::StoreLayer;
use crate::streams::store::changelog::ChangelogBatch;
use crate::streams::store::inner::{BytesStore, Visit};
use crate::streams::store::UpdateBytes;

/// Holds writes until their commit is acknowledged.
pub struct WriteBuffer {
    inner: Box<dyn BytesStore>,
    /// The last write of each key since the last commit: a key written many times in an
    /// interval reaches the inner store once.
    held: Overlay<Option<Box<[u8]>>>,
    /// Where a value read from the inner store goes before an update.
    scratch: Vec<u8>,
    /// Restored writes, committed ones, on their way to the inner store.
    restored: RestoreBatch,
}

fn value_of(entry: &Option<Box<[u8]>>) -> Option<&[u8]> {
    entry.as_deref()
}

impl WriteBuffer {
    /// A buffer over `inner`, holding nothing.
    pub fn new(inner: Box<dyn BytesStore>) -> Self {
        Self {
            inner,
            held: Overlay::new(),
            scratch: Vec::new(),
            restored: RestoreBatch::default(),
        }
    }

    /// How many writes are held.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The inner store, without what is held.
    pub fn inner(&self) -> &dyn BytesStore {
        &*self.inner
    }

    fn hold(&mut self, key: &[u8], value: Option<&[u8]>) {
        let value = value.map(Box::from);
        match self.held.get_mut(key) {
            Some(entry) => *entry = value,
            None => {
                self.held.insert(key.into(), value);
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
            Some(Some(v)) => {
                out.extend_from_slice(v);
                true
            }
            Some(None) => false,
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
        let mut new = Vec::new();
        if let Some(entry) = self.held.get_mut(key) {
            let present = update(entry.as_deref(), &mut new);
            *entry = present.then(|| new.into_boxed_slice());
            return;
        }
        self.scratch.clear();
        let had = self.inner.get_into(key, &mut self.scratch);
        let present = update(had.then_some(&self.scratch[..]), &mut new);
        if present || had {
            self.held
                .insert(key.into(), present.then(|| new.into_boxed_slice()));
        }
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
        let held = std::mem::take(&mut self.held);
        let mut writes = held.iter().map(|(k, v)| (&k[..], v.as_deref()));
        // Restored writes are older than held ones: they land first, in the same batch.
        self.restored
            .apply_followed_by(&mut *self.inner, &mut writes, changelog_offset);
    }

    fn abort(&mut self) {
        self.held.clear();
        self.restored.apply(&mut *self.inner, None);
    }

    fn changelog_offset(&self) -> Option<i64> {
        self.inner.changelog_offset()
    }

    fn failure(&self) -> Option<String> {
        self.inner.failure()
    }
}
