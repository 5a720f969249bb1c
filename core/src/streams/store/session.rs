//! Session stores: values by key and session (a window whose bounds grow as records join it),
//! as session-windowed aggregations keep them. Changelog keys have Kafka's session key layout
//! (the serialized key, the session end, then its start, each 8 bytes big-endian).
//!
//! Retention follows Kafka's segmented stores: a session that ended more than the retention
//! period before the latest end is expired, so lookups by key no longer see it, but it is only
//! removed with its whole segment of end times (half the retention, at least a minute), and
//! until then emit-on-window-close still finds it among the sessions that closed.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use bytes::{BufMut, Bytes, BytesMut};

use super::changelog::{ChangelogBatch, ChangelogBuffer};
use super::small_bytes::SmallBytes;
use super::ChangelogRecord;
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
        let mut sessions: Vec<_> = self
            .all()
            .into_iter()
            .filter(|(_, w, _)| (earliest_end..=latest_end).contains(&w.end))
            .collect();
        sessions.sort_by(|a, b| (a.1.end, a.1.start, &a.0).cmp(&(b.1.end, b.1.start, &b.0)));
        sessions
    }

    /// The number of live sessions.
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

/// A session store in memory.
#[derive(Debug, Clone)]
pub struct InMemorySessionStore {
    name: String,
    retention: i64,
    /// How many ms of session ends one segment holds: sessions leave in whole segments.
    segment_interval: i64,
    /// The latest session end written.
    observed: Timestamp,
    /// By key, end, start.
    sessions: BTreeMap<(SmallBytes, Timestamp, Timestamp), SmallBytes>,
    /// The same sessions by end, to drop expired segments without a scan.
    by_end: BTreeSet<(Timestamp, SmallBytes, Timestamp)>,
    log: ChangelogBuffer,
    logging: bool,
}

/// The shortest segment of Kafka's segmented stores, in ms.
const MIN_SEGMENT_INTERVAL_MS: i64 = 60_000;

impl InMemorySessionStore {
    /// An empty store keeping sessions that end within `retention` ms of the latest end.
    pub fn new(name: impl Into<String>, retention: i64) -> Self {
        Self {
            name: name.into(),
            retention,
            segment_interval: (retention / 2).max(MIN_SEGMENT_INTERVAL_MS),
            observed: i64::MIN,
            sessions: BTreeMap::new(),
            by_end: BTreeSet::new(),
            log: ChangelogBuffer::default(),
            logging: true,
        }
    }

    /// The same store with its changelog on (the default) or off.
    pub fn with_logging(mut self, logging: bool) -> Self {
        self.logging = logging;
        self
    }

    /// The earliest end a lookup sees: sessions ending before it are expired.
    fn min_live_end(&self) -> Timestamp {
        self.observed
            .saturating_sub(self.retention)
            .saturating_add(1)
    }

    fn segment(&self, end: Timestamp) -> i64 {
        end / self.segment_interval
    }

    /// The first segment still held: older ones are removed.
    fn min_live_segment(&self) -> i64 {
        self.segment(self.observed.saturating_sub(self.retention))
    }

    fn apply(&mut self, key: &[u8], session: Window, value: Option<&[u8]>) {
        self.observed = self.observed.max(session.end);
        let min_live_segment = self.min_live_segment();
        if self.segment(session.end) < min_live_segment {
            return;
        }
        let key = SmallBytes::copy(key);
        let by_end = (session.end, key.clone(), session.start);
        let k = (key, session.end, session.start);
        match value {
            Some(v) => {
                self.by_end.insert(by_end);
                self.sessions.insert(k, SmallBytes::copy(v));
            }
            None => {
                self.by_end.remove(&by_end);
                self.sessions.remove(&k);
            }
        }
        while let Some((end, _, _)) = self.by_end.first() {
            if self.segment(*end) >= min_live_segment {
                break;
            }
            let (end, key, start) = self.by_end.pop_first().expect("a first entry");
            self.sessions.remove(&(key, end, start));
        }
    }
}

