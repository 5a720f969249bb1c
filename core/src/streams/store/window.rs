//! Window stores: values by key and window start, as windowed aggregations and stream-stream
//! joins keep them. The changelog keys have Kafka's window key layout (the serialized key, the
//! window start as 8 bytes big-endian, a 4-byte sequence number), and windows older than the
//! retention period (measured from the latest window start written) are dropped, as in Kafka's
//! window stores.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::{BufMut, Bytes, BytesMut};

use super::ChangelogRecord;
use crate::log::Timestamp;
use crate::serde::SerdeError;

/// A store of serialized values by serialized key and window start.
pub trait WindowBytesStore: Send {
    /// The store's name.
    fn name(&self) -> &str;

    /// Writes (or deletes, with `None`) the value of `key` in the window starting at `start`.
    /// A window already past retention is not written.
    fn put(&mut self, key: &[u8], start: Timestamp, seq: u32, value: Option<Bytes>);

    /// The value of `key` in the window starting at `start`.
    fn fetch(&self, key: &[u8], start: Timestamp, seq: u32) -> Option<Bytes>;

    /// The windows of `key` starting from `from` to `to` (both included), in time order.
    fn fetch_range(
        &self,
        key: &[u8],
        from: Timestamp,
        to: Timestamp,
    ) -> Vec<(Timestamp, u32, Bytes)>;

    /// Every live window of every key, by key then time.
    fn all(&self) -> Vec<(Bytes, Timestamp, Bytes)>;

    /// The number of live windows.
    fn len(&self) -> usize;

    /// Whether the store holds nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The writes since the last call.
    fn take_changelog(&mut self) -> Vec<ChangelogRecord>;

    /// Applies a changelog record without recording it again (restoration).
    fn restore(&mut self, record: ChangelogRecord) -> Result<(), SerdeError>;
}

/// Kafka's window key layout: `key | start (8 bytes BE) | seq (4 bytes BE)`.
pub fn window_store_key(key: &[u8], start: Timestamp, seq: u32) -> Bytes {
    let mut out = BytesMut::with_capacity(key.len() + 12);
    out.put_slice(key);
    out.put_i64(start);
    out.put_u32(seq);
    out.freeze()
}

/// Splits a key in Kafka's window key layout.
pub fn parse_window_store_key(bytes: &Bytes) -> Result<(Bytes, Timestamp, u32), SerdeError> {
    if bytes.len() < 12 {
        return Err(SerdeError::new(
            "window key",
            "changelog",
            "shorter than 12 bytes",
        ));
    }
    let n = bytes.len() - 12;
    let start = i64::from_be_bytes(bytes[n..n + 8].try_into().expect("8 bytes"));
    let seq = u32::from_be_bytes(bytes[n + 8..].try_into().expect("4 bytes"));
    Ok((bytes.slice(..n), start, seq))
}

/// A window store in memory.
#[derive(Debug, Clone)]
pub struct InMemoryWindowStore {
    name: String,
    retention: i64,
    observed: Timestamp,
    windows: BTreeMap<(Bytes, Timestamp, u32), Bytes>,
    changelog: Vec<ChangelogRecord>,
    logging: bool,
}

impl InMemoryWindowStore {
    /// An empty store keeping windows that start within `retention` ms of the latest one.
    pub fn new(name: impl Into<String>, retention: i64) -> Self {
        Self {
            name: name.into(),
            retention,
            observed: i64::MIN,
            windows: BTreeMap::new(),
            changelog: Vec::new(),
            logging: true,
        }
    }

    /// The same store with its changelog on (the default) or off.
    pub fn with_logging(mut self, logging: bool) -> Self {
        self.logging = logging;
        self
    }

    /// The earliest window start still kept.
    fn min_live(&self) -> Timestamp {
        self.observed
            .saturating_sub(self.retention)
            .saturating_add(1)
    }

    fn apply(&mut self, key: Bytes, start: Timestamp, seq: u32, value: Option<Bytes>) {
        self.observed = self.observed.max(start);
        let min_live = self.min_live();
        if start < min_live {
            return;
        }
        match value {
            Some(v) => {
                self.windows.insert((key, start, seq), v);
            }
            None => {
                self.windows.remove(&(key, start, seq));
            }
        }
        self.windows.retain(|(_, s, _), _| *s >= min_live);
    }
}

