//! [`TreeShare`]: what every [`Pages`](super::Pages) over one sled tree shares: the lock that
//! scans hold batches off with, and the pages' bounds kept in memory, each with the page's
//! bytes once a read has fetched them, so that reading a key is a search in memory and, when
//! its page is not held, one exact sled lookup — not a reverse sled range (which copies a
//! whole sled node each time), and not a walk of sled's tree for every read of a held page.
//!
//! The bounds are read from the tree by the first batch its writer applies and kept by every
//! batch after. A batch that adds or removes pages makes a count odd while it runs, as a
//! sequence lock: a reader that sees the count odd, or changed once it has read, does not
//! trust what it found and reads sled's range instead. A batch that rewrites pages holds
//! their new bytes once sled has them; a page read from sled is held only if no batch wrote
//! pages while it was read, so a page held is never older than the tree's.
//!
//! The pages held by every tree of an instance share one [`PageBudget`]: a tree over it gives
//! up pages not read since the hand of its clock last passed them before it holds another.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use sled::IVec;

use super::bound_index::BoundIndex;

/// A page key (its bound under the page prefix) that a batch adds (`true`) or removes.
pub(super) type BoundChange = (IVec, bool);

/// A page key and the bytes a batch writes to it.
pub(super) type PageWrite = (IVec, IVec);

/// What a page held in memory is counted at beyond its bytes: its allocation's header and
/// the slot beside its bound.
const HELD_PAGE_OVERHEAD: usize = 64;

/// How many times its bytes a page held is counted at. Held pages are replaced by every
/// checkpoint that rewrites them, and the holes the old ones leave among long-lived
/// allocations stay resident: measured at 10M keys of count state, pages held grew the
/// process by about 1.8 times what they held.
const HELD_PAGE_RESIDENCE: usize = 2;

/// The memory the pages held by an instance's trees may take together.
#[derive(Debug)]
pub(crate) struct PageBudget {
    most: usize,
    held: AtomicUsize,
}

impl PageBudget {
    /// A budget of `most` bytes.
    pub(crate) fn new(most: usize) -> Arc<Self> {
        Arc::new(Self {
            most,
            held: AtomicUsize::new(0),
        })
    }

    /// The bytes held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    fn take(&self, bytes: usize) {
        self.held.fetch_add(bytes, Ordering::Relaxed);
    }

    fn give_back(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::Relaxed);
    }

    fn room_for(&self, bytes: usize) -> bool {
        self.held.load(Ordering::Relaxed).saturating_add(bytes) <= self.most
    }
}

/// A page's bound in memory, with the page's bytes while they are held.
#[derive(Debug, Default)]
struct Slot {
    page: Mutex<Option<IVec>>,
    /// Read since the clock's hand last passed.
    read: AtomicBool,
}

impl Slot {
    fn page(&self) -> std::sync::MutexGuard<'_, Option<IVec>> {
        self.page.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn cost(page: &IVec) -> usize {
    page.len() * HELD_PAGE_RESIDENCE + HELD_PAGE_OVERHEAD
}

/// Shared by every [`Pages`](super::Pages) of one tree.
#[derive(Debug)]
pub(crate) struct TreeShare {
    /// Held for reading by scans and for writing by each sled batch of pages.
    scans: RwLock<()>,
    /// The page keys, once read from the tree, each with its page while held.
    bounds: RwLock<Option<BoundIndex<Slot>>>,
    /// Odd while a batch that adds or removes pages is applied.
    changing: AtomicU64,
    /// Batches that wrote pages, counted once sled has them.
    written: AtomicU64,
    /// The bytes this tree's held pages count against the budget.
    held: AtomicUsize,
    budget: Arc<PageBudget>,
    /// Where the clock's hand stopped: the bound it looks at next.
    hand: Mutex<Option<IVec>>,
}

/// A tree's share, as stores over it hold it.
pub(crate) type SharedTree = Arc<TreeShare>;

impl Default for TreeShare {
    /// A share with a budget of its own of 8 MiB of pages.
    fn default() -> Self {
        Self::new(PageBudget::new(8 << 20))
    }
}

/// Where a reader started: the count of changes it must find unchanged, and of batches.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ticket {
    changing: u64,
    written: u64,
}