impl SessionBytesStore for InMemorySessionStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn put(&mut self, key: &[u8], session: Window, value: Option<Bytes>) {
        // Logged even when the session's segment is gone, as Kafka's logging store does.
        if self.logging {
            self.log.push(
                &[
                    key,
                    &session.end.to_be_bytes(),
                    &session.start.to_be_bytes(),
                ],
                value.as_deref(),
            );
        }
        self.apply(key, session, value.as_deref());
    }

    fn find_sessions(
        &self,
        key: &[u8],
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Vec<(Window, Bytes)> {
        let from = earliest_end.max(self.min_live_end());
        let k = SmallBytes::copy(key);
        let range = (
            Bound::Included((k.clone(), from, i64::MIN)),
            Bound::Included((k, i64::MAX, i64::MAX)),
        );
        self.sessions
            .range(range)
            .filter(|((_, _, start), _)| *start <= latest_start)
            .map(|((_, end, start), v)| {
                (
                    Window {
                        start: *start,
                        end: *end,
                    },
                    v.to_bytes(),
                )
            })
            .collect()
    }

    fn all(&self) -> Vec<(Bytes, Window, Bytes)> {
        let min_live = self.min_live_end();
        self.sessions
            .iter()
            .filter(|((_, end, _), _)| *end >= min_live)
            .map(|((k, end, start), v)| {
                (
                    k.to_bytes(),
                    Window {
                        start: *start,
                        end: *end,
                    },
                    v.to_bytes(),
                )
            })
            .collect()
    }

    fn sessions_ending(
        &self,
        earliest_end: Timestamp,
        latest_end: Timestamp,
    ) -> Vec<(Bytes, Window, Bytes)> {
        if earliest_end > latest_end {
            return Vec::new();
        }
        let mut sessions: Vec<_> = self
            .by_end
            .range((
                Bound::Included((earliest_end, SmallBytes::copy(&[]), i64::MIN)),
                Bound::Unbounded,
            ))
            .take_while(|(end, _, _)| *end <= latest_end)
            .filter_map(|(end, key, start)| {
                let value = self.sessions.get(&(key.clone(), *end, *start))?;
                let window = Window {
                    start: *start,
                    end: *end,
                };
                Some((key.to_bytes(), window, value.to_bytes()))
            })
            .collect();
        // The index is by end, key, start; Kafka's order is by end, start, key.
        sessions.sort_by(|a, b| (a.1.end, a.1.start, &a.0).cmp(&(b.1.end, b.1.start, &b.0)));
        sessions
    }

    fn len(&self) -> usize {
        let min_live = self.min_live_end();
        self.by_end
            .range((
                Bound::Included((min_live, SmallBytes::copy(&[]), i64::MIN)),
                Bound::Unbounded,
            ))
            .count()
    }

    fn changelog(&self) -> ChangelogBatch<'_> {
        self.log.batch()
    }

    fn clear_changelog(&mut self) {
        self.log.clear();
    }

    fn restore(&mut self, record: ChangelogRecord) -> Result<(), SerdeError> {
        let (key, session) = parse_session_store_key(&record.key)?;
        self.apply(&key, session, record.value.as_deref());
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
        let mut store = InMemorySessionStore::new("s", 100);
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
        let mut rebuilt = InMemorySessionStore::new("s", 100);
        for r in store.take_changelog() {
            rebuilt.restore(r).unwrap();
        }
        assert_eq!(rebuilt.all(), store.all());
    }

    #[test]
    fn sessions_ending_in_a_range_come_by_end_start_then_key() {
        let mut store = InMemorySessionStore::new("s", 1_000);
        store.put(b"b", w(5, 20), Some(Bytes::from("1")));
        store.put(b"a", w(10, 20), Some(Bytes::from("2")));
        store.put(b"c", w(5, 20), Some(Bytes::from("3")));
        store.put(b"a", w(0, 9), Some(Bytes::from("4")));
        store.put(b"z", w(30, 31), Some(Bytes::from("5")));
        let ending = |store: &InMemorySessionStore, from, to| -> Vec<(Bytes, Window)> {
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
        let mut store = InMemorySessionStore::new("s", 100);
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
        store.take_changelog();
        store.put(b"c", w(120_000, 120_000), Some(Bytes::from("3")));
        store.put(b"d", w(5, 5), Some(Bytes::from("4")));
        assert_eq!(store.take_changelog().len(), 2);
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
        let mut store = InMemorySessionStore::new("s", 100);
        store.put(b"k", w(5, 9), Some(Bytes::from("v")));
        assert_eq!(store.take_changelog()[0].key, k);
    }
}
