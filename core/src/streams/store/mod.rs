//! State stores, as Kafka Streams layers them: a store of bytes (keys in the byte order of
//! their serialized form, which is the order range scans follow, as in Kafka) that records
//! every write in a changelog, so the runtime can ship the writes to the store's compacted
//! changelog topic and rebuild the store from it; a typed view over it with the store's
//! serdes; the declaration a topology holds ([`StoreBuilder`]); and values kept with their
//! timestamps, as the DSL's stores keep them.

mod builder;
mod key_value;
mod timestamped;

pub use builder::{InMemoryStores, StoreBuilder, StoreKind, StoreSupplier};
pub use key_value::{
    ChangelogRecord, InMemoryKeyValueStore, KeyValueBytesStore, KeyValueSerdes, KeyValueStore,
};
pub use timestamped::{TimestampedSerde, ValueAndTimestamp};
