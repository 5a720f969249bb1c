//! Key-value stores: [`KeyValueBytesStore`] (what the engine needs of any store: point
//! reads and writes, range and prefix scans in key order, and the changelog of its writes),
//! [`InMemoryKeyValueStore`], and [`KeyValueStore`], the typed view processors use.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use crate::serde::{Serde, SerdeError};

/// One write of a store, as its changelog topic carries it: the key and the new value, or
/// `None` for a deletion (a tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangelogRecord {
    /// The serialized key.
    pub key: Bytes,
    /// The serialized value, `None` when the key was deleted.
    pub value: Option<Bytes>,
}

/// A store of serialized keys and values, iterated in the byte order of the keys.
pub trait KeyValueBytesStore: Send {
    /// The store's name.
    fn name(&self) -> &str;

    /// The value of `key`.
    fn get(&self, key: &[u8]) -> Option<Bytes>;

    /// Writes `value` for `key`, or deletes `key` with `None`; the write is also recorded in
    /// the changelog.
    fn put(&mut self, key: Bytes, value: Option<Bytes>);

    /// The entries with `from <= key <= to` (both bounds included, as Kafka's `range`), in key
    /// order.
    fn range(&self, from: &[u8], to: &[u8]) -> Vec<(Bytes, Bytes)>;

    /// The entries whose key starts with `prefix`, in key order.
    fn prefix_scan(&self, prefix: &[u8]) -> Vec<(Bytes, Bytes)>;

    /// Every entry, in key order.
    fn all(&self) -> Vec<(Bytes, Bytes)>;

    /// The number of entries.
    fn len(&self) -> usize;

    /// Whether the store holds nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The writes since the last call, in the order they were made.
    fn take_changelog(&mut self) -> Vec<ChangelogRecord>;

    /// Applies a changelog record without recording it again (restoration).
    fn restore(&mut self, record: ChangelogRecord);
}

/// A key-value store in memory: a `BTreeMap` of bytes and the changelog of its writes.
#[derive(Debug, Clone, Default)]
pub struct InMemoryKeyValueStore {
    name: String,
    entries: BTreeMap<Bytes, Bytes>,
    changelog: Vec<ChangelogRecord>,
}

impl InMemoryKeyValueStore {
    /// An empty store called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    fn apply(&mut self, key: Bytes, value: Option<Bytes>) {
        match value {
            Some(v) => {
                self.entries.insert(key, v);
            }
            None => {
                self.entries.remove(&key);
            }
        }
    }
}

fn collect<'a>(entries: impl Iterator<Item = (&'a Bytes, &'a Bytes)>) -> Vec<(Bytes, Bytes)> {
    entries.map(|(k, v)| (k.clone(), v.clone())).collect()
}

impl KeyValueBytesStore for InMemoryKeyValueStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn get(&self, key: &[u8]) -> Option<Bytes> {
        self.entries.get(key).cloned()
    }

    fn put(&mut self, key: Bytes, value: Option<Bytes>) {
        self.changelog.push(ChangelogRecord {
            key: key.clone(),
            value: value.clone(),
        });
        self.apply(key, value);
    }

    fn range(&self, from: &[u8], to: &[u8]) -> Vec<(Bytes, Bytes)> {
        if from > to {
            return Vec::new();
        }
        let bounds: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(from), Bound::Included(to));
        collect(self.entries.range::<[u8], _>(bounds))
    }

    fn prefix_scan(&self, prefix: &[u8]) -> Vec<(Bytes, Bytes)> {
        let from: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(prefix), Bound::Unbounded);
        collect(
            self.entries
                .range::<[u8], _>(from)
                .take_while(|(k, _)| k.starts_with(prefix)),
        )
    }

    fn all(&self) -> Vec<(Bytes, Bytes)> {
        collect(self.entries.iter())
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn take_changelog(&mut self) -> Vec<ChangelogRecord> {
        std::mem::take(&mut self.changelog)
    }

    fn restore(&mut self, record: ChangelogRecord) {
        self.apply(record.key, record.value);
    }
}

/// A typed view of a store: keys and values go through the store's serdes.
pub struct KeyValueStore<K, V> {
    inner: Box<dyn KeyValueBytesStore>,
    keys: Arc<dyn Serde<Value = K>>,
    values: Arc<dyn Serde<Value = V>>,
}

impl<K, V> std::fmt::Debug for KeyValueStore<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyValueStore")
            .field("name", &self.inner.name())
            .field("entries", &self.inner.len())
            .finish()
    }
}

impl<K: 'static, V: 'static> KeyValueStore<K, V> {
    /// A typed view of `inner`.
    pub fn new(
        inner: Box<dyn KeyValueBytesStore>,
        keys: Arc<dyn Serde<Value = K>>,
        values: Arc<dyn Serde<Value = V>>,
    ) -> Self {
        Self {
            inner,
            keys,
            values,
        }
    }

    /// The store of bytes underneath.
    pub fn bytes(&mut self) -> &mut dyn KeyValueBytesStore {
        &mut *self.inner
    }

    fn key(&self, key: &K) -> Result<Bytes, SerdeError> {
        self.keys.serialize(self.inner.name(), key)
    }

    fn decode(&self, entries: Vec<(Bytes, Bytes)>) -> Result<Vec<(K, V)>, SerdeError> {
        let name = self.inner.name();
        entries
            .into_iter()
            .map(|(k, v)| {
                Ok((
                    self.keys.deserialize(name, &k)?,
                    self.values.deserialize(name, &v)?,
                ))
            })
            .collect()
    }

    /// The value of `key`.
    pub fn get(&self, key: &K) -> Result<Option<V>, SerdeError> {
        let key = self.key(key)?;
        self.inner
            .get(&key)
            .map(|v| self.values.deserialize(self.inner.name(), &v))
            .transpose()
    }

    /// Writes `value` for `key`.
    pub fn put(&mut self, key: &K, value: &V) -> Result<(), SerdeError> {
        let k = self.key(key)?;
        let v = self.values.serialize(self.inner.name(), value)?;
        self.inner.put(k, Some(v));
        Ok(())
    }

    /// Deletes `key`, returning its value.
    pub fn delete(&mut self, key: &K) -> Result<Option<V>, SerdeError> {
        let old = self.get(key)?;
        let k = self.key(key)?;
        self.inner.put(k, None);
        Ok(old)
    }

    /// The entries from `from` to `to`, both included, in the order of their serialized keys.
    pub fn range(&self, from: &K, to: &K) -> Result<Vec<(K, V)>, SerdeError> {
        self.decode(self.inner.range(&self.key(from)?, &self.key(to)?))
    }

    /// Every entry, in the order of the serialized keys.
    pub fn all(&self) -> Result<Vec<(K, V)>, SerdeError> {
        self.decode(self.inner.all())
    }
}

#[cfg(test)]
mod tests;
