//! [`CacheBudget`]: the bytes that record caches may hold together, as Kafka Streams' thread
//! cache gives `statestore.cache.max.bytes` to a stream thread, shared by every store of its
//! tasks. A cache counts its entries against the budget it draws from, and a cache being
//! written sends its own oldest entries down while the caches together hold more than the
//! budget (Kafka's `ThreadCache.maybeEvict`), so that the memory of a thread's caches does
//! not grow with the number of its tasks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Debug)]
struct Shared {
    max_bytes: usize,
    held: AtomicUsize,
}

/// Bytes record caches draw from; clones share them.
#[derive(Debug, Clone)]
pub struct CacheBudget(Arc<Shared>);

impl CacheBudget {
    /// A budget of `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        Self(Arc::new(Shared {
            max_bytes,
            held: AtomicUsize::new(0),
        }))
    }

    /// The bytes the caches may hold together.
    pub fn max_bytes(&self) -> usize {
        self.0.max_bytes
    }

    /// The bytes the caches hold together.
    pub fn held_bytes(&self) -> usize {
        self.0.held.load(Ordering::Relaxed)
    }

    /// Whether the caches hold more than the budget.
    pub(crate) fn exceeded(&self) -> bool {
        self.held_bytes() > self.0.max_bytes
    }

    /// Counts `bytes` more held.
    pub(crate) fn take(&self, bytes: usize) {
        self.0.held.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts `bytes` fewer held.
    pub(crate) fn give_back(&self, bytes: usize) {
        self.0.held.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Budgets are the same when they share their bytes.
impl PartialEq for CacheBudget {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for CacheBudget {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::streams::store::layers::{RecordCache, StoreLayer, Unbuffered};
    use crate::streams::store::InMemoryBytesStore;

    fn cache(budget: &CacheBudget) -> RecordCache {
        let below = Unbuffered::new(Box::new(InMemoryBytesStore::new()));
        RecordCache::sharing(Box::new(below), budget.clone())
    }

    #[test]
    fn caches_sharing_a_budget_hold_no_more_than_it_together() {
        let budget = CacheBudget::new(1_000);
        let (mut a, mut b) = (cache(&budget), cache(&budget));
        for i in 0..100u32 {
            a.put(&i.to_be_bytes(), Some(b"value"));
        }
        let a_full = a.bytes();
        assert!(a_full <= 1_000 && a_full > 900, "{a_full}");
        assert_eq!(budget.held_bytes(), a_full);
        // A cache written while the budget is spent sends its own entries down, not another's.
        for i in 0..5u32 {
            b.put(&i.to_be_bytes(), Some(b"other"));
        }
        assert_eq!((a.bytes(), b.bytes()), (a_full, 0));
        let mut read = Vec::new();
        assert!(b.get_into(&3u32.to_be_bytes(), &mut read));
        assert_eq!(read, b"other");
        // A cache dropped gives its bytes back, and the other caches again.
        drop(a);
        assert_eq!(budget.held_bytes(), 0);
        b.put(b"k", Some(b"v"));
        assert!(b.bytes() > 0);
        assert_eq!(budget.held_bytes(), b.bytes());
    }
}
