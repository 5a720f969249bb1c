//! [`StoreInstance`]: a store of a task as its processors reach it — a key-value, window or
//! session store over its layers, or a global store the tasks of an instance share — and
//! what the task engine does to each store whatever its kind (flush, commit, checkpoint,
//! abort, restore).

use std::sync::{Arc, Mutex};

use super::{
    BytesStore, CacheBudget, ChangelogBatch, ChangelogRecord, Checkpoint, Flushed,
    KeyValueBytesStore, LayerConfig, LayeredKeyValueStore, SessionBytesStore, StoreBuilder,
    StoreLayer, WindowBytesStore,
};
use crate::serde::SerdeError;

/// A store of a task, as its kind builds it ([`super::kind::KindRules::build`]).
pub enum StoreInstance {
    /// A key-value store.
    KeyValue(Box<dyn KeyValueBytesStore>),
    /// A window store.
    Window(Box<dyn WindowBytesStore>),
    /// A session store.
    Session(Box<dyn SessionBytesStore>),
    /// A key-value store the tasks of an instance share (a global store).
    Shared(SharedStore),
}

/// A key-value store several tasks use.
pub type SharedStore = Arc<Mutex<Box<dyn KeyValueBytesStore>>>;

impl StoreInstance {
    /// The store `definition` declares, over `inner`, with a record cache drawing from
    /// `cache` (`None`: no cache) and, under exactly-once, a write buffer. A global store has neither: it is written only
    /// from its topic.
    pub fn build(
        definition: &StoreBuilder,
        inner: Box<dyn BytesStore>,
        cache: Option<CacheBudget>,
        write_buffer: bool,
    ) -> Self {
        let name = definition.name();
        let config = LayerConfig {
            logging: definition.logging(),
            cache,
            write_buffer,
        };
        if definition.is_global() {
            // Read by every task of the instance, written only from its topic.
            let config = LayerConfig {
                logging: false,
                ..LayerConfig::default()
            };
            let store: Box<dyn KeyValueBytesStore> =
                Box::new(LayeredKeyValueStore::new(name, inner, config));
            return Self::Shared(Arc::new(Mutex::new(store)));
        }
        definition.kind().rules().build(name, inner, config)
    }

    /// Calls `f` with the store's layers. A global store's are locked meanwhile.
    fn with_layers<R>(&mut self, f: impl FnOnce(&mut dyn StoreLayer) -> R) -> R {
        match self {
            Self::KeyValue(s) => f(s.layers_mut()),
            Self::Window(s) => f(s.layers_mut()),
            Self::Session(s) => f(s.layers_mut()),
            Self::Shared(s) => f(s.lock().unwrap_or_else(|e| e.into_inner()).layers_mut()),
        }
    }

    /// The writes since the changelog was last cleared. A global store has none: it is
    /// restored from its source topic, as in Kafka Streams.
    pub fn changelog(&self) -> ChangelogBatch<'_> {
        match self {
            Self::KeyValue(s) => s.layers().changelog(),
            Self::Window(s) => s.layers().changelog(),
            Self::Session(s) => s.layers().changelog(),
            Self::Shared(_) => ChangelogBatch::EMPTY,
        }
    }

    /// Forgets the writes [`StoreInstance::changelog`] shows.
    pub fn clear_changelog(&mut self) {
        self.with_layers(|l| l.clear_changelog())
    }

    /// Sends what the store's cache holds down to its changelog and inner store: what a
    /// commit does first.
    pub fn flush(&mut self) {
        self.with_layers(|l| l.flush())
    }

    /// The store's writes are committed, its changelog reaching `changelog_offset`.
    pub fn commit(&mut self, changelog_offset: Option<i64>) {
        self.with_layers(|l| l.commit(changelog_offset))
    }

    /// The store's writes so far belong to a commit in flight; later ones are held apart
    /// (see [`StoreLayer::seal`]).
    pub fn seal(&mut self) {
        self.with_layers(|l| l.seal())
    }

    /// Applies the committed writes a write buffer holds to the inner store, in one batch
    /// (see [`Checkpoint`] for `when`).
    pub fn checkpoint(&mut self, when: Checkpoint) {
        self.with_layers(|l| l.checkpoint(when))
    }

    /// Roughly how many bytes the store's write buffer holds.
    pub fn held_bytes(&mut self) -> usize {
        self.with_layers(|l| l.held_bytes())
    }

    /// Makes the store's cache keep what it flushes, for its writer to forward; `false` when
    /// it has no cache (see [`StoreLayer::forward_flushes`]).
    pub fn forward_flushes(&mut self, old_values: bool) -> bool {
        self.with_layers(|l| l.forward_flushes(old_values))
    }

    /// Exchanges what the store's cache flushed with `into`.
    pub fn swap_flushed(&mut self, into: &mut Flushed) {
        self.with_layers(|l| l.swap_flushed(into))
    }

    /// The store's writes since the last commit are abandoned.
    pub fn abort(&mut self) {
        self.with_layers(|l| l.abort())
    }

    /// The changelog offset the store's inner contents reach.
    pub fn changelog_offset(&mut self) -> Option<i64> {
        self.with_layers(|l| l.changelog_offset())
    }

    /// Applies a record read back from the store's changelog (restoration). A global store
    /// is restored from its topic instead and takes none.
    pub fn restore(&mut self, record: ChangelogRecord) -> Result<(), SerdeError> {
        match self {
            Self::KeyValue(s) => {
                s.restore(record);
                Ok(())
            }
            Self::Window(s) => s.restore(record),
            Self::Session(s) => s.restore(record),
            Self::Shared(_) => Ok(()),
        }
    }

    /// What went wrong in the store's inner store, if anything did.
    pub fn failure(&mut self) -> Option<String> {
        self.with_layers(|l| l.failure())
    }
}