impl WindowBytesStore for InMemoryWindowStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn put(&mut self, key: &[u8], start: Timestamp, seq: u32, value: Option<Bytes>) {
        let expired = start
            < self
                .observed
                .max(start)
                .saturating_sub(self.retention)
                .saturating_add(1);
        if expired {
            return;
        }
        let key = Bytes::copy_from_slice(key);
        if self.logging {
            self.changelog.push(ChangelogRecord {
                key: window_store_key(&key, start, seq),
                value: value.clone(),
            });
        }
        self.apply(key, start, seq, value);
    }

    fn fetch(&self, key: &[u8], start: Timestamp, seq: u32) -> Option<Bytes> {
        if start < self.min_live() {
            return None;
        }
        self.windows
            .get(&(Bytes::copy_from_slice(key), start, seq))
            .cloned()
    }

    fn fetch_range(
        &self,
        key: &[u8],
        from: Timestamp,
        to: Timestamp,
    ) -> Vec<(Timestamp, u32, Bytes)> {
        let from = from.max(self.min_live());
        if from > to {
            return Vec::new();
        }
        let k = Bytes::copy_from_slice(key);
        let range = (
            Bound::Included((k.clone(), from, 0)),
            Bound::Included((k, to, u32::MAX)),
        );
        self.windows
            .range(range)
            .map(|((_, s, q), v)| (*s, *q, v.clone()))
            .collect()
    }

    fn all(&self) -> Vec<(Bytes, Timestamp, Bytes)> {
        let min_live = self.min_live();
        self.windows
            .iter()
            .filter(|((_, s, _), _)| *s >= min_live)
            .map(|((k, s, _), v)| (k.clone(), *s, v.clone()))
            .collect()
    }

    fn len(&self) -> usize {
        self.windows.len()
    }

    fn take_changelog(&mut self) -> Vec<ChangelogRecord> {
        std::mem::take(&mut self.changelog)
    }

    fn restore(&mut self, record: ChangelogRecord) -> Result<(), SerdeError> {
        let (key, start, seq) = parse_window_store_key(&record.key)?;
        self.apply(key, start, seq, record.value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_fetched_by_key_and_start_and_expire_after_retention() {
        let mut store = InMemoryWindowStore::new("w", 100);
        store.put(b"a", 0, 0, Some(Bytes::from("a0")));
        store.put(b"a", 50, 0, Some(Bytes::from("a50")));
        store.put(b"b", 50, 0, Some(Bytes::from("b50")));
        assert_eq!(store.fetch(b"a", 0, 0), Some(Bytes::from("a0")));
        let range: Vec<_> = store
            .fetch_range(b"a", 0, 60)
            .into_iter()
            .map(|r| r.0)
            .collect();
        assert_eq!(range, [0, 50]);
        // A window starting at 100 makes 0 expire (100 - 100 + 1 = 1 is the earliest kept).
        store.put(b"a", 100, 0, Some(Bytes::from("a100")));
        assert_eq!(store.fetch(b"a", 0, 0), None);
        assert_eq!(store.len(), 3);
        // Writing an expired window does nothing.
        store.put(b"c", 0, 0, Some(Bytes::from("late")));
        assert_eq!(store.fetch(b"c", 0, 0), None);
        // The changelog replays into the same contents.
        let mut rebuilt = InMemoryWindowStore::new("w", 100);
        for r in store.take_changelog() {
            rebuilt.restore(r).unwrap();
        }
        assert_eq!(rebuilt.all(), store.all());
    }

    #[test]
    fn the_changelog_key_is_kafkas_window_key() {
        let k = window_store_key(b"key", 0x0102, 7);
        assert_eq!(&k[..3], b"key");
        assert_eq!(&k[3..11], &0x0102i64.to_be_bytes());
        assert_eq!(&k[11..], &7u32.to_be_bytes());
        assert_eq!(
            parse_window_store_key(&k).unwrap(),
            (Bytes::from("key"), 0x0102, 7)
        );
        assert!(parse_window_store_key(&Bytes::from("short")).is_err());
    }
}
