//! How a topology declares a store: its name, kind, serdes and whether it is logged to a
//! changelog topic. Each task builds its own instance over an inner store from a
//! [`StoreSupplier`] (in memory by default; the runtime supplies stores on disk).

use std::any::Any;
use std::sync::Arc;

use super::{BytesStore, InMemoryBytesStore, KeyValueSerdes};
use crate::serde::Serde;

/// Supplies the inner store of each store of a task: in memory by default. A store's kind,
/// its layers (changelog, cache, write buffer) and its key layout are built over it, so an
/// inner store only keeps bytes.
pub trait StoreSupplier: Send + Sync {
    /// The inner store of `definition` in the task `task` (`"0_1"`, or `"global"` for a
    /// global store), holding what it held when the store was last closed.
    fn inner(&self, task: &str, definition: &StoreBuilder) -> Box<dyn BytesStore>;
}

/// Stores in memory: what the `TestDriver` uses, and the default of a task.
#[derive(Debug, Clone, Copy, Default)]
pub struct InMemoryStores;

impl StoreSupplier for InMemoryStores {
    fn inner(&self, _task: &str, _definition: &StoreBuilder) -> Box<dyn BytesStore> {
        Box::new(InMemoryBytesStore::new())
    }
}

/// The kind of a store; what each kind decides is its
/// [`KindRules`](crate::streams::internals::KindRules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// Keys to values.
    KeyValue,
    /// Keys and window starts to values, windows kept for `retention_ms` after the latest.
    Window {
        /// How long windows are kept, in ms of window start.
        retention_ms: i64,
    },
    /// Keys and sessions to values, sessions kept for `retention_ms` after the latest end.
    Session {
        /// How long sessions are kept, in ms of session end.
        retention_ms: i64,
    },
}

/// A store's declaration: Kafka Streams' `StoreBuilder` (`Stores.keyValueStoreBuilder(…)`).
#[derive(Clone)]
pub struct StoreBuilder {
    name: String,
    kind: StoreKind,
    serdes: Arc<dyn Any + Send + Sync>,
    logging: bool,
    timestamped: bool,
    global: bool,
}

impl std::fmt::Debug for StoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreBuilder")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("logging", &self.logging)
            .finish()
    }
}

impl StoreBuilder {
    /// A key-value store called `name` with these serdes, logged to its changelog topic.
    pub fn key_value<K: 'static, V: 'static>(
        name: impl Into<String>,
        keys: impl Serde<Value = K>,
        values: impl Serde<Value = V>,
    ) -> Self {
        Self::key_value_with(name, Arc::new(keys), Arc::new(values))
    }

    /// A window store called `name` keeping windows for `retention_ms` (Kafka's
    /// `Stores.windowStoreBuilder`).
    pub fn window<K: 'static, V: 'static>(
        name: impl Into<String>,
        keys: impl Serde<Value = K>,
        values: impl Serde<Value = V>,
        retention_ms: i64,
    ) -> Self {
        Self {
            kind: StoreKind::Window { retention_ms },
            ..Self::key_value(name, keys, values)
        }
    }

    /// A session store called `name` keeping sessions for `retention_ms` (Kafka's
    /// `Stores.sessionStoreBuilder`).
    pub fn session<K: 'static, V: 'static>(
        name: impl Into<String>,
        keys: impl Serde<Value = K>,
        values: impl Serde<Value = V>,
        retention_ms: i64,
    ) -> Self {
        Self {
            kind: StoreKind::Session { retention_ms },
            ..Self::key_value(name, keys, values)
        }
    }

    pub(crate) fn with_kind(mut self, kind: StoreKind) -> Self {
        self.kind = kind;
        self
    }

    /// [`StoreBuilder::key_value`] with shared serdes.
    pub fn key_value_with<K: 'static, V: 'static>(
        name: impl Into<String>,
        keys: Arc<dyn Serde<Value = K>>,
        values: Arc<dyn Serde<Value = V>>,
    ) -> Self {
        Self {
            name: name.into(),
            kind: StoreKind::KeyValue,
            serdes: Arc::new(KeyValueSerdes { keys, values }),
            logging: true,
            timestamped: false,
            global: false,
        }
    }

    /// The same store without a changelog topic (its state is lost with its task's host).
    pub fn with_logging_disabled(mut self) -> Self {
        self.logging = false;
        self
    }

    /// The same store as a global store: one copy per application instance, filled from
    /// every partition of its topic, which is also its changelog (so it logs nothing).
    pub(crate) fn global(mut self) -> Self {
        self.global = true;
        self.logging = false;
        self
    }

    /// Whether this is a global store.
    pub fn is_global(&self) -> bool {
        self.global
    }

    pub(crate) fn timestamped(mut self) -> Self {
        self.timestamped = true;
        self
    }

    /// The store's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The store's kind.
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// How long a window or session store keeps its windows (0 for a key-value store).
    pub fn retention_ms(&self) -> i64 {
        self.kind.rules().retention_ms()
    }

    /// Whether writes go to a changelog topic.
    pub fn logging(&self) -> bool {
        self.logging
    }

    /// Whether values are stored with their timestamps (the stores of the DSL).
    pub fn is_timestamped(&self) -> bool {
        self.timestamped
    }

    pub(crate) fn serdes(&self) -> &Arc<dyn Any + Send + Sync> {
        &self.serdes
    }
}
