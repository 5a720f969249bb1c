//! Window stores: values by key and window start, as windowed aggregations and stream-stream
//! joins keep them. The changelog keys have Kafka's window key layout (the serialized key, the
//! window start as 8 bytes big-endian, a 4-byte sequence number), and windows older than the
//! retention period (measured from the latest window start written) are dropped, as in Kafka's
//! window stores.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

use bytes::{BufMut, Bytes, BytesMut};

use super::changelog::{ChangelogBatch, ChangelogBuffer};
use super::small_bytes::{SeededHashing, SmallBytes};
use super::{ChangelogRecord, UpdateBytes};
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

    /// Reads the value of `key` in the window starting at `start` and writes what `update`
    /// makes of it (the old value or `None`, and a buffer; `false` deletes), in one lookup
    /// where the store can.
    fn update_slice(&mut self, key: &[u8], start: Timestamp, update: &mut UpdateBytes<'_>) {
        let old = self.fetch(key, start, 0);
        let mut new = Vec::new();
        let present = update(old.as_deref(), &mut new);
        self.put(key, start, 0, present.then(|| Bytes::from(new)));
    }

    /// The windows of `key` starting from `from` to `to` (both included), in time order.
    fn fetch_range(
        &self,
        key: &[u8],
        from: Timestamp,
        to: Timestamp,
    ) -> Vec<(Timestamp, u32, Bytes)>;

    /// Every live window of every key, by key then time.
    fn all(&self) -> Vec<(Bytes, Timestamp, Bytes)>;

    /// Every live window of every key starting from `from` to `to` (both included), by time
    /// then key (what emitting final results walks).
    fn fetch_all(&self, from: Timestamp, to: Timestamp) -> Vec<(Bytes, Timestamp, Bytes)> {
        let mut windows: Vec<_> = self
            .all()
            .into_iter()
            .filter(|(_, start, _)| (from..=to).contains(start))
            .collect();
        windows.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        windows
    }

    /// The number of live windows.
    fn len(&self) -> usize;

    /// Whether the store holds nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The writes since the changelog was last cleared, in the order they were made,
    /// borrowed: what the task hands to the producer of the changelog topic.
    fn changelog(&self) -> ChangelogBatch<'_>;

    /// Forgets the writes [`changelog`](Self::changelog) shows, once they are sent.
    fn clear_changelog(&mut self);

    /// The writes since the changelog was last cleared, as records, and clears it.
    fn take_changelog(&mut self) -> Vec<ChangelogRecord> {
        let records = self.changelog().to_records();
        self.clear_changelog();
        records
    }

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

/// A window store in memory: a hash map by key, start and sequence number for reads and
/// writes, an ordered index by key then time for range fetches, and one by time for expiry.
#[derive(Debug, Clone)]
pub struct InMemoryWindowStore {
    name: String,
    retention: i64,
    observed: Timestamp,
    values: HashMap<(SmallBytes, Timestamp, u32), SmallBytes, SeededHashing>,
    by_key: BTreeSet<(SmallBytes, Timestamp, u32)>,
    by_start: BTreeSet<(Timestamp, SmallBytes, u32)>,
    log: ChangelogBuffer,
    logging: bool,
    /// Where updates write new values.
    buffer: Vec<u8>,
}

