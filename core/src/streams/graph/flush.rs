//! Forwarding at flush, as Kafka's cache flush listeners do: a processor whose store has a
//! record cache does not forward each update; the updates of a key coalesce in the cache, and
//! what the cache sends down at a commit (or evicts) is forwarded from the processor then,
//! decoded from the store's bytes, with the stored timestamp and no headers.

use std::marker::PhantomData;

use super::{Data, Graph};
use crate::streams::record::{Change, Record};
use crate::streams::store::{Flushed, KeyValueSerdes, ValueAndTimestamp};
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

/// Forwards a timestamped key-value store's flushed entries as `Change`s of its values.
pub(crate) struct TimestampedFlush<K, V> {
    pub(crate) store: String,
    pub(crate) serdes: KeyValueSerdes<K, ValueAndTimestamp<V>>,
    pub(crate) old_values: bool,
    pub(crate) _types: PhantomData<fn(K, V)>,
}

impl<K: Data, V: Data> FlushForward for TimestampedFlush<K, V> {
    fn forward(
        &mut self,
        flushed: &Flushed,
        graph: &mut Graph,
        node: usize,
    ) -> Result<(), StreamsError> {
        for (key, new, old) in flushed.iter() {
            let key = self.serdes.keys.deserialize(&self.store, key)?;
            let decode = |v: Option<&[u8]>| {
                v.map(|v| self.serdes.values.deserialize(&self.store, v))
                    .transpose()
            };
            let (new, old) = (decode(new)?, decode(old)?);
            let timestamp = match (&new, &old) {
                (Some(n), _) => n.timestamp,
                (None, Some(o)) => o.timestamp,
                (None, None) => graph.state.stream_time,
            };
            let old = if self.old_values {
                old.map(|o| o.value)
            } else {
                None
            };
            graph.state.timestamp = timestamp;
            graph.forward(
                node,
                Record {
                    key,
                    value: Change::new(new.map(|n| n.value), old),
                    timestamp,
                    headers: Vec::new(),
                },
            );
            if graph.state.error.is_some() {
                break;
            }
        }
        Ok(())
    }
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
