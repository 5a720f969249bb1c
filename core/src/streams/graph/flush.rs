//! Forwarding at flush, as Kafka's cache flush listeners do: a processor whose store has a
//! record cache does not forward each update; the updates of a key coalesce in the cache, and
//! what the cache sends down at a commit (or evicts) is forwarded from the processor then,
//! decoded from the store's bytes, with the stored timestamp and no headers.

use super::{Data, Graph};
use crate::log::Timestamp;
use crate::streams::record::{Change, Record};
use crate::streams::store::{session_of, window_of, Flushed, KeyValueSerdes, ValueAndTimestamp};
use crate::streams::windowed::Windowed;
use crate::streams::windows::Window;
use crate::streams::StreamsError;

/// Forwards, from the node that writes a store, what the store's cache flushed (Kafka's cache
/// flush listener), typed as the node's output.
pub(crate) trait FlushForward: Send {
    /// Forwards each entry of `flushed` from node `node`.
    fn forward(
        &mut self,
        flushed: &Flushed,
        graph: &mut Graph,
        node: usize,
    ) -> Result<(), StreamsError>;
}

/// A store whose cache's flushes a node forwards.
pub(crate) struct FlushForwarder {
    pub(crate) store: usize,
    pub(crate) node: usize,
    /// `None` only while it forwards.
    pub(crate) forward: Option<Box<dyn FlushForward>>,
    /// The flushed entries' buffer, kept between flushes for its room.
    pub(crate) buffer: Flushed,
}

/// How a store's entries are keyed, and so what a forwarded update's key is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FlushedKeys {
    /// A key-value store: the record's key.
    Plain,
    /// A window store of windows `size_ms` long: the windowed key. Entries that are not a
    /// window's (the store's bookkeeping) are not forwarded.
    Windows { size_ms: i64 },
}

/// Forwards a timestamped store's flushed entries as `Change`s of its values.
pub(crate) struct ChangeFlush<K, V> {
    pub(crate) store: String,
    pub(crate) serdes: KeyValueSerdes<K, ValueAndTimestamp<V>>,
    pub(crate) keys: FlushedKeys,
    pub(crate) old_values: bool,
}

impl<K: Data, V: Data> ChangeFlush<K, V> {
    fn forward_each<KOut: Data>(
        &self,
        flushed: &Flushed,
        graph: &mut Graph,
        node: usize,
        key_of: impl Fn(&[u8]) -> Result<Option<KOut>, StreamsError>,
    ) -> Result<(), StreamsError> {
        for (entry, new, old) in flushed.iter() {
            let Some(key) = key_of(entry)? else {
                continue;
            };
            let change = decode_change(&self.store, &self.serdes, new, old, self.old_values)?;
            if !forward_change(graph, node, key, change) {
                break;
            }
        }
        Ok(())
    }
}

impl<K: Data, V: Data> FlushForward for ChangeFlush<K, V> {
    fn forward(
        &mut self,
        flushed: &Flushed,
        graph: &mut Graph,
        node: usize,
    ) -> Result<(), StreamsError> {
        let (keys, store) = (&self.serdes.keys, &self.store);
        match self.keys {
            FlushedKeys::Plain => self.forward_each(flushed, graph, node, |entry| {
                Ok(Some(keys.deserialize(store, entry)?))
            }),
            FlushedKeys::Windows { size_ms } => self.forward_each(flushed, graph, node, |entry| {
                let Some((key, start, _)) = window_of(entry) else {
                    return Ok(None);
                };
                let window = Window {
                    start,
                    end: start.saturating_add(size_ms),
                };
                Ok(Some(Windowed::new(keys.deserialize(store, key)?, window)))
            }),
        }
    }
}

/// Forwards a session store's flushed entries as `Change`s of their sessions' aggregates,
/// each at its session's end, keyed by the windowed key (Kafka's session cache flush
/// listener). Entries that are not a session's (the store's bookkeeping) are not forwarded.
pub(crate) struct SessionFlush<K, V> {
    pub(crate) store: String,
    pub(crate) serdes: KeyValueSerdes<K, V>,
    pub(crate) old_values: bool,
}

impl<K: Data, V: Data> FlushForward for SessionFlush<K, V> {
    fn forward(
        &mut self,
        flushed: &Flushed,
        graph: &mut Graph,
        node: usize,
    ) -> Result<(), StreamsError> {
        let store = &self.store;
        let decode = |v: Option<&[u8]>| {
            v.map(|v| self.serdes.values.deserialize(store, v))
                .transpose()
        };
        for (entry, new, old) in flushed.iter() {
            let Some((key, window)) = session_of(entry) else {
                continue;
            };
            let key = Windowed::new(self.serdes.keys.deserialize(store, key)?, window);
            let old = if self.old_values { decode(old)? } else { None };
            let change = (Change::new(decode(new)?, old), Some(window.end));
            if !forward_change(graph, node, key, change) {
                break;
            }
        }
        Ok(())
    }
}

/// A flushed entry's values, decoded, with the timestamp of the update: the new value's, or
/// the old one's for a deletion.
type DecodedChange<V> = (Change<V>, Option<Timestamp>);

fn decode_change<K, V: 'static>(
    store: &str,
    serdes: &KeyValueSerdes<K, ValueAndTimestamp<V>>,
    new: Option<&[u8]>,
    old: Option<&[u8]>,
    old_values: bool,
) -> Result<DecodedChange<V>, StreamsError> {
    let decode = |v: Option<&[u8]>| v.map(|v| serdes.values.deserialize(store, v)).transpose();
    let (new, old) = (decode(new)?, decode(old)?);
    let timestamp = new
        .as_ref()
        .map(|n| n.timestamp)
        .or(old.as_ref().map(|o| o.timestamp));
    let old = if old_values {
        old.map(|o| o.value)
    } else {
        None
    };
    Ok((Change::new(new.map(|n| n.value), old), timestamp))
}

/// Forwards one flushed update from `node`; `false` once a processor downstream failed.
fn forward_change<K: Data, V: Data>(
    graph: &mut Graph,
    node: usize,
    key: K,
    (change, timestamp): DecodedChange<V>,
) -> bool {
    let timestamp = timestamp.unwrap_or(graph.state.stream_time);
    graph.state.timestamp = timestamp;
    graph.forward(
        node,
        Record {
            key,
            value: change,
            timestamp,
            headers: Vec::new(),
        },
    );
    graph.state.error.is_none()
}

impl Graph {
    /// Forwards what the stores' caches flushed (or evicted) since the last call, from the
    /// nodes that write them, outside any record's context; whether anything was.
    pub(crate) fn forward_flushed(&mut self) -> bool {
        let mut any = false;
        for i in 0..self.state.flush_forwarders.len() {
            let forwarder = &mut self.state.flush_forwarders[i];
            let (store, node) = (forwarder.store, forwarder.node);
            let mut buffer = std::mem::take(&mut forwarder.buffer);
            self.state.stores[store].store.swap_flushed(&mut buffer);
            if !buffer.is_empty() {
                any = true;
                if let Some(mut forward) = self.state.flush_forwarders[i].forward.take() {
                    let saved = (self.state.metadata.take(), self.state.timestamp);
                    if let Err(e) = forward.forward(&buffer, self, node) {
                        self.fail_at(node, e);
                    }
                    (self.state.metadata, self.state.timestamp) = saved;
                    self.state.flush_forwarders[i].forward = Some(forward);
                }
                buffer.clear();
            }
            self.state.flush_forwarders[i].buffer = buffer;
        }
        any
    }
}
