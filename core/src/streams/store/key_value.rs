//! Key-value stores: [`KeyValueBytesStore`] (what the engine needs of any store: point
//! reads and writes, range and prefix scans in key order, and its layers: changelog, cache
//! and write buffer),
//! and [`KeyValueStore`], the typed view processors use.

use std::sync::Arc;

use bytes::Bytes;

use super::layers::StoreLayer;
use super::Scratch;
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

/// What an update makes of a stored value: given the old value (or `None`) and a buffer, it
/// writes the new value into the buffer and says whether there is one (`false` deletes).
pub type UpdateBytes<'a> = dyn FnMut(Option<&[u8]>, &mut Vec<u8>) -> bool + 'a;

/// A store of serialized keys and values, iterated in the byte order of the keys.
pub trait KeyValueBytesStore: Send {
    /// The store's name.
    fn name(&self) -> &str;

    /// The value of `key`.
    fn get(&self, key: &[u8]) -> Option<Bytes>;

    /// Writes `value` for `key`, or deletes `key` with `None`; the write is also recorded in
    /// the changelog (when the store is logged).
    fn put(&mut self, key: Bytes, value: Option<Bytes>);

    /// Appends the value of `key` to `out`; `false` when there is none. What the typed view
    /// reads with, so that a store can hand out a value without allocating.
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
        match self.get(key) {
            Some(v) => {
                out.extend_from_slice(&v);
                true
            }
            None => false,
        }
    }

    /// Reads the value of `key` and writes what `update` makes of it, in one lookup where the
    /// store can: `update` is given the old value (or `None`) and a buffer, and returns whether
    /// the buffer holds a new value (`false` deletes the key). The write is recorded in the
    /// changelog.
    fn update_slice(&mut self, key: &[u8], update: &mut UpdateBytes<'_>) {
        let old = self.get(key);
        let mut new = Vec::new();
        let present = update(old.as_deref(), &mut new);
        self.put_slice(key, present.then_some(&new[..]));
    }

    /// [`KeyValueBytesStore::put`] from borrowed bytes, which a store may copy without an
    /// allocation per write.
    fn put_slice(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.put(
            Bytes::copy_from_slice(key),
            value.map(Bytes::copy_from_slice),
        );
    }

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

    /// The layers the store is made of: its changelog, cache and write buffer.
    fn layers(&self) -> &dyn StoreLayer;

    /// The layers, to flush, commit or take the changelog.
    fn layers_mut(&mut self) -> &mut dyn StoreLayer;

    /// Applies a changelog record without recording it again (restoration).
    fn restore(&mut self, record: ChangelogRecord);
}

/// A typed update as a store applies it to bytes: decodes the old value (if any), calls the
/// update (once), and appends the new value to `out`; `false` deletes or keeps nothing. A
/// serde error goes to `result` (without the store's name, which only an error needs: the
/// caller puts it in afterwards) and changes nothing.
pub(crate) fn update_bytes<V: 'static>(
    values: &dyn Serde<Value = V>,
    update: &mut Option<impl FnOnce(Option<V>) -> Option<V>>,
    old: Option<&[u8]>,
    out: &mut Vec<u8>,
    result: &mut Result<(), SerdeError>,
) -> bool {
    let old = match old.map(|o| values.deserialize("", o)).transpose() {
        Ok(old) => old,
        Err(e) => {
            *result = Err(e);
            return false;
        }
    };
    let Some(new) = update.take().and_then(|u| u(old)) else {
        return false;
    };
    let start = out.len();
    if let Err(e) = values.serialize_into("", &new, out) {
        out.truncate(start);
        *result = Err(e);
        return false;
    }
    true
}

/// The serdes of a store's keys and values.
pub struct KeyValueSerdes<K, V> {
    /// How keys become bytes.
    pub keys: Arc<dyn Serde<Value = K>>,
    /// How values become bytes.
    pub values: Arc<dyn Serde<Value = V>>,
}

impl<K, V> Clone for KeyValueSerdes<K, V> {
    fn clone(&self) -> Self {
        Self {
            keys: self.keys.clone(),
            values: self.values.clone(),
        }
    }
}

/// The store under a typed view: borrowed from a task, or locked when tasks share it (a
/// global store).
enum StoreRef<'a> {
    Borrowed(&'a mut (dyn KeyValueBytesStore + 'static)),
    Locked(std::sync::MutexGuard<'a, Box<dyn KeyValueBytesStore>>),
}

impl std::ops::Deref for StoreRef<'_> {
    type Target = dyn KeyValueBytesStore;

    fn deref(&self) -> &Self::Target {
        match self {
            Self::Borrowed(s) => &**s,
            Self::Locked(g) => &***g,
        }
    }
}

impl std::ops::DerefMut for StoreRef<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            Self::Borrowed(s) => &mut **s,
            Self::Locked(g) => &mut ***g,
        }
    }
}

