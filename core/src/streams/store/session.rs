//! Session stores: values by key and session (a window whose bounds grow as records join it),
//! as session-windowed aggregations keep them. Changelog keys have Kafka's session key layout
//! (the serialized key, the session end, then its start, each 8 bytes big-endian).
//!
//! Retention follows Kafka's segmented stores: a session that ended more than the retention
//! period before the latest end is expired, so lookups by key no longer see it, but it is only
//! removed with its whole segment of end times (half the retention, at least a minute), and
//! until then emit-on-window-close still finds it among the sessions that closed.
//!
//! [`LayeredSessionStore`] keeps them in an inner byte store, in those segments as
//! [`super::layout`] lays them out, under the store's layers.

use std::ops::Bound;

use bytes::{BufMut, Bytes, BytesMut};

use super::changelog::ChangelogBuffer;
use super::inner::{BytesStore, InMemoryBytesStore};
use super::kind::{windowed_changelog_configs, KindRules};
use super::layers::{ChangelogKeys, LayerConfig, StoreLayer};
use super::layout::{
    in_order, ordered, segment_start, time_of, with_key, write_key, Origin, Timeline, HEAD,
};
use super::{ChangelogRecord, StoreInstance};
use crate::log::Timestamp;
use crate::serde::SerdeError;
use crate::streams::windows::Window;

/// A store of serialized values by serialized key and session.
pub trait SessionBytesStore: Send {
    /// The store's name.
    fn name(&self) -> &str;

    /// Writes (or deletes, with `None`) the value of `key` for `session` (both bounds
    /// included: a session of one record starts and ends at its timestamp).
    fn put(&mut self, key: &[u8], session: Window, value: Option<Bytes>);

    /// The sessions of `key` that end at or after `earliest_end` and start at or before
    /// `latest_start`, by end then start.
    fn find_sessions(
        &self,
        key: &[u8],
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Vec<(Window, Bytes)>;

    /// Every live session of every key, by key, end and start.
    fn all(&self) -> Vec<(Bytes, Window, Bytes)>;

    /// Every session still held (expired or not, until its segment is removed) of every key
    /// that ends from `earliest_end` to `latest_end` (both included), by end, start, then key:
    /// the order of Kafka's time-ordered session store, in which emit-on-window-close finds
    /// the sessions that closed.
    fn sessions_ending(
        &self,
        earliest_end: Timestamp,
        latest_end: Timestamp,
    ) -> Vec<(Bytes, Window, Bytes)> {
        in_order(
            self.all(),
            |(_, w, _)| (earliest_end..=latest_end).contains(&w.end),
            |(key, w, _)| (w.end, w.start, key.clone()),
        )
    }

    /// The number of live sessions.
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

/// Kafka's session key layout: `key | end (8 bytes BE) | start (8 bytes BE)`.
pub fn session_store_key(key: &[u8], session: Window) -> Bytes {
    let mut out = BytesMut::with_capacity(key.len() + 16);
    out.put_slice(key);
    out.put_i64(session.end);
    out.put_i64(session.start);
    out.freeze()
}

/// Splits a key in Kafka's session key layout.
pub fn parse_session_store_key(bytes: &Bytes) -> Result<(Bytes, Window), SerdeError> {
    if bytes.len() < 16 {
        return Err(SerdeError::new(
            "session key",
            "changelog",
            "shorter than 16 bytes",
        ));
    }
    let n = bytes.len() - 16;
    let end = i64::from_be_bytes(bytes[n..n + 8].try_into().expect("8 bytes"));
    let start = i64::from_be_bytes(bytes[n + 8..].try_into().expect("8 bytes"));
    Ok((bytes.slice(..n), Window { start, end }))
}

/// Records in `log` a write of an entry of [`LayeredSessionStore`]'s inner store, under its
/// changelog key (Kafka's session key); what is not an entry is not logged.
fn log_write(inner: &[u8], value: Option<&[u8]>, log: &mut ChangelogBuffer) {
    if let Some((key, session)) = session_of(inner) {
        let (end, start) = (session.end.to_be_bytes(), session.start.to_be_bytes());
        log.push(&[key, &end, &start], value);
    }
}

/// The rules of session stores: Kafka's session keys in the changelog, which is compacted and
/// deleted after the retention.
pub(crate) struct SessionRules {
    pub(crate) retention_ms: i64,
}

impl KindRules for SessionRules {
    fn name(&self) -> &'static str {
        "session"
    }

    fn retention_ms(&self) -> i64 {
        self.retention_ms
    }

    fn changelog_configs(&self) -> Vec<(&'static str, String)> {
        windowed_changelog_configs(self.retention_ms)
    }

    fn build(&self, name: &str, inner: Box<dyn BytesStore>, config: LayerConfig) -> StoreInstance {
        StoreInstance::Session(Box::new(LayeredSessionStore::new(
            name,
            self.retention_ms,
            inner,
            config,
        )))
    }
}

/// A session store over its layers, its sessions in segments of end times, by key, end,
/// then start within a segment.
pub struct LayeredSessionStore {
    name: String,
    time: Timeline,
    /// Where writes build their keys.
    key: Vec<u8>,
}

impl std::fmt::Debug for LayeredSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayeredSessionStore")
            .field("name", &self.name)
            .field("retention", &self.time.retention)
            .field("observed", &self.time.observed)
            .finish_non_exhaustive()
    }
}

