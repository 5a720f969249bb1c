//! Suppression (Kafka's `KTable.suppress`): updates of a table wait in a buffer and leave it
//! either when their window has closed (one final result per window) or when a time limit has
//! passed since the key's first buffered update (the latest value then). Time is the
//! processor's observed stream time; a key keeps its place in the buffer when it is updated
//! again, and updates of one buffer time leave in the order of their serialized keys' bytes,
//! as Kafka's buffer (ordered by time, then key) has them. The buffer is written to a store,
//! so it has a changelog.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;

use super::ktable::KTable;
use super::options::SerdeOf;
use crate::log::{Header, Timestamp};
use crate::serde::{BytesSerde, Serde, SerdeError};
use crate::streams::processor::{Data, KeyValueStoreHandle, Processor, ProcessorContext};
use crate::streams::record::{Change, Record};
use crate::streams::store::StoreBuilder;
use crate::streams::windowed::Windowed;
use crate::streams::StreamsError;
use crate::streams::TopologyError;

/// The end of a windowed key's window.
type WindowEnd<K> = Arc<dyn Fn(&K) -> Timestamp + Send + Sync>;

/// An update waiting in the buffer.
#[derive(Clone)]
struct Buffered<K, V> {
    key: K,
    change: Change<V>,
    timestamp: Timestamp,
    headers: Vec<Header>,
    time: Timestamp,
}

/// When a buffered update may leave.
#[derive(Clone, Copy)]
enum Until {
    /// Its window's end plus grace has passed (final results; deletions are dropped).
    WindowCloses { grace: i64 },
    /// This long after its first buffered update.
    TimeLimit { limit: i64 },
}

struct Suppress<K, V> {
    store: String,
    until: Until,
    window_end: Option<WindowEnd<K>>,
    keys: SerdeOf<K>,
    values: SerdeOf<V>,
    observed: Timestamp,
    /// The buffered keys by buffer time, then serialized key.
    order: BTreeSet<(Timestamp, Bytes)>,
    entries: HashMap<Bytes, Buffered<K, V>>,
    handle: Option<KeyValueStoreHandle<Bytes, Bytes>>,
}

impl<K: Data, V: Data> Suppress<K, V> {
    fn encode(&self, store: &str, entry: &Buffered<K, V>) -> Result<Bytes, SerdeError> {
        let mut out = Vec::new();
        out.extend_from_slice(&entry.time.to_be_bytes());
        out.extend_from_slice(&entry.timestamp.to_be_bytes());
        let part = |v: Option<&V>, out: &mut Vec<u8>| -> Result<(), SerdeError> {
            match v {
                Some(v) => {
                    let mut bytes = Vec::new();
                    self.values.serialize_into(store, v, &mut bytes)?;
                    out.push(1);
                    let len = u32::try_from(bytes.len()).map_err(|_| {
                        SerdeError::new("suppression buffer", store, "a value over 4 GiB")
                    })?;
                    out.extend_from_slice(&len.to_be_bytes());
                    out.extend_from_slice(&bytes);
                }
                None => out.push(0),
            }
            Ok(())
        };
        part(entry.change.new.as_ref(), &mut out)?;
        part(entry.change.old.as_ref(), &mut out)?;
        Ok(Bytes::from(out))
    }

    fn decode(&self, store: &str, key: &Bytes, bytes: &[u8]) -> Result<Buffered<K, V>, SerdeError> {
        let bad = || SerdeError::new("suppression buffer", store, "truncated entry");
        let long = |b: &[u8]| i64::from_be_bytes(b.try_into().expect("8 bytes"));
        if bytes.len() < 16 {
            return Err(bad());
        }
        let (time, timestamp) = (long(&bytes[..8]), long(&bytes[8..16]));
        let mut rest = &bytes[16..];
        let mut part = || -> Result<Option<V>, SerdeError> {
            let (&flag, after) = rest.split_first().ok_or_else(bad)?;
            if flag == 0 {
                rest = after;
                return Ok(None);
            }
            let (len, after) = after.split_first_chunk::<4>().ok_or_else(bad)?;
            let len = u32::from_be_bytes(*len) as usize;
            if after.len() < len {
                return Err(bad());
            }
            let (value, after) = after.split_at(len);
            rest = after;
            Ok(Some(self.values.deserialize(store, value)?))
        };
        let new = part()?;
        let old = part()?;
        Ok(Buffered {
            key: self.keys.deserialize(store, key)?,
            change: Change { new, old },
            timestamp,
            headers: Vec::new(),
            time,
        })
    }

    fn expiry(&self) -> Timestamp {
        match self.until {
            Until::WindowCloses { grace } => self.observed - grace,
            Until::TimeLimit { limit } => self.observed - limit,
        }
    }
}