/// A typed view of a store of bytes: keys and values go through the store's serdes. Processors
/// get one from their context for the length of a call.
pub struct KeyValueStore<'a, K, V> {
    inner: StoreRef<'a>,
    serdes: &'a KeyValueSerdes<K, V>,
    scratch: &'a mut Scratch,
}

impl<K, V> std::fmt::Debug for KeyValueStore<'_, K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyValueStore")
            .field("name", &self.inner.name())
            .field("entries", &self.inner.len())
            .finish()
    }
}

impl<'a, K: 'static, V: 'static> KeyValueStore<'a, K, V> {
    /// A typed view of `inner`; `scratch` is a buffer keys are serialized into for lookups.
    pub fn new(
        inner: &'a mut (dyn KeyValueBytesStore + 'static),
        serdes: &'a KeyValueSerdes<K, V>,
        scratch: &'a mut Scratch,
    ) -> Self {
        Self {
            inner: StoreRef::Borrowed(inner),
            serdes,
            scratch,
        }
    }

    /// A typed view of a shared store, locked for as long as the view lives.
    pub(crate) fn locked(
        inner: std::sync::MutexGuard<'a, Box<dyn KeyValueBytesStore>>,
        serdes: &'a KeyValueSerdes<K, V>,
        scratch: &'a mut Scratch,
    ) -> Self {
        Self {
            inner: StoreRef::Locked(inner),
            serdes,
            scratch,
        }
    }

    /// The store of bytes underneath.
    pub fn bytes(&mut self) -> &mut dyn KeyValueBytesStore {
        &mut *self.inner
    }

    /// The store's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    fn key_into_scratch(&mut self, key: &K) -> Result<(), SerdeError> {
        self.scratch.key.clear();
        self.serdes
            .keys
            .serialize_into(self.inner.name(), key, &mut self.scratch.key)
    }

    fn decode(&self, entries: Vec<(Bytes, Bytes)>) -> Result<Vec<(K, V)>, SerdeError> {
        let name = self.inner.name();
        entries
            .into_iter()
            .map(|(k, v)| {
                Ok((
                    self.serdes.keys.deserialize(name, &k)?,
                    self.serdes.values.deserialize(name, &v)?,
                ))
            })
            .collect()
    }

    /// The value of `key`.
    pub fn get(&mut self, key: &K) -> Result<Option<V>, SerdeError> {
        self.key_into_scratch(key)?;
        let Scratch { key, value } = &mut *self.scratch;
        value.clear();
        if !self.inner.get_into(key, value) {
            return Ok(None);
        }
        self.serdes
            .values
            .deserialize(self.inner.name(), value)
            .map(Some)
    }

    /// Writes `value` for `key`, or deletes `key` with `None`.
    pub fn put(&mut self, key: &K, value: Option<&V>) -> Result<(), SerdeError> {
        self.key_into_scratch(key)?;
        let Scratch { key, value: bytes } = &mut *self.scratch;
        match value {
            Some(v) => {
                bytes.clear();
                self.serdes
                    .values
                    .serialize_into(self.inner.name(), v, bytes)?;
                self.inner.put_slice(key, Some(bytes));
            }
            None => self.inner.put_slice(key, None),
        }
        Ok(())
    }

    /// Replaces the value of `key` with what `update` makes of the old one (`None` when there
    /// is none), in one lookup of the store where it can. `update` returning `None` deletes
    /// the key.
    pub fn update(
        &mut self,
        key: &K,
        update: impl FnOnce(Option<V>) -> Option<V>,
    ) -> Result<(), SerdeError> {
        self.key_into_scratch(key)?;
        let values = &*self.serdes.values;
        let mut update = Some(update);
        let mut result = Ok(());
        self.inner.update_slice(&self.scratch.key, &mut |old, out| {
            update_bytes(values, &mut update, old, out, &mut result)
        });
        result.map_err(|e: SerdeError| e.of_topic(self.inner.name()))
    }

    /// Deletes `key`, returning its value.
    pub fn delete(&mut self, key: &K) -> Result<Option<V>, SerdeError> {
        let old = self.get(key)?;
        if old.is_some() {
            self.put(key, None)?;
        }
        Ok(old)
    }

    /// The entries from `from` to `to`, both included, in the order of their serialized keys.
    pub fn range(&mut self, from: &K, to: &K) -> Result<Vec<(K, V)>, SerdeError> {
        let name = self.inner.name().to_string();
        let from = self.serdes.keys.serialize(&name, from)?;
        let to = self.serdes.keys.serialize(&name, to)?;
        self.decode(self.inner.range(&from, &to))
    }

    /// Every entry, in the order of the serialized keys.
    pub fn all(&self) -> Result<Vec<(K, V)>, SerdeError> {
        self.decode(self.inner.all())
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
}

#[cfg(test)]
mod tests;
