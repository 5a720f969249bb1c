//! [`LayeredKeyValueStore`]: the key-value store every task and the `TestDriver` use, made of
//! [layers](super::layers) over an inner [`BytesStore`] (in memory by default).

use std::ops::Bound;

use bytes::Bytes;

use super::inner::{scan_prefix, BytesStore, InMemoryBytesStore};
use super::kind::KindRules;
use super::layers::{ChangelogKeys, LayerConfig, StoreLayer};
use super::{ChangelogRecord, KeyValueBytesStore, StoreInstance, UpdateBytes};

/// The rules of key-value stores: changelog keys are the store's keys, the changelog is
/// compacted.
pub(crate) struct KeyValueRules;

impl KindRules for KeyValueRules {
    fn name(&self) -> &'static str {
        "key-value"
    }

    fn retention_ms(&self) -> i64 {
        0
    }

    fn changelog_configs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("cleanup.policy", "compact".to_string()),
            ("message.timestamp.type", "CreateTime".to_string()),
        ]
    }

    fn build(&self, name: &str, inner: Box<dyn BytesStore>, config: LayerConfig) -> StoreInstance {
        StoreInstance::KeyValue(Box::new(LayeredKeyValueStore::new(name, inner, config)))
    }
}

/// A key-value store over its layers.
pub struct LayeredKeyValueStore {
    name: String,
    layers: Box<dyn StoreLayer>,
}

impl std::fmt::Debug for LayeredKeyValueStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayeredKeyValueStore")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl LayeredKeyValueStore {
    /// The store called `name` over `inner`, with the layers `config` asks for (its
    /// changelog keys are the store's keys).
    pub fn new(name: impl Into<String>, inner: Box<dyn BytesStore>, config: LayerConfig) -> Self {
        Self {
            name: name.into(),
            layers: config.build(inner, ChangelogKeys::SAME),
        }
    }

    /// A logged store called `name` in memory, without cache or write buffer.
    pub fn in_memory(name: impl Into<String>) -> Self {
        Self::new(
            name,
            Box::new(InMemoryBytesStore::new()),
            LayerConfig::LOGGED,
        )
    }

    fn collect(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Vec<(Bytes, Bytes)> {
        let mut entries = Vec::new();
        self.layers.scan(from, to, &mut |k, v| {
            entries.push((Bytes::copy_from_slice(k), Bytes::copy_from_slice(v)));
            true
        });
        entries
    }
}

impl KeyValueBytesStore for LayeredKeyValueStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn get(&self, key: &[u8]) -> Option<Bytes> {
        let mut value = Vec::new();
        self.layers
            .get_into(key, &mut value)
            .then(|| Bytes::from(value))
    }

    #[inline]
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
        self.layers.get_into(key, out)
    }

    fn put(&mut self, key: Bytes, value: Option<Bytes>) {
        self.layers.put(&key, value.as_deref());
    }

    #[inline]
    fn update_slice(&mut self, key: &[u8], update: &mut UpdateBytes<'_>) {
        self.layers.update(key, update);
    }

    fn put_slice(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.layers.put(key, value);
    }

    fn range(&self, from: &[u8], to: &[u8]) -> Vec<(Bytes, Bytes)> {
        self.collect(Bound::Included(from), Bound::Included(to))
    }

    fn prefix_scan(&self, prefix: &[u8]) -> Vec<(Bytes, Bytes)> {
        let mut entries = Vec::new();
        scan_prefix(
            prefix,
            |from, to, visit| self.layers.scan(from, to, visit),
            &mut |k, v| {
                entries.push((Bytes::copy_from_slice(k), Bytes::copy_from_slice(v)));
                true
            },
        );
        entries
    }

    fn all(&self) -> Vec<(Bytes, Bytes)> {
        self.collect(Bound::Unbounded, Bound::Unbounded)
    }

    fn len(&self) -> usize {
        self.layers.len()
    }

    fn layers(&self) -> &dyn StoreLayer {
        &*self.layers
    }

    fn layers_mut(&mut self) -> &mut dyn StoreLayer {
        &mut *self.layers
    }

    fn restore(&mut self, record: ChangelogRecord) {
        self.layers.restore(&record.key, record.value.as_deref());
    }
}