impl<K: Data, V: Data> Processor<K, Change<V>, K, Change<V>> for Suppress<K, V> {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, Change<V>>) -> Result<(), StreamsError> {
        let handle = ctx.key_value_store_handle::<Bytes, Bytes>(&self.store)?;
        // What a restored store holds is the buffer.
        for (key, value) in ctx.key_value_store(&handle).all()? {
            let entry = self.decode(&self.store, &key, &value)?;
            self.order.insert((entry.time, key.clone()));
            self.entries.insert(key, entry);
        }
        self.handle = Some(handle);
        Ok(())
    }

    fn process(
        &mut self,
        r: Record<K, Change<V>>,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
    ) -> Result<(), StreamsError> {
        let Some(handle) = self.handle.clone() else {
            return Ok(());
        };
        self.observed = self.observed.max(r.timestamp);
        let key_bytes = self.keys.serialize(&self.store, &r.key)?;
        let time = match (&self.window_end, self.until) {
            (Some(end), Until::WindowCloses { .. }) => end(&r.key),
            _ => r.timestamp,
        };
        let entry = match self.entries.remove(&key_bytes) {
            Some(previous) => Buffered {
                change: Change::new(r.value.new, previous.change.old),
                timestamp: r.timestamp,
                headers: r.headers,
                ..previous
            },
            None => {
                self.order.insert((time, key_bytes.clone()));
                Buffered {
                    key: r.key,
                    change: r.value,
                    timestamp: r.timestamp,
                    headers: r.headers,
                    time,
                }
            }
        };
        let encoded = self.encode(&self.store, &entry)?;
        ctx.key_value_store(&handle)
            .put(&key_bytes, Some(&encoded))?;
        self.entries.insert(key_bytes, entry);
        let expiry = self.expiry();
        while self.order.first().is_some_and(|(time, _)| *time <= expiry) {
            let Some((_, key)) = self.order.pop_first() else {
                break;
            };
            let Some(entry) = self.entries.remove(&key) else {
                continue;
            };
            ctx.key_value_store(&handle).put(&key, None)?;
            let drop_tombstone = matches!(self.until, Until::WindowCloses { .. });
            if entry.change.new.is_some() || !drop_tombstone {
                ctx.forward(Record {
                    key: entry.key,
                    value: entry.change,
                    timestamp: entry.timestamp,
                    headers: entry.headers,
                });
            }
        }
        Ok(())
    }
}

impl<K: Data, V: Data> KTable<K, V> {
    /// Holds each key's updates until `limit_ms` of stream time have passed since its first
    /// held update, then forwards its latest value (Kafka's `Suppressed.untilTimeLimit` with
    /// an unbounded buffer).
    pub fn suppress_until_time_limit(self, limit_ms: i64) -> KTable<K, V> {
        self.suppress(Until::TimeLimit { limit: limit_ms }, None)
    }

    fn suppress(mut self, until: Until, window_end: Option<WindowEnd<K>>) -> KTable<K, V> {
        let builder = self.builder.clone();
        // Kafka's suppression asks its parent for old values, which materializes a source.
        self.force_send_old_values();
        let named = self.take_next_name();
        let name = builder.name(named.clone(), "KTABLE-SUPPRESS-");
        let store = match &named {
            Some(n) => format!("{n}-store"),
            None => builder.new_store_name("KTABLE-SUPPRESS-"),
        };
        let (Some(keys), Some(values)) = (self.keys.clone(), self.values.clone()) else {
            builder.fail(TopologyError::MissingSerde {
                node: name.clone(),
                which: "key or value",
            });
            return KTable::new(builder, name, None, None, None);
        };
        let parent = self.node.clone();
        let (k, v, s) = (keys.clone(), values.clone(), store.clone());
        builder.with_topology(|t| {
            let p = t.index_of(&parent).into_iter().collect();
            t.add_processor_node(&name, p, move || Suppress {
                store: s.clone(),
                until,
                window_end: window_end.clone(),
                keys: k.clone(),
                values: v.clone(),
                observed: -1,
                order: BTreeSet::new(),
                entries: HashMap::new(),
                handle: None,
            })?;
            t.add_state_store(
                StoreBuilder::key_value(&store, BytesSerde, BytesSerde),
                &[&name],
            )?;
            Ok(())
        });
        KTable::new(builder, name, Some(keys), Some(values), None)
    }
}

impl<K: Data, V: Data> KTable<Windowed<K>, V> {
    /// Holds each window's updates until the window closes (its end plus the grace period of
    /// the windowed aggregation upstream), then forwards its final value once (Kafka's
    /// `Suppressed.untilWindowCloses`). Deletions are not forwarded.
    pub fn suppress_until_window_closes(self) -> KTable<Windowed<K>, V> {
        let Some(grace) = self.window_grace else {
            self.builder.fail(TopologyError::Invalid(format!(
                "{}: suppress_until_window_closes needs a windowed aggregation upstream",
                self.node
            )));
            return self;
        };
        self.suppress(
            Until::WindowCloses { grace },
            Some(Arc::new(|k: &Windowed<K>| k.window.end)),
        )
    }
}
