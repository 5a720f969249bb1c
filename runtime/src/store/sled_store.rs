//! [`SledBytesStore`]: an inner store in a sled tree. The store's entries are kept in pages
//! (see `paged`), and the changelog offset its contents reach beside them, so that the offset a batch of writes
//! reaches is written with the last of its pages: after a crash the offset says where
//! restoration resumes, and restoring from there writes again whatever of a batch landed.

use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use eddy_core::streams::store::{
    bounds_hold_keys, BatchWrite, BytesStore, PendingBatch, SharedWrites, Visit,
};

use super::applier::{Applier, Job};
use super::supplier::TaskLease;

mod bound_index;
mod bounds;
mod page;
mod paged;

pub(crate) use bounds::{PageBudget, SharedTree, TreeShare};
use paged::sorted;
pub(crate) use paged::{checkpoint_writes, PageSize, Pages, CHANGELOG_OFFSET};

/// An inner store in a sled tree.
pub struct SledBytesStore {
    pages: Option<Pages>,
    changelog_offset: Option<i64>,
    /// The first failure, after which the store is unusable (shared with the thread that
    /// applies its checkpoints).
    failure: Arc<OnceLock<String>>,
    /// The thread that applies checkpoints, if the store has one.
    applier: Option<Applier>,
    /// The store's hold on its task's state, if it has one: the trees stay while it does.
    lease: Option<TaskLease>,
}

impl std::fmt::Debug for SledBytesStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledBytesStore")
            .field("changelog_offset", &self.changelog_offset)
            .field("failure", &self.failure.get())
            .finish_non_exhaustive()
    }
}

impl SledBytesStore {
    /// The store in `tree`, reading back the changelog offset it reached (and rewriting into
    /// pages the entries of a store written before pages).
    pub fn new(tree: sled::Tree) -> Self {
        Self::with_page_size(tree, PageSize::default(), SharedTree::default())
    }

    /// The store in `tree`, its pages of `size`; `share` is shared by every store opened
    /// over the tree, so that a batch applied through one waits for scans through the others
    /// and the page bounds kept in memory serve them all.
    pub(crate) fn with_page_size(tree: sled::Tree, size: PageSize, share: SharedTree) -> Self {
        let store = Self {
            pages: Some(Pages::new(tree, size, share)),
            changelog_offset: None,
            failure: Arc::default(),
            applier: None,
            lease: None,
        };
        store.opened()
    }

    fn opened(mut self) -> Self {
        let Some(pages) = self.pages() else {
            return self;
        };
        let read = pages.tree().get(CHANGELOG_OFFSET);
        if let Err(e) = pages.migrate_legacy_entries() {
            self.fail(format!(
                "the store's entries could not be rewritten as pages: {e}"
            ));
        }
        match read {
            Ok(Some(value)) => match <[u8; 8]>::try_from(&value[..]) {
                Ok(bytes) => self.changelog_offset = Some(i64::from_be_bytes(bytes)),
                Err(_) => self.fail(format!(
                    "the stored changelog offset has {} bytes, not 8",
                    value.len()
                )),
            },
            Ok(None) => {}
            Err(e) => self.fail(e),
        }
        self
    }

    /// A store that could not be opened: every read finds nothing, every write is dropped,
    /// and [`BytesStore::failure`] says why, so that its task stops.
    pub fn failed(reason: impl std::fmt::Display) -> Self {
        let store = Self {
            pages: None,
            changelog_offset: None,
            failure: Arc::default(),
            applier: None,
            lease: None,
        };
        store.fail(reason);
        store
    }

    /// The store, holding its task's state with `lease` for as long as it lives.
    pub(crate) fn leased(mut self, lease: TaskLease) -> Self {
        self.lease = Some(lease);
        self
    }

    /// The store, its checkpoints applied by `applier`'s thread.
    pub(crate) fn with_applier(mut self, applier: Applier) -> Self {
        self.applier = Some(applier);
        self
    }

    fn pages(&self) -> Option<&Pages> {
        self.pages.as_ref().filter(|_| self.failure.get().is_none())
    }

    fn fail(&self, reason: impl std::fmt::Display) {
        let _ = self.failure.set(reason.to_string());
    }

    /// Writes what is in memory to disk (sled writes in the background otherwise).
    pub fn flush(&self) {
        if let Some(Err(e)) = self.pages().map(|p| p.tree().flush()) {
            self.fail(e);
        }
    }

    /// Applies `writes` (sorted, one a key) and the changelog offset they reach.
    fn apply(&mut self, writes: &[BatchWrite<'_>], changelog_offset: Option<i64>) {
        let Some(pages) = self.pages() else {
            return;
        };
        match pages.apply(writes, |batch| record_offset(batch, changelog_offset)) {
            Ok(()) => {
                if changelog_offset.is_some() {
                    self.changelog_offset = changelog_offset;
                }
            }
            Err(e) => self.fail(e),
        }
    }
}

/// Adds the changelog offset a batch reaches, if any, to the batch.
pub(crate) fn record_offset(batch: &mut sled::Batch, changelog_offset: Option<i64>) {
    if let Some(offset) = changelog_offset {
        batch.insert(CHANGELOG_OFFSET, &offset.to_be_bytes());
    }
}

impl BytesStore for SledBytesStore {
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
        let Some(pages) = self.pages() else {
            return false;
        };
        pages.get_into(key, out).unwrap_or_else(|e| {
            self.fail(e);
            false
        })
    }

    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.apply(&[(key, Some(value))], None);
    }

    fn delete(&mut self, key: &[u8]) {
        self.apply(&[(key, None)], None);
    }

    fn scan(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, visit: &mut Visit<'_>) {
        let Some(pages) = self.pages() else {
            return;
        };
        if !bounds_hold_keys(from, to) {
            return;
        }
        if let Err(e) = pages.scan(from, to, visit) {
            self.fail(e);
        }
    }

    fn write_batch(
        &mut self,
        writes: &mut dyn Iterator<Item = BatchWrite<'_>>,
        changelog_offset: Option<i64>,
    ) {
        let writes = sorted(writes);
        self.apply(&writes, changelog_offset);
    }

    fn write_batch_later(
        &mut self,
        writes: SharedWrites,
        changelog_offset: Option<i64>,
    ) -> Option<PendingBatch> {
        let (Some(pages), Some(applier)) = (self.pages(), &self.applier) else {
            self.apply(&checkpoint_writes(&writes), changelog_offset);
            return None;
        };
        let (pending, done) = PendingBatch::new();
        let job = Job {
            pages: pages.clone(),
            writes,
            changelog_offset,
            failure: self.failure.clone(),
            done,
        };
        match applier.submit(job) {
            Ok(()) => {
                // What the store holds once the batch lands; the layer above reads the batch
                // until then.
                if changelog_offset.is_some() {
                    self.changelog_offset = changelog_offset;
                }
                Some(pending)
            }
            Err(job) => {
                // The thread is gone: the batch is applied here.
                self.apply(&checkpoint_writes(&job.writes), changelog_offset);
                job.done.finish(Ok(()));
                None
            }
        }
    }

    fn changelog_offset(&self) -> Option<i64> {
        self.changelog_offset
    }

    fn failure(&self) -> Option<String> {
        self.failure.get().cloned()
    }
}

#[cfg(test)]
pub(crate) mod tests;