impl InMemoryWindowStore {
    /// An empty store keeping windows that start within `retention` ms of the latest one.
    pub fn new(name: impl Into<String>, retention: i64) -> Self {
        Self {
            name: name.into(),
            retention,
            observed: i64::MIN,
            values: HashMap::default(),
            by_key: BTreeSet::new(),
            by_start: BTreeSet::new(),
            log: ChangelogBuffer::default(),
            logging: true,
            buffer: Vec::new(),
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

    fn apply(&mut self, key: &[u8], start: Timestamp, seq: u32, value: Option<&[u8]>) {
        self.observed = self.observed.max(start);
        let min_live = self.min_live();
        if start < min_live {
            return;
        }
        let id = (SmallBytes::copy(key), start, seq);
        match value {
            Some(v) => match self.values.get_mut(&id) {
                Some(old) => *old = SmallBytes::copy(v),
                None => {
                    self.by_key.insert(id.clone());
                    self.by_start.insert((start, id.0.clone(), seq));
                    self.values.insert(id, SmallBytes::copy(v));
                }
            },
            None => {
                if self.values.remove(&id).is_some() {
                    self.by_start.remove(&(start, id.0.clone(), seq));
                    self.by_key.remove(&id);
                }
            }
        }
        while let Some((s, _, _)) = self.by_start.first() {
            if *s >= min_live {
                break;
            }
            let (s, k, q) = self.by_start.pop_first().expect("a first entry");
            let id = (k, s, q);
            self.by_key.remove(&id);
            self.values.remove(&id);
        }
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
        if self.logging {
            self.log.push(
                &[key, &start.to_be_bytes(), &seq.to_be_bytes()],
                value.as_deref(),
            );
        }
        self.apply(key, start, seq, value.as_deref());
    }

    fn update_slice(&mut self, key: &[u8], start: Timestamp, update: &mut UpdateBytes<'_>) {
        // A window the store holds is live (it is dropped once it is not).
        let id = (SmallBytes::copy(key), start, 0);
        self.buffer.clear();
        match self.values.get_mut(&id) {
            Some(old) => {
                if update(Some(old.as_slice()), &mut self.buffer) {
                    *old = SmallBytes::copy(&self.buffer);
                    if self.logging {
                        self.log.push(
                            &[key, &start.to_be_bytes(), &0u32.to_be_bytes()],
                            Some(&self.buffer),
                        );
                    }
                } else {
                    self.put(key, start, 0, None);
                }
            }
            _ => {
                if update(None, &mut self.buffer) {
                    let value = Bytes::copy_from_slice(&self.buffer);
                    self.put(key, start, 0, Some(value));
                }
            }
        }
    }

    fn fetch(&self, key: &[u8], start: Timestamp, seq: u32) -> Option<Bytes> {
        if start < self.min_live() {
            return None;
        }
        self.values
            .get(&(SmallBytes::copy(key), start, seq))
            .map(SmallBytes::to_bytes)
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
        let k = SmallBytes::copy(key);
        let range = (
            Bound::Included((k.clone(), from, 0)),
            Bound::Included((k, to, u32::MAX)),
        );
        self.by_key
            .range(range)
            .filter_map(|id| self.values.get(id).map(|v| (id.1, id.2, v.to_bytes())))
            .collect()
    }

    fn all(&self) -> Vec<(Bytes, Timestamp, Bytes)> {
        let min_live = self.min_live();
        self.by_key
            .iter()
            .filter(|(_, s, _)| *s >= min_live)
            .filter_map(|id| {
                self.values
                    .get(id)
                    .map(|v| (id.0.to_bytes(), id.1, v.to_bytes()))
            })
            .collect()
    }

    fn fetch_all(&self, from: Timestamp, to: Timestamp) -> Vec<(Bytes, Timestamp, Bytes)> {
        let from = from.max(self.min_live());
        if from > to {
            return Vec::new();
        }
        self.by_start
            .iter()
            .skip_while(|(s, _, _)| *s < from)
            .take_while(|(s, _, _)| *s <= to)
            .filter_map(|(s, k, q)| {
                let id = (k.clone(), *s, *q);
                self.values
                    .get(&id)
                    .map(|v| (k.to_bytes(), *s, v.to_bytes()))
            })
            .collect()
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

    fn restore(&mut self, record: ChangelogRecord) -> Result<(), SerdeError> {
        let (key, start, seq) = parse_window_store_key(&record.key)?;
        self.apply(&key, start, seq, record.value.as_deref());
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
        let mut store = InMemoryWindowStore::new("w", 100);
        store.put(b"key", 0x0102, 7, Some(Bytes::from("v")));
        assert_eq!(store.take_changelog()[0].key, k);
    }
}
