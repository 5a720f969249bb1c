//! [`InMemoryKeyValueStore`]: a hash map for reads and writes, a sorted index of the keys for
//! scans in key order, short keys and values held inline, and the changelog of its writes in
//! one buffer, so that a write to a key the store already holds allocates nothing.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

use bytes::Bytes;

use super::changelog::{ChangelogBatch, ChangelogBuffer};
use super::small_bytes::{SeededHashing, SmallBytes};
use super::{ChangelogRecord, KeyValueBytesStore, UpdateBytes};

/// A key-value store in memory.
#[derive(Debug, Clone, Default)]
pub struct InMemoryKeyValueStore {
    name: String,
    values: HashMap<SmallBytes, SmallBytes, SeededHashing>,
    keys: BTreeSet<SmallBytes>,
    log: ChangelogBuffer,
    logging: bool,
    /// Where updates write new values.
    buffer: Vec<u8>,
}

impl InMemoryKeyValueStore {
    /// An empty store called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            logging: true,
            ..Self::default()
        }
    }

    /// The same store recording its writes in the changelog (the default) or not: a store
    /// whose logging is disabled keeps no changelog to take.
    pub fn with_logging(mut self, logging: bool) -> Self {
        self.logging = logging;
        self
    }

    /// The value of `key`.
    #[inline]
    fn slot(&self, key: &[u8]) -> Option<&SmallBytes> {
        match SmallBytes::inline(key) {
            Some(key) => self.values.get(&key),
            None => self.values.get(key),
        }
    }

    /// The value of `key`, to change in place.
    #[inline]
    fn slot_mut(&mut self, key: &[u8]) -> Option<&mut SmallBytes> {
        match SmallBytes::inline(key) {
            Some(key) => self.values.get_mut(&key),
            None => self.values.get_mut(key),
        }
    }

    fn apply(&mut self, key: &[u8], value: Option<&[u8]>) {
        match value {
            Some(v) => match self.slot_mut(key) {
                Some(old) => *old = SmallBytes::copy(v),
                None => {
                    let key = SmallBytes::copy(key);
                    self.keys.insert(key.clone());
                    self.values.insert(key, SmallBytes::copy(v));
                }
            },
            None => {
                if self.values.remove(key).is_some() {
                    self.keys.remove(key);
                }
            }
        }
    }

    fn entries<'a>(&'a self, keys: impl Iterator<Item = &'a SmallBytes>) -> Vec<(Bytes, Bytes)> {
        keys.filter_map(|k| {
            self.values
                .get(k.as_slice())
                .map(|v| (k.to_bytes(), v.to_bytes()))
        })
        .collect()
    }
}

impl KeyValueBytesStore for InMemoryKeyValueStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn get(&self, key: &[u8]) -> Option<Bytes> {
        self.slot(key).map(SmallBytes::to_bytes)
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
        match self.slot(key) {
            Some(v) => {
                out.extend_from_slice(v.as_slice());
                true
            }
            None => false,
        }
    }

    fn put(&mut self, key: Bytes, value: Option<Bytes>) {
        self.put_slice(&key, value.as_deref());
    }

    fn update_slice(&mut self, key: &[u8], update: &mut UpdateBytes<'_>) {
        // The buffer is moved out while the map is borrowed, and back at the end.
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.clear();
        match self.slot_mut(key) {
            Some(old) => {
                if update(Some(old.as_slice()), &mut buffer) {
                    *old = SmallBytes::copy(&buffer);
                    if self.logging {
                        self.log.push(&[key], Some(&buffer));
                    }
                } else {
                    self.values.remove(key);
                    self.keys.remove(key);
                    if self.logging {
                        self.log.push(&[key], None);
                    }
                }
            }
            None => {
                if update(None, &mut buffer) {
                    self.put_slice(key, Some(&buffer));
                }
            }
        }
        self.buffer = buffer;
    }

    fn put_slice(&mut self, key: &[u8], value: Option<&[u8]>) {
        if self.logging {
            self.log.push(&[key], value);
        }
        self.apply(key, value);
    }

    fn range(&self, from: &[u8], to: &[u8]) -> Vec<(Bytes, Bytes)> {
        if from > to {
            return Vec::new();
        }
        let bounds: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(from), Bound::Included(to));
        self.entries(self.keys.range::<[u8], _>(bounds))
    }

    fn prefix_scan(&self, prefix: &[u8]) -> Vec<(Bytes, Bytes)> {
        let from: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(prefix), Bound::Unbounded);
        self.entries(
            self.keys
                .range::<[u8], _>(from)
                .take_while(|k| k.as_slice().starts_with(prefix)),
        )
    }

    fn all(&self) -> Vec<(Bytes, Bytes)> {
        self.entries(self.keys.iter())
    }

    fn len(&self) -> usize {
        self.values.len()
    }

    fn changelog(&self) -> ChangelogBatch<'_> {
        self.log.batch()
    }

    fn clear_changelog(&mut self) {
        self.log.clear();
    }

    fn restore(&mut self, record: ChangelogRecord) {
        self.apply(&record.key, record.value.as_deref());
    }
}
