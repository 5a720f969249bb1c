//! State stores, as Kafka Streams layers them: a store of bytes (keys in the byte order of
//! their serialized form, which is the order range scans follow, as in Kafka) that records
//! every write in a changelog, so the runtime can ship the writes to the store's compacted
//! changelog topic and rebuild the store from it; a typed view over it with the store's
//! serdes; window and session stores with Kafka's changelog key layouts; the declaration a topology holds ([`StoreBuilder`]); and values kept with their
//! timestamps, as the DSL's stores keep them.

mod builder;
mod changelog;
mod in_memory;
mod key_value;
mod session;
mod small_bytes;
mod timestamped;
mod typed;
mod window;

pub use builder::{InMemoryStores, StoreBuilder, StoreKind, StoreSupplier};
pub use changelog::ChangelogBatch;
pub use in_memory::InMemoryKeyValueStore;
pub use key_value::{
    ChangelogRecord, KeyValueBytesStore, KeyValueSerdes, KeyValueStore, UpdateBytes,
};

/// The buffers a typed view of a store serializes keys and values into: kept by the task, so
/// that a lookup allocates nothing.
#[derive(Debug, Default)]
pub struct Scratch {
    /// The serialized key.
    pub key: Vec<u8>,
    /// The serialized value.
    pub value: Vec<u8>,
}
pub use session::{
    parse_session_store_key, session_store_key, InMemorySessionStore, SessionBytesStore,
};
pub use timestamped::{TimestampedSerde, ValueAndTimestamp};
pub use typed::{SessionStore, WindowStore};
pub use window::{parse_window_store_key, window_store_key, InMemoryWindowStore, WindowBytesStore};