/// A session from an entry's key: the record's key and the session; `None` for what is not
/// a session's entry.
pub(crate) fn session_of(entry: &[u8]) -> Option<(&[u8], Window)> {
    let rest = entry.get(HEAD..).filter(|r| r.len() >= 16)?;
    let (key, times) = rest.split_at(rest.len() - 16);
    let window = Window {
        start: time_of(&times[8..]),
        end: time_of(times),
    };
    Some((key, window))
}

impl LayeredSessionStore {
    /// The store called `name` over `inner`, keeping sessions that end within `retention`
    /// ms of the latest end, with the layers `config` asks for.
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

    /// Writes into `self.key` the entry key of a session.
    fn entry_key(&mut self, key: &[u8], session: Window) {
        let segment = segment_start(self.time.segments.of(session.end));
        write_key(
            &mut self.key,
            &[
                &segment,
                key,
                &ordered(session.end),
                &ordered(session.start),
            ],
        );
    }

    /// Writes `value` for `session` of `key`, logged as a write of the store or read back
    /// from the changelog.
    fn write(&mut self, origin: Origin, key: &[u8], session: Window, value: Option<&[u8]>) {
        self.entry_key(key, session);
        if origin == Origin::Write {
            // Logged even when the session's segment is gone, as Kafka's logging store does.
            self.time.layers.put(&self.key, value);
        }
        self.time.advance(session.end, origin);
        let kept = self.time.segments.of(session.end) >= self.time.min_live_segment();
        match origin {
            Origin::Write if !kept => self.time.layers.put_unlogged(&self.key, None),
            Origin::Restore if kept => self.time.layers.restore(&self.key, value),
            _ => {}
        }
    }

    /// Calls `visit` with the sessions (record key, session, value) of the segments holding
    /// ends from `from` to `to`, segment by segment, each in entry order.
    fn each_session(
        &self,
        from: Timestamp,
        to: Timestamp,
        mut visit: impl FnMut(&[u8], Window, &[u8]),
    ) {
        self.time.each_entry(from, to, |k, v| {
            if let Some((key, window)) = session_of(k) {
                visit(key, window, v);
            }
        });
    }
}

