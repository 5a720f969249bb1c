//! Session stores: values by key and session (a window whose bounds grow as records join it),
//! as session-windowed aggregations keep them. Changelog keys have Kafka's session key layout
//! (the serialized key, the session end, then its start, each 8 bytes big-endian); sessions
//! that ended longer than the retention period ago are dropped.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use bytes::{BufMut, Bytes, BytesMut};

use super::changelog::ChangelogBuffer;
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

    /// The number of live sessions.
    fn len(&self) -> usize;

    /// Whether the store holds nothing.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The writes since the last call.
    fn take_changelog(&mut self) -> Vec<ChangelogRecord>;

    /// Appends the writes since the last call to `out` (what the task uses, with a buffer it
    /// keeps).
    fn take_changelog_into(&mut self, out: &mut Vec<ChangelogRecord>) {
        out.extend(self.take_changelog());
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
    observed: Timestamp,
    /// By key, end, start.
    sessions: BTreeMap<(SmallBytes, Timestamp, Timestamp), SmallBytes>,
    /// The same sessions by end, to drop expired ones without a scan.
    by_end: BTreeSet<(Timestamp, SmallBytes, Timestamp)>,
    log: ChangelogBuffer,
    logging: bool,
}

impl InMemorySessionStore {
    /// An empty store keeping sessions that end within `retention` ms of the latest end.
    pub fn new(name: impl Into<String>, retention: i64) -> Self {
        Self {
            name: name.into(),
            retention,
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

    fn min_live_end(&self) -> Timestamp {
        self.observed
            .saturating_sub(self.retention)
            .saturating_add(1)
    }

    fn apply(&mut self, key: &[u8], session: Window, value: Option<&[u8]>) {
        self.observed = self.observed.max(session.end);
        let min_live = self.min_live_end();
        if session.end < min_live {
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
            if *end >= min_live {
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
        let min_live = self
            .observed
            .max(session.end)
            .saturating_sub(self.retention)
            .saturating_add(1);
        if session.end < min_live {
            return;
        }
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
        self.sessions
            .iter()
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

    fn len(&self) -> usize {
        self.sessions.len()
    }

    fn take_changelog(&mut self) -> Vec<ChangelogRecord> {
        self.log.take()
    }

    fn take_changelog_into(&mut self, out: &mut Vec<ChangelogRecord>) {
        self.log.take_into(out);
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