/// The page a search through the bounds found: its key, and its bytes if they are held.
pub(super) type Found = (IVec, Option<IVec>);

impl TreeShare {
    /// A share whose held pages count against `budget`.
    pub(crate) fn new(budget: Arc<PageBudget>) -> Self {
        Self {
            scans: RwLock::default(),
            bounds: RwLock::default(),
            changing: AtomicU64::new(0),
            written: AtomicU64::new(0),
            held: AtomicUsize::new(0),
            budget,
            hand: Mutex::default(),
        }
    }

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
        let written = self.written.load(Ordering::SeqCst);
        let changing = self.changing.load(Ordering::SeqCst);
        (changing % 2 == 0).then_some(Ticket { changing, written })
    }

    /// Whether no batch changed the pages since `ticket` was taken.
    pub(super) fn still(&self, ticket: Ticket) -> bool {
        self.changing.load(Ordering::SeqCst) == ticket.changing
    }

    /// The key of the page with the greatest bound at or below `key` (a page key too), or
    /// of the first page after `key` when `after`, with the page if it is held; `None` in
    /// the outer option when the bounds are not read yet.
    pub(super) fn find(&self, key: &[u8], after: bool) -> Option<Option<Found>> {
        let bounds = self.bounds();
        let bounds = bounds.as_ref()?;
        let found = match after {
            true => bounds.after(key),
            false => bounds.at_or_before(key),
        };
        let found = found.and_then(|i| bounds.get(i));
        Some(found.map(|(key, slot)| {
            let page = slot.page().clone();
            if page.is_some() && !slot.read.load(Ordering::Relaxed) {
                slot.read.store(true, Ordering::Relaxed);
            }
            (key.clone(), page)
        }))
    }

    /// Holds `page`, read from sled at `key` under `ticket`, unless a batch wrote pages
    /// since (it may be older than the tree's) or the budget has no room for it that this
    /// tree can make.
    pub(super) fn hold(&self, key: &IVec, page: &IVec, ticket: Ticket) {
        let bounds = self.bounds();
        let Some(slot) = bounds.as_ref().and_then(|b| b.slot(key)) else {
            return;
        };
        let cost = cost(page);
        while !self.budget.room_for(cost) {
            if !self.give_up_one(bounds.as_ref(), key) {
                return;
            }
        }
        let mut held = slot.page();
        // Checked under the slot's lock, which a batch takes to write the slot after it
        // counts itself: a batch either finds this page held and replaces it, or is seen.
        if held.is_some() || self.written.load(Ordering::SeqCst) != ticket.written {
            return;
        }
        *held = Some(page.clone());
        self.held.fetch_add(cost, Ordering::Relaxed);
        self.budget.take(cost);
    }

    /// Moves the clock's hand on until it gives up a held page not read since it last
    /// passed (not `keep`'s); `false` when the tree holds none it can give up.
    fn give_up_one(&self, bounds: Option<&BoundIndex<Slot>>, keep: &IVec) -> bool {
        let Some(bounds) = bounds else {
            return false;
        };
        if self.held.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mut hand = self.hand.lock().unwrap_or_else(|e| e.into_inner());
        let from = hand.clone().unwrap_or_default();
        let len = bounds.len();
        let start = bounds
            .position(&from)
            .or_else(|| bounds.after(&from))
            .unwrap_or(len);
        // Twice round: the first pass may only clear what was read.
        let round = (start..len).chain(0..start).cycle().take(len * 2);
        for (key, slot) in round.filter_map(|i| bounds.get(i)) {
            if key == keep || slot.read.swap(false, Ordering::Relaxed) {
                continue;
            }
            let mut page = slot.page();
            if let Some(given) = page.take() {
                drop(page);
                self.release(cost(&given));
                *hand = Some(key.clone());
                return true;
            }
        }
        false
    }

    fn release(&self, cost: usize) {
        self.held.fetch_sub(cost, Ordering::Relaxed);
        self.budget.give_back(cost);
    }

    /// Gives up every page held (the bounds stay): when the tree's stores are closed.
    pub(crate) fn forget_pages(&self) {
        if let Some(bounds) = self.bounds().as_ref() {
            for (_, slot) in bounds.iter() {
                if let Some(page) = slot.page().take() {
                    self.release(cost(&page));
                }
            }
        }
    }

    /// Reads the bounds from `page_keys` unless they are read: called by the tree's writer
    /// before a batch, so no batch runs meanwhile.
    pub(super) fn read_bounds(
        &self,
        page_keys: impl FnOnce() -> sled::Result<Vec<IVec>>,
    ) -> sled::Result<()> {
        if self.bounds().is_none() {
            let read = BoundIndex::from_sorted(page_keys()?);
            *self.bounds.write().unwrap_or_else(|e| e.into_inner()) = Some(read);
        }
        Ok(())
    }

    /// Applies `batch` with `apply`, scans held off, and keeps the bounds as `changes`
    /// leaves them (in order; a later change of a key overrides an earlier one) and the held
    /// pages as `written` leaves them.
    pub(super) fn apply_batch(
        &self,
        changes: &[BoundChange],
        written: &[PageWrite],
        apply: impl FnOnce() -> sled::Result<()>,
    ) -> sled::Result<()> {
        let _scans_wait = self.scans.write().unwrap_or_else(|e| e.into_inner());
        if changes.is_empty() {
            let applied = apply();
            self.written.fetch_add(1, Ordering::SeqCst);
            let bounds = self.bounds();
            match (&applied, bounds.as_ref()) {
                (Ok(()), Some(bounds)) => self.rewrite_held(bounds, written),
                (Err(_), Some(_)) => {
                    drop(bounds);
                    self.forget_bounds();
                }
                (_, None) => {}
            }
            return applied;
        }
        self.changing.fetch_add(1, Ordering::SeqCst);
        let applied = apply();
        self.written.fetch_add(1, Ordering::SeqCst);
        match applied {
            Ok(()) => {
                let mut bounds = self.bounds.write().unwrap_or_else(|e| e.into_inner());
                if let Some(bounds) = bounds.as_mut() {
                    bounds.change(changes, |slot| {
                        let page = slot.page.into_inner().unwrap_or_else(|e| e.into_inner());
                        if let Some(page) = page {
                            self.release(cost(&page));
                        }
                    });
                    self.rewrite_held(bounds, written);
                }
            }
            // What the tree holds is not known: the bounds are read again.
            Err(_) => self.forget_bounds(),
        }
        self.changing.fetch_add(1, Ordering::SeqCst);
        applied
    }

    /// Replaces the held pages that `written` rewrote with their new bytes.
    fn rewrite_held(&self, bounds: &BoundIndex<Slot>, written: &[PageWrite]) {
        for (key, bytes) in written {
            let Some(slot) = bounds.slot(key) else {
                continue;
            };
            let mut page = slot.page();
            if let Some(old) = page.take() {
                self.release(cost(&old));
                // A page grown past the budget's room is read from sled again.
                let new_cost = cost(bytes);
                if self.budget.room_for(new_cost) {
                    *page = Some(bytes.clone());
                    self.held.fetch_add(new_cost, Ordering::Relaxed);
                    self.budget.take(new_cost);
                }
            }
        }
    }

    /// Drops the bounds and every held page.
    fn forget_bounds(&self) {
        self.forget_pages();
        *self.bounds.write().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The page keys held in memory, in order, once read.
    #[cfg(test)]
    pub(crate) fn bound_keys(&self) -> Option<Vec<Vec<u8>>> {
        let bounds = self.bounds();
        Some(bounds.as_ref()?.iter().map(|(k, _)| k.to_vec()).collect())
    }

    /// The bytes the held pages count.
    #[cfg(test)]
    pub(crate) fn held_bytes(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    fn bounds(&self) -> RwLockReadGuard<'_, Option<BoundIndex<Slot>>> {
        self.bounds.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for TreeShare {
    fn drop(&mut self) {
        self.budget.give_back(*self.held.get_mut());
    }
}