impl SessionBytesStore for LayeredSessionStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn put(&mut self, key: &[u8], session: Window, value: Option<Bytes>) {
        self.write(Origin::Write, key, session, value.as_deref());
    }

    fn find_sessions(
        &self,
        key: &[u8],
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Vec<(Window, Bytes)> {
        let from = earliest_end.max(self.time.min_live());
        let mut sessions = Vec::new();
        if from > self.time.observed {
            return sessions;
        }
        let layers = &*self.time.layers;
        let low_times = [ordered(from), ordered(i64::MIN)].concat();
        self.time.each_segment(from, self.time.observed, |segment| {
            with_key(&[segment, key, &low_times], |low| {
                with_key(&[segment, key, &[0xff; 16]], |high| {
                    layers.scan(Bound::Included(low), Bound::Included(high), &mut |k, v| {
                        // A longer key with this one as its prefix may fall in the range.
                        if let Some((_, window)) = session_of(k).filter(|s| s.0 == key) {
                            if window.start <= latest_start {
                                sessions.push((window, Bytes::copy_from_slice(v)));
                            }
                        }
                        true
                    })
                })
            })
        });
        sessions
    }

    fn all(&self) -> Vec<(Bytes, Window, Bytes)> {
        let min_live = self.time.min_live();
        let mut sessions = Vec::new();
        self.each_session(min_live, self.time.observed, |key, window, v| {
            if window.end >= min_live {
                sessions.push((
                    Bytes::copy_from_slice(key),
                    window,
                    Bytes::copy_from_slice(v),
                ));
            }
        });
        // By key, end, then start, whatever the keys' lengths.
        sessions.sort_by(|a, b| (&a.0, a.1.end, a.1.start).cmp(&(&b.0, b.1.end, b.1.start)));
        sessions
    }

    fn sessions_ending(
        &self,
        earliest_end: Timestamp,
        latest_end: Timestamp,
    ) -> Vec<(Bytes, Window, Bytes)> {
        let mut sessions = Vec::new();
        if earliest_end > latest_end {
            return sessions;
        }
        self.each_session(earliest_end, latest_end, |key, window, v| {
            if (earliest_end..=latest_end).contains(&window.end) {
                sessions.push((
                    Bytes::copy_from_slice(key),
                    window,
                    Bytes::copy_from_slice(v),
                ));
            }
        });
        // Kafka's order: by end, start, then key.
        sessions.sort_by(|a, b| (a.1.end, a.1.start, &a.0).cmp(&(b.1.end, b.1.start, &b.0)));
        sessions
    }

    fn len(&self) -> usize {
        let min_live = self.time.min_live();
        let mut n = 0;
        self.each_session(min_live, self.time.observed, |_, window, _| {
            n += usize::from(window.end >= min_live);
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
        let (key, session) = parse_session_store_key(&record.key)?;
        self.write(Origin::Restore, &key, session, record.value.as_deref());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(start: i64, end: i64) -> Window {
        Window { start, end }
    }

    #[test]
    fn sessions_are_found_by_overlap_and_expire_after_retention() {
        let mut store = LayeredSessionStore::in_memory("s", 100);
        store.put(b"a", w(0, 10), Some(Bytes::from("1")));
        store.put(b"a", w(50, 60), Some(Bytes::from("2")));
        store.put(b"b", w(0, 70), Some(Bytes::from("3")));
        let found: Vec<_> = store
            .find_sessions(b"a", 5, 55)
            .into_iter()
            .map(|s| s.0)
            .collect();
        assert_eq!(found, [w(0, 10), w(50, 60)]);
        let found: Vec<_> = store
            .find_sessions(b"a", 11, 100)
            .into_iter()
            .map(|s| s.0)
            .collect();
        assert_eq!(found, [w(50, 60)]);
        store.put(b"a", w(0, 10), None);
        assert_eq!(store.find_sessions(b"a", 0, 100).len(), 1);
        // An end at 200 expires sessions ending before 101.
        store.put(b"c", w(200, 200), Some(Bytes::from("4")));
        assert_eq!(store.len(), 1);
        let mut rebuilt = LayeredSessionStore::in_memory("s", 100);
        for r in store.layers_mut().take_changelog() {
            rebuilt.restore(r).unwrap();
        }
        rebuilt.layers_mut().commit(None);
        assert_eq!(rebuilt.all(), store.all());
    }

    #[test]
    fn sessions_ending_in_a_range_come_by_end_start_then_key() {
        let mut store = LayeredSessionStore::in_memory("s", 1_000);
        store.put(b"b", w(5, 20), Some(Bytes::from("1")));
        store.put(b"a", w(10, 20), Some(Bytes::from("2")));
        store.put(b"c", w(5, 20), Some(Bytes::from("3")));
        store.put(b"a", w(0, 9), Some(Bytes::from("4")));
        store.put(b"z", w(30, 31), Some(Bytes::from("5")));
        let ending = |store: &LayeredSessionStore, from, to| -> Vec<(Bytes, Window)> {
            store
                .sessions_ending(from, to)
                .into_iter()
                .map(|(k, w, _)| (k, w))
                .collect()
        };
        let expected = vec![
            (Bytes::from("a"), w(0, 9)),
            (Bytes::from("b"), w(5, 20)),
            (Bytes::from("c"), w(5, 20)),
            (Bytes::from("a"), w(10, 20)),
        ];
        assert_eq!(ending(&store, 0, 30), expected);
        assert_eq!(ending(&store, 10, 20), expected[1..]);
        assert_eq!(ending(&store, 21, 30), []);
        // The trait's default (over `all`) gives the same.
        let default = SessionBytesStore::all(&store)
            .into_iter()
            .filter(|(_, w, _)| (0..=30).contains(&w.end))
            .count();
        assert_eq!(default, 4);
    }

    #[test]
    fn expired_sessions_stay_for_emission_until_their_segment_goes() {
        // Retention 100 ms: segments of a minute.
        let mut store = LayeredSessionStore::in_memory("s", 100);
        store.put(b"a", w(0, 10), Some(Bytes::from("1")));
        store.put(b"b", w(200, 200), Some(Bytes::from("2")));
        assert!(store.find_sessions(b"a", 0, 1_000).is_empty());
        assert_eq!(store.len(), 1);
        assert_eq!(store.all().len(), 1);
        let ending: Vec<Window> = store
            .sessions_ending(0, 300)
            .into_iter()
            .map(|s| s.1)
            .collect();
        assert_eq!(ending, [w(0, 10), w(200, 200)]);
        // A write into an expired segment is logged but not kept.
        store.layers_mut().take_changelog();
        store.put(b"c", w(120_000, 120_000), Some(Bytes::from("3")));
        store.put(b"d", w(5, 5), Some(Bytes::from("4")));
        assert_eq!(store.layers_mut().take_changelog().len(), 2);
        let ending: Vec<Window> = store
            .sessions_ending(0, i64::MAX)
            .into_iter()
            .map(|s| s.1)
            .collect();
        assert_eq!(ending, [w(120_000, 120_000)]);
    }

    #[test]
    fn the_changelog_key_is_kafkas_session_key() {
        let k = session_store_key(b"k", w(5, 9));
        assert_eq!(&k[1..9], &9i64.to_be_bytes());
        assert_eq!(&k[9..], &5i64.to_be_bytes());
        assert_eq!(
            parse_session_store_key(&k).unwrap(),
            (Bytes::from("k"), w(5, 9))
        );
        let mut store = LayeredSessionStore::in_memory("s", 100);
        store.put(b"k", w(5, 9), Some(Bytes::from("v")));
        assert_eq!(store.layers_mut().take_changelog()[0].key, k);
    }
}
