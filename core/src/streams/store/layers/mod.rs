//! The layers every store is made of, as Kafka Streams wraps its stores: over an inner
//! [`BytesStore`], an optional [`WriteBuffer`] (writes held until a checkpoint after their
//! commit), an optional [`ChangeLogging`] layer (every write recorded for the changelog
//! topic) and an optional [`RecordCache`] (`statestore.cache.max.bytes`: writes coalesced per
//! key until flushed or evicted). Each is a [`StoreLayer`]; key-value, window and session
//! stores are built over the top one, so every inner store gets them all.

mod cache;
mod cache_budget;
mod flushed;
mod key_filter;
mod logging;
mod overlay;
mod restored;
mod use_order;
mod write_buffer;

use std::ops::Bound;

pub use cache::RecordCache;
pub use cache_budget::CacheBudget;
pub use flushed::Flushed;
pub use logging::{ChangeLogging, ChangelogKeys};
pub use overlay::key_head;
pub use write_buffer::WriteBuffer;

use self::restored::RestoreBatch;
use super::changelog::ChangelogBatch;
use super::inner::{BytesStore, Visit};
use super::{ChangelogRecord, UpdateBytes};

/// One layer of a store: what the layer above (or the store's logic) calls. Writes come in
/// three kinds: a write of the store ([`put`](Self::put), [`update`](Self::update)), which
/// the changelog carries; a write it does not carry ([`put_unlogged`](Self::put_unlogged):
/// indexes, expiry); and a write read back from the changelog
/// ([`restore`](Self::restore)), which goes straight to the inner store.
pub trait StoreLayer: Send {
    /// Appends the value of `key` to `out`; `false` when there is none.
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool;

    /// Calls `visit` for the entries within the bounds, in key order, until it returns
    /// `false`.
    fn scan(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, visit: &mut Visit<'_>);

    /// The number of entries.
    fn len(&self) -> usize;

    /// Whether the store holds nothing.
    fn is_empty(&self) -> bool {
        let mut empty = true;
        self.scan(
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            &mut |_, _| {
                empty = false;
                false
            },
        );
        empty
    }

    /// Writes `value` for `key` (`None` deletes it).
    fn put(&mut self, key: &[u8], value: Option<&[u8]>);

    /// Writes what `update` makes of the value of `key` (see [`BytesStore::update`]).
    fn update(&mut self, key: &[u8], update: &mut UpdateBytes<'_>);

    /// Writes a run of entries, as a cache's flush sends them down: the same as a
    /// [`put`](Self::put) of each in turn. A run in strictly ascending key order lets a
    /// layer merge it into what it holds in one pass instead of a search per key.
    fn put_run(&mut self, run: &[(&[u8], Option<&[u8]>)]) {
        for &(key, value) in run {
            self.put(key, value);
        }
    }

    /// A write the changelog does not carry.
    fn put_unlogged(&mut self, key: &[u8], value: Option<&[u8]>);

    /// A write read back from the changelog, for the inner store. The bottom layer may hold
    /// restored writes to apply many in one batch: without a write buffer they reach the
    /// inner store (and reads) at the next [`commit`](Self::commit) or
    /// [`settle_restored`](Self::settle_restored), or once enough are held; a write buffer
    /// holds them as committed writes, read at once, until a
    /// [`checkpoint`](Self::checkpoint).
    fn restore(&mut self, key: &[u8], value: Option<&[u8]>);

    /// Applies the restored writes held, so that reads and scans see them.
    fn settle_restored(&mut self);

    /// The writes recorded for the changelog since it was last cleared, in order.
    fn changelog(&self) -> ChangelogBatch<'_>;

    /// Forgets the writes [`changelog`](Self::changelog) shows, once they are sent.
    fn clear_changelog(&mut self);

    /// The writes recorded for the changelog, as records, and clears them.
    fn take_changelog(&mut self) -> Vec<ChangelogRecord> {
        let records = self.changelog().to_records();
        self.clear_changelog();
        records
    }

    /// Writes what a cache holds down to the layers below it (and so to the changelog).
    fn flush(&mut self);

    /// The writes so far are committed, the changelog reaching `changelog_offset`
    /// (exclusive) when the store is logged. A store without a write buffer records the
    /// offset in its inner store at once; a write buffer keeps the committed writes (a key
    /// written again before the [`checkpoint`](Self::checkpoint) reaches the inner store
    /// once).
    fn commit(&mut self, changelog_offset: Option<i64>);

    /// The writes so far belong to a transaction whose commit is in flight: writes from now
    /// on are of the next interval, held apart from them. The next [`commit`](Self::commit)
    /// commits the sealed writes only, and no [`checkpoint`](Self::checkpoint) applies them
    /// before it; an [`abort`](Self::abort) before it abandons both intervals. Nothing for a
    /// store without a write buffer.
    fn seal(&mut self) {}

    /// Applies the committed writes a write buffer holds to the inner store, in one batch
    /// with the changelog offset they reach. One batch lands at a time: `when` says whether
    /// the checkpoint waits for the last one or, while it is still landing, leaves its writes
    /// to the next. Nothing for the other layers.
    fn checkpoint(&mut self, when: Checkpoint);

    /// Roughly how many bytes of memory the write buffer takes: its committed and open
    /// writes and the batch of its last checkpoint while that lands. What tells the runtime
    /// to checkpoint early, and what it holds to `state.checkpoint.max.bytes`.
    fn held_bytes(&self) -> usize;

    /// From now on the store's record cache keeps each entry it sends down (at a flush or an
    /// eviction) for [`swap_flushed`](Self::swap_flushed), with the value it replaced below
    /// when `old_values`: its writer forwards updates then, as Kafka's cache flush listener
    /// does, instead of at every write. `false` when the store has no cache.
    fn forward_flushes(&mut self, _old_values: bool) -> bool {
        false
    }

    /// Exchanges the entries the cache kept with `into` (which the caller emptied).
    fn swap_flushed(&mut self, _into: &mut Flushed) {}

    /// The writes since the last commit are abandoned: a write buffer and a cache forget
    /// them, the inner store keeps what it had.
    fn abort(&mut self);

    /// The changelog offset the inner store's contents reach.
    fn changelog_offset(&self) -> Option<i64>;

    /// What went wrong in the inner store, if anything did ([`BytesStore::failure`]).
    fn failure(&self) -> Option<String>;
}

/// When a checkpoint hands its batch to the inner store, if the last checkpoint's batch is
/// still landing (a store on disk applies batches on another thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checkpoint {
    /// After the last batch has landed, waiting for it: at a close or a revocation, or once
    /// the buffer holds too much.
    Wait,
    /// Now if the last batch has landed; otherwise the committed writes wait for the next
    /// checkpoint and the caller goes on: a periodic checkpoint never stalls processing.
    IfLanded,
}

/// Which layers a store gets over its inner store.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LayerConfig {
    /// Record its writes for the changelog topic.
    pub logging: bool,
    /// Hold writes in a record cache drawing from this budget (`None`: no cache).
    pub cache: Option<CacheBudget>,
    /// Hold writes until a checkpoint after their commit (exactly-once: the inner store
    /// holds committed state only; either guarantee: a key written often reaches the inner
    /// store once per checkpoint).
    pub write_buffer: bool,
}

