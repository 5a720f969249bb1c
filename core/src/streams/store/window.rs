//! Window stores: values by key and window start, as windowed aggregations and stream-stream
//! joins keep them. The changelog keys have Kafka's window key layout (the serialized key, the
//! window start as 8 bytes big-endian, a 4-byte sequence number), and windows older than the
//! retention period (measured from the latest window start written) are dropped, as in Kafka's
//! window stores. [`LayeredWindowStore`] keeps them in an inner byte store, in segments of
//! start times as [`super::layout`] lays them out, under the store's layers.

use std::ops::Bound;

use bytes::{BufMut, Bytes, BytesMut};

use super::changelog::ChangelogBuffer;
use super::inner::{BytesStore, InMemoryBytesStore};
use super::kind::{windowed_changelog_configs, KindRules};
use super::layers::{ChangelogKeys, LayerConfig, StoreLayer};
use super::layout::{
    in_order, ordered, segment_start, time_of, with_key, write_key, Origin, Timeline, HEAD,
};
use super::{ChangelogRecord, StoreInstance, UpdateBytes};
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
        in_order(
            self.all(),
            |(_, start, _)| (from..=to).contains(start),
            |(key, start, _)| (*start, key.clone()),
        )
    }

    /// The number of live windows.
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

/// Records in `log` a write of an entry of [`LayeredWindowStore`]'s inner store, under its
/// changelog key (Kafka's window key); what is not an entry is not logged.
fn log_write(inner: &[u8], value: Option<&[u8]>, log: &mut ChangelogBuffer) {
    if let Some((key, start, seq)) = window_of(inner) {
        log.push(&[key, &start.to_be_bytes(), &seq.to_be_bytes()], value);
    }
}

/// The rules of window stores: Kafka's window keys in the changelog, which is compacted and
/// deleted after the retention.
pub(crate) struct WindowRules {
    pub(crate) retention_ms: i64,
}

impl KindRules for WindowRules {
    fn name(&self) -> &'static str {
        "window"
    }

    fn retention_ms(&self) -> i64 {
        self.retention_ms
    }

    fn changelog_configs(&self) -> Vec<(&'static str, String)> {
        windowed_changelog_configs(self.retention_ms)
    }

    fn build(&self, name: &str, inner: Box<dyn BytesStore>, config: LayerConfig) -> StoreInstance {
        StoreInstance::Window(Box::new(LayeredWindowStore::new(
            name,
            self.retention_ms,
            inner,
            config,
        )))
    }
}

/// A window store over its layers, its windows in segments of start times, by key then
/// start within a segment.
pub struct LayeredWindowStore {
    name: String,
    time: Timeline,
    /// Where writes build their keys.
    key: Vec<u8>,
    /// Where updates of windows past retention write the value they drop.
    buffer: Vec<u8>,
}

impl std::fmt::Debug for LayeredWindowStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayeredWindowStore")
            .field("name", &self.name)
            .field("retention", &self.time.retention)
            .field("observed", &self.time.observed)
            .finish_non_exhaustive()
    }
}

/// A window from an entry's key: the record's key, start and number; `None` for what is
/// not a window's entry.
pub(crate) fn window_of(entry: &[u8]) -> Option<(&[u8], Timestamp, u32)> {
    let rest = entry.get(HEAD..).filter(|r| r.len() >= 12)?;
    let (key, times) = rest.split_at(rest.len() - 12);
    let seq = u32::from_be_bytes(times[8..].try_into().ok()?);
    Some((key, time_of(times), seq))
}

impl LayeredWindowStore {
    /// The store called `name` over `inner`, keeping windows that start within `retention`
    /// ms of the latest one, with the layers `config` asks for.
    pub fn new(
        name: impl Into<String>,
        retention: i64,
        inner: Box<dyn BytesStore>,
        config: LayerConfig,
    ) -> Self {
        Self {
            name: name.into(),
            time: Timeline::new(retention, inner, config, ChangelogKeys::new(log_write)),
            key: Vec::new(),
            buffer: Vec::new(),
        }
    }

    /// A logged store in memory, without cache or write buffer.
    pub fn in_memory(name: impl Into<String>, retention: i64) -> Self {
        Self::new(
            name,
            retention,
            Box::new(InMemoryBytesStore::new()),
            LayerConfig::LOGGED,
        )
    }

    /// Writes into `self.key` the entry key of a window.
    fn entry_key(&mut self, key: &[u8], start: Timestamp, seq: u32) {
        let segment = segment_start(self.time.segments.of(start));
        write_key(
            &mut self.key,
            &[&segment, key, &ordered(start), &seq.to_be_bytes()],
        );
    }

    /// Calls `visit` with the windows (record key, start, number, value) of the segments
    /// holding starts from `from` to `to`, segment by segment, each in entry order.
    fn each_window(
        &self,
        from: Timestamp,
        to: Timestamp,
        mut visit: impl FnMut(&[u8], Timestamp, u32, &[u8]),
    ) {
        self.time.each_entry(from, to, |k, v| {
            if let Some((key, start, seq)) = window_of(k) {
                visit(key, start, seq, v);
            }
        });
    }
}

