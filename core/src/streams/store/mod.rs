//! State stores, as Kafka Streams layers them: a store of bytes (keys in the byte order of
//! their serialized form, which is the order range scans follow, as in Kafka) that records
//! every write in a changelog, so the runtime can ship the writes to the store's compacted
//! changelog topic and rebuild the store from it; and a typed view over it with the store's
//! serdes.

mod key_value;

pub use key_value::{ChangelogRecord, InMemoryKeyValueStore, KeyValueBytesStore, KeyValueStore};
