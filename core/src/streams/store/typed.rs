//! Typed views of window and session stores: keys and values go through the store's serdes,
//! as [`super::KeyValueStore`] does for key-value stores.

use bytes::Bytes;

use super::key_value::update_bytes;
use super::{KeyValueSerdes, SessionBytesStore, WindowBytesStore};
use crate::log::Timestamp;
use crate::serde::SerdeError;
use crate::streams::windows::Window;

/// A typed view of a window store.
pub struct WindowStore<'a, K, V> {
    inner: &'a mut dyn WindowBytesStore,
    serdes: &'a KeyValueSerdes<K, V>,
    scratch: &'a mut Vec<u8>,
}

impl<'a, K: 'static, V: 'static> WindowStore<'a, K, V> {
    /// A typed view of `inner`.
    pub fn new(
        inner: &'a mut dyn WindowBytesStore,
        serdes: &'a KeyValueSerdes<K, V>,
        scratch: &'a mut Vec<u8>,
    ) -> Self {
        Self {
            inner,
            serdes,
            scratch,
        }
    }

    fn key(&mut self, key: &K) -> Result<(), SerdeError> {
        self.scratch.clear();
        self.serdes
            .keys
            .serialize_into(self.inner.name(), key, self.scratch)
    }

    fn value(&self, bytes: &[u8]) -> Result<V, SerdeError> {
        self.serdes.values.deserialize(self.inner.name(), bytes)
    }

    /// Writes (or deletes, with `None`) the value of `key` in the window starting at `start`.
    pub fn put(&mut self, key: &K, start: Timestamp, value: Option<&V>) -> Result<(), SerdeError> {
        self.put_seq(key, start, 0, value)
    }

    /// [`WindowStore::put`] with a sequence number, for stores that keep several values per
    /// key and window (a join's buffered records).
    pub fn put_seq(
        &mut self,
        key: &K,
        start: Timestamp,
        seq: u32,
        value: Option<&V>,
    ) -> Result<(), SerdeError> {
        let value = match value {
            Some(v) => Some(self.serdes.values.serialize(self.inner.name(), v)?),
            None => None,
        };
        self.key(key)?;
        self.inner.put(self.scratch, start, seq, value);
        Ok(())
    }

    /// Replaces the value of `key` in the window starting at `start` with what `update` makes
    /// of the old one, in one lookup of the store where it can (`None` deletes).
    pub fn update(
        &mut self,
        key: &K,
        start: Timestamp,
        update: impl FnOnce(Option<V>) -> Option<V>,
    ) -> Result<(), SerdeError> {
        self.key(key)?;
        let values = &*self.serdes.values;
        let mut update = Some(update);
        let mut result = Ok(());
        self.inner
            .update_slice(self.scratch, start, &mut |old, out| {
                update_bytes(values, &mut update, old, out, &mut result)
            });
        result.map_err(|e: SerdeError| e.of_topic(self.inner.name()))
    }

    /// The value of `key` in the window starting at `start`.
    pub fn fetch(&mut self, key: &K, start: Timestamp) -> Result<Option<V>, SerdeError> {
        self.key(key)?;
        match self.inner.fetch(self.scratch, start, 0) {
            Some(v) => self.value(&v).map(Some),
            None => Ok(None),
        }
    }

    /// The windows of `key` starting from `from` to `to` (both included), in time order, with
    /// their sequence numbers.
    pub fn fetch_range(
        &mut self,
        key: &K,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<(Timestamp, u32, V)>, SerdeError> {
        self.key(key)?;
        self.inner
            .fetch_range(self.scratch, from, to)
            .into_iter()
            .map(|(t, seq, v)| Ok((t, seq, self.value(&v)?)))
            .collect()
    }

    /// Every live window, by key then time.
    pub fn all(&self) -> Result<Vec<(K, Timestamp, V)>, SerdeError> {
        decode_all(self.inner.all(), self.serdes, self.inner.name())
    }

    /// Every live window starting from `from` to `to` (both included), by time then key.
    pub fn fetch_all(
        &self,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<(K, Timestamp, V)>, SerdeError> {
        decode_all(
            self.inner.fetch_all(from, to),
            self.serdes,
            self.inner.name(),
        )
    }
}

fn decode_all<K: 'static, V: 'static, W>(
    entries: Vec<(Bytes, W, Bytes)>,
    serdes: &KeyValueSerdes<K, V>,
    name: &str,
) -> Result<Vec<(K, W, V)>, SerdeError> {
    entries
        .into_iter()
        .map(|(k, w, v)| {
            Ok((
                serdes.keys.deserialize(name, &k)?,
                w,
                serdes.values.deserialize(name, &v)?,
            ))
        })
        .collect()
}

/// A typed view of a session store.
pub struct SessionStore<'a, K, V> {
    inner: &'a mut dyn SessionBytesStore,
    serdes: &'a KeyValueSerdes<K, V>,
    scratch: &'a mut Vec<u8>,
}

impl<'a, K: 'static, V: 'static> SessionStore<'a, K, V> {
    /// A typed view of `inner`.
    pub fn new(
        inner: &'a mut dyn SessionBytesStore,
        serdes: &'a KeyValueSerdes<K, V>,
        scratch: &'a mut Vec<u8>,
    ) -> Self {
        Self {
            inner,
            serdes,
            scratch,
        }
    }

    fn key(&mut self, key: &K) -> Result<(), SerdeError> {
        self.scratch.clear();
        self.serdes
            .keys
            .serialize_into(self.inner.name(), key, self.scratch)
    }

    /// Writes (or deletes, with `None`) the value of `key` for `session`.
    pub fn put(&mut self, key: &K, session: Window, value: Option<&V>) -> Result<(), SerdeError> {
        let value = match value {
            Some(v) => Some(self.serdes.values.serialize(self.inner.name(), v)?),
            None => None,
        };
        self.key(key)?;
        self.inner.put(self.scratch, session, value);
        Ok(())
    }

    /// The sessions of `key` ending at or after `earliest_end` and starting at or before
    /// `latest_start`.
    pub fn find_sessions(
        &mut self,
        key: &K,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<Vec<(Window, V)>, SerdeError> {
        self.key(key)?;
        let name = self.inner.name().to_string();
        self.inner
            .find_sessions(self.scratch, earliest_end, latest_start)
            .into_iter()
            .map(|(w, v)| Ok((w, self.serdes.values.deserialize(&name, &v)?)))
            .collect()
    }

    /// Every live session, by key, end and start.
    pub fn all(&self) -> Result<Vec<(K, Window, V)>, SerdeError> {
        decode_all(self.inner.all(), self.serdes, self.inner.name())
    }

    /// Every live session of every key ending from `earliest_end` to `latest_end` (both
    /// included), by end, start, then key.
    pub fn sessions_ending(
        &self,
        earliest_end: Timestamp,
        latest_end: Timestamp,
    ) -> Result<Vec<(K, Window, V)>, SerdeError> {
        decode_all(
            self.inner.sessions_ending(earliest_end, latest_end),
            self.serdes,
            self.inner.name(),
        )
    }
}