impl WindowBytesStore for LayeredWindowStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn put(&mut self, key: &[u8], start: Timestamp, seq: u32, value: Option<Bytes>) {
        let latest = self.time.observed.max(start);
        if start < latest.saturating_sub(self.time.retention).saturating_add(1) {
            return;
        }
        self.entry_key(key, start, seq);
        self.time.layers.put(&self.key, value.as_deref());
        self.time.advance(start, Origin::Write);
    }

    fn update_slice(&mut self, key: &[u8], start: Timestamp, update: &mut UpdateBytes<'_>) {
        if start < self.time.min_live() {
            // A window past retention holds nothing and keeps nothing.
            self.buffer.clear();
            update(None, &mut self.buffer);
            return;
        }
        self.entry_key(key, start, 0);
        if start <= self.time.observed {
            self.time.layers.update(&self.key, update);
            return;
        }
        let mut wrote = false;
        self.time.layers.update(&self.key, &mut |old, out| {
            let present = update(old, out);
            wrote = present || old.is_some();
            present
        });
        // Time moves with what is written only, so that the changelog replays it.
        if wrote {
            self.time.advance(start, Origin::Write);
        }
    }

    fn fetch(&self, key: &[u8], start: Timestamp, seq: u32) -> Option<Bytes> {
        if start < self.time.min_live() {
            return None;
        }
        let mut value = Vec::new();
        let segment = segment_start(self.time.segments.of(start));
        with_key(
            &[&segment, key, &ordered(start), &seq.to_be_bytes()],
            |entry| self.time.layers.get_into(entry, &mut value),
        )
        .then(|| Bytes::from(value))
    }

    fn fetch_range(
        &self,
        key: &[u8],
        from: Timestamp,
        to: Timestamp,
    ) -> Vec<(Timestamp, u32, Bytes)> {
        let from = from.max(self.time.min_live());
        let to = to.min(self.time.observed);
        let mut windows = Vec::new();
        if from > to {
            return windows;
        }
        let layers = &*self.time.layers;
        let (low, high) = (ordered(from), ordered(to));
        self.time.each_segment(from, to, |segment| {
            with_key(&[segment, key, &low, &[0; 4]], |low| {
                with_key(&[segment, key, &high, &[0xff; 4]], |high| {
                    layers.scan(Bound::Included(low), Bound::Included(high), &mut |k, v| {
                        // A longer key with this one as its prefix may fall in the range.
                        if let Some((_, start, seq)) = window_of(k).filter(|w| w.0 == key) {
                            windows.push((start, seq, Bytes::copy_from_slice(v)));
                        }
                        true
                    })
                })
            })
        });
        windows
    }

    fn all(&self) -> Vec<(Bytes, Timestamp, Bytes)> {
        let min_live = self.time.min_live();
        let mut windows = Vec::new();
        self.each_window(min_live, self.time.observed, |key, start, seq, v| {
            if start >= min_live {
                windows.push((
                    Bytes::copy_from_slice(key),
                    start,
                    seq,
                    Bytes::copy_from_slice(v),
                ));
            }
        });
        // By key then time, whatever the keys' lengths.
        windows.sort_by(|a, b| (&a.0, a.1, a.2).cmp(&(&b.0, b.1, b.2)));
        windows.into_iter().map(|(k, s, _, v)| (k, s, v)).collect()
    }

    fn fetch_all(&self, from: Timestamp, to: Timestamp) -> Vec<(Bytes, Timestamp, Bytes)> {
        let from = from.max(self.time.min_live());
        let to = to.min(self.time.observed);
        if from > to {
            return Vec::new();
        }
        let mut windows = Vec::new();
        self.each_window(from, to, |key, start, seq, v| {
            if (from..=to).contains(&start) {
                windows.push((
                    Bytes::copy_from_slice(key),
                    start,
                    seq,
                    Bytes::copy_from_slice(v),
                ));
            }
        });
        windows.sort_by(|a, b| (a.1, &a.0, a.2).cmp(&(b.1, &b.0, b.2)));
        windows.into_iter().map(|(k, s, _, v)| (k, s, v)).collect()
    }

    fn len(&self) -> usize {
        let min_live = self.time.min_live();
        let mut n = 0;
        self.each_window(min_live, self.time.observed, |_, start, _, _| {
            n += usize::from(start >= min_live);
        });
        n
    }

    fn layers(&self) -> &dyn StoreLayer {
        &*self.time.layers
    }

    fn layers_mut(&mut self) -> &mut dyn StoreLayer {
        &mut *self.time.layers
    }

    fn restore(&mut self, record: ChangelogRecord) -> Result<(), SerdeError> {
        let (key, start, seq) = parse_window_store_key(&record.key)?;
        // As a write: a window past retention is not kept.
        let latest = self.time.observed.max(start);
        if start >= latest.saturating_sub(self.time.retention).saturating_add(1) {
            self.entry_key(&key, start, seq);
            self.time.layers.restore(&self.key, record.value.as_deref());
        }
        self.time.advance(start, Origin::Restore);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_fetched_by_key_and_start_and_expire_after_retention() {
        let mut store = LayeredWindowStore::in_memory("w", 100);
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
        let mut rebuilt = LayeredWindowStore::in_memory("w", 100);
        for r in store.layers_mut().take_changelog() {
            rebuilt.restore(r).unwrap();
        }
        rebuilt.layers_mut().commit(None);
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
        let mut store = LayeredWindowStore::in_memory("w", 100);
        store.put(b"key", 0x0102, 7, Some(Bytes::from("v")));
        assert_eq!(store.layers_mut().take_changelog()[0].key, k);
    }
}
