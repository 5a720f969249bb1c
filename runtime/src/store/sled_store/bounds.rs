//! [`TreeShare`]: what every [`Pages`](super::Pages) over one sled tree shares: the lock that
//! scans hold batches off with, and the pages' bounds kept in memory, so that finding the
//! page of a key is a search in memory and one exact sled lookup, not a reverse sled range
//! (which copies a whole sled node each time).
//!
//! The bounds are read from the tree by the first batch its writer applies and kept by every
//! batch after. A batch that adds or removes pages makes a count odd while it runs, as a
//! sequence lock: a reader that sees the count odd, or changed once it has read, does not
//! trust what it found and reads sled's range instead.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use sled::IVec;

/// A page key (its bound under the page prefix) that a batch adds (`true`) or removes.
pub(super) type BoundChange = (IVec, bool);

/// Shared by every [`Pages`](super::Pages) of one tree.
#[derive(Debug, Default)]
pub(crate) struct TreeShare {
    /// Held for reading by scans and for writing by each sled batch of pages.
    scans: RwLock<()>,
    /// The page keys, once read from the tree.
    bounds: RwLock<Option<BTreeSet<IVec>>>,
    /// Odd while a batch that adds or removes pages is applied.
    changing: AtomicU64,
}

/// A tree's share, as stores over it hold it.
pub(crate) type SharedTree = Arc<TreeShare>;

/// Where a reader started: the count of changes it must find unchanged.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ticket(u64);

impl TreeShare {
    /// Holds batches off while a scan runs.
    pub(super) fn hold_batches(&self) -> RwLockReadGuard<'_, ()> {
        self.scans.read().unwrap_or_else(|e| e.into_inner())
    }

    /// A ticket for a read through the bounds, unless they are not read yet or a batch that
    /// changes them is under way.
    pub(super) fn ticket(&self) -> Option<Ticket> {
        if self.bounds().is_none() {
            return None;
        }
        let count = self.changing.load(Ordering::SeqCst);
        (count % 2 == 0).then_some(Ticket(count))
    }

    /// Whether no batch changed the pages since `ticket` was taken.
    pub(super) fn still(&self, ticket: Ticket) -> bool {
        self.changing.load(Ordering::SeqCst) == ticket.0
    }

    /// The key of the page with the greatest bound at or below `key` (a page key too), or
    /// of the first page after `key` when `after`; `None` in the outer option when the
    /// bounds are not read yet.
    pub(super) fn find(&self, key: &[u8], after: bool) -> Option<Option<IVec>> {
        let bounds = self.bounds();
        let bounds = bounds.as_ref()?;
        Some(if after {
            let range = (Bound::Excluded(key), Bound::Unbounded);
            bounds.range::<[u8], _>(range).next().cloned()
        } else {
            let range = (Bound::Unbounded, Bound::Included(key));
            bounds.range::<[u8], _>(range).next_back().cloned()
        })
    }

    /// Reads the bounds from `page_keys` unless they are read: called by the tree's writer
    /// before a batch, so no batch runs meanwhile.
    pub(super) fn read_bounds(
        &self,
        page_keys: impl FnOnce() -> sled::Result<BTreeSet<IVec>>,
    ) -> sled::Result<()> {
        if self.bounds().is_none() {
            let read = page_keys()?;
            *self.bounds.write().unwrap_or_else(|e| e.into_inner()) = Some(read);
        }
        Ok(())
    }

    /// Applies `batch` with `apply`, scans held off, and keeps the bounds as `changes`
    /// leaves them (in order; a later change of a key overrides an earlier one).
    pub(super) fn apply_batch(
        &self,
        changes: &[BoundChange],
        apply: impl FnOnce() -> sled::Result<()>,
    ) -> sled::Result<()> {
        let _scans_wait = self.scans.write().unwrap_or_else(|e| e.into_inner());
        if changes.is_empty() {
            return apply();
        }
        self.changing.fetch_add(1, Ordering::SeqCst);
        let applied = apply();
        {
            let mut bounds = self.bounds.write().unwrap_or_else(|e| e.into_inner());
            match (&applied, bounds.as_mut()) {
                (Ok(()), Some(bounds)) => {
                    for (key, added) in changes {
                        if *added {
                            bounds.insert(key.clone());
                        } else {
                            bounds.remove(key);
                        }
                    }
                }
                // What the tree holds is not known: the bounds are read again.
                _ => *bounds = None,
            }
        }
        self.changing.fetch_add(1, Ordering::SeqCst);
        applied
    }

    /// The page keys held in memory, in order, once read.
    #[cfg(test)]
    pub(crate) fn bound_keys(&self) -> Option<Vec<Vec<u8>>> {
        let bounds = self.bounds();
        Some(bounds.as_ref()?.iter().map(|k| k.to_vec()).collect())
    }

    fn bounds(&self) -> RwLockReadGuard<'_, Option<BTreeSet<IVec>>> {
        self.bounds.read().unwrap_or_else(|e| e.into_inner())
    }
}
