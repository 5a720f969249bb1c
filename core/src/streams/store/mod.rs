//! State stores, as Kafka Streams layers them: an inner store of bytes ([`BytesStore`]: keys
//! in the byte order of their serialized form, which is the order range scans follow, as in
//! Kafka), in memory or on disk; over it the [layers] every store gets — an
//! exactly-once write buffer, change-logging (every write recorded, so the runtime can ship
//! the writes to the store's compacted changelog topic and rebuild the store from it) and a
//! record cache; key-value, window and session stores over the layers, each kind with its
//! rules (`KindRules`, among the engine's internals: Kafka's changelog key layout and topic
//! configs for it, and the store it is built as); typed views with the store's serdes; the
//! declaration a topology holds ([`StoreBuilder`]); and values kept with their timestamps,
//! as the DSL's stores keep them.

mod builder;
mod changelog;
mod inner;
pub(crate) mod instance;
mod key_value;
pub(crate) mod kind;
mod layered;
pub mod layers;
mod layout;
mod query;
mod session;
pub(crate) mod small_bytes;
mod timestamped;
mod typed;
mod window;

pub use self::inner::{
    bounds_hold_keys, BatchDone, BatchWrite, BytesStore, InMemoryBytesStore, PendingBatch,
    SharedWrites, Visit,
};
pub use builder::{InMemoryStores, StoreBuilder, StoreKind, StoreSupplier};
pub use changelog::{ChangelogBatch, ChangelogWrites};
pub(crate) use instance::StoreInstance;
pub use key_value::{
    ChangelogRecord, KeyValueBytesStore, KeyValueSerdes, KeyValueStore, UpdateBytes,
};
pub use layered::LayeredKeyValueStore;
pub use layers::{CacheBudget, Checkpoint, Flushed, LayerConfig, StoreLayer};
pub use query::StoreDecoder;

/// The buffers a typed view of a store serializes keys and values into: kept by the task, so
/// that a lookup allocates nothing.
#[derive(Debug, Default)]
pub struct Scratch {
    /// The serialized key.
    pub key: Vec<u8>,
    /// The serialized value.
    pub value: Vec<u8>,
}
pub(crate) use session::session_of;
pub use session::{
    parse_session_store_key, session_store_key, LayeredSessionStore, SessionBytesStore,
};
pub use timestamped::{TimestampedSerde, ValueAndTimestamp};
pub use typed::{SessionStore, WindowStore};
pub(crate) use window::window_of;
pub use window::{parse_window_store_key, window_store_key, LayeredWindowStore, WindowBytesStore};

#[cfg(test)]
mod tests;