impl LayerConfig {
    /// A logged store without cache or write buffer: what the `TestDriver` gives its stores.
    pub const LOGGED: LayerConfig = LayerConfig {
        logging: true,
        cache: None,
        write_buffer: false,
    };

    /// A record cache of its own of `max_bytes` (none for 0).
    pub fn own_cache(max_bytes: usize) -> Option<CacheBudget> {
        (max_bytes > 0).then(|| CacheBudget::new(max_bytes))
    }

    /// The layers of `config` over `inner`, bottom to top: write buffer, change-logging
    /// (changelog keys in the layout `keys`), record cache.
    pub fn build(self, inner: Box<dyn BytesStore>, keys: ChangelogKeys) -> Box<dyn StoreLayer> {
        let mut store: Box<dyn StoreLayer> = if self.write_buffer {
            Box::new(WriteBuffer::new(inner))
        } else {
            Box::new(Unbuffered::new(inner))
        };
        if self.logging {
            store = Box::new(ChangeLogging::new(store, keys));
        }
        if let Some(budget) = self.cache {
            store = Box::new(RecordCache::sharing(store, budget));
        }
        store
    }
}

/// The inner store as the bottom layer, writing through (restored writes in batches).
pub struct Unbuffered {
    inner: Box<dyn BytesStore>,
    restored: RestoreBatch,
}

impl Unbuffered {
    /// The bottom layer over `inner`.
    pub fn new(inner: Box<dyn BytesStore>) -> Self {
        Self {
            inner,
            restored: RestoreBatch::default(),
        }
    }

    fn write(&mut self, key: &[u8], value: Option<&[u8]>) {
        // Restored writes are older: they land first.
        self.restored.apply(&mut *self.inner, None);
        match value {
            Some(v) => self.inner.put(key, v),
            None => self.inner.delete(key),
        }
    }
}

impl StoreLayer for Unbuffered {
    #[inline]
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
        debug_assert!(
            self.restored.is_empty(),
            "a read before restored writes settled"
        );
        self.inner.get_into(key, out)
    }

    fn scan(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, visit: &mut Visit<'_>) {
        debug_assert!(
            self.restored.is_empty(),
            "a scan before restored writes settled"
        );
        self.inner.scan(from, to, visit)
    }

    fn len(&self) -> usize {
        self.inner.len()
    }

    fn put(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.write(key, value)
    }

    #[inline]
    fn update(&mut self, key: &[u8], update: &mut UpdateBytes<'_>) {
        self.restored.apply(&mut *self.inner, None);
        self.inner.update(key, update)
    }

    fn put_unlogged(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.write(key, value)
    }

    fn restore(&mut self, key: &[u8], value: Option<&[u8]>) {
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
        if self.restored.is_empty() {
            if changelog_offset.is_some() {
                self.inner
                    .write_batch(&mut std::iter::empty(), changelog_offset);
            }
        } else {
            self.restored.apply(&mut *self.inner, changelog_offset);
        }
    }

    fn checkpoint(&mut self, _when: Checkpoint) {}

    fn held_bytes(&self) -> usize {
        0
    }

    fn abort(&mut self) {
        // Restored writes are committed ones: they stay.
        self.restored.apply(&mut *self.inner, None);
    }

    fn changelog_offset(&self) -> Option<i64> {
        self.inner.changelog_offset()
    }

    fn failure(&self) -> Option<String> {
        self.inner.failure()
    }
}

#[cfg(test)]
mod tests;
