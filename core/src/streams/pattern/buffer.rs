//! The shared buffer of one key (Flink CEP's `SharedBuffer`): the events partial matches have
//! taken, each stored once however many partial matches share it, and the nodes linking each
//! taken event to the one taken before it under a version, so that a match is read back by
//! following edges of compatible versions. Events, nodes and edges are reference counted as
//! Flink counts them, and go when the last partial match holding them does.

use std::num::NonZeroU32;

use serde::{Deserialize, Serialize};

use super::version::Version;
use crate::log::Timestamp;
use crate::streams::store::small_bytes::SmallValue;

/// An event of the buffer: its timestamp, then its place among the key's events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) struct EventId {
    pub(crate) timestamp: Timestamp,
    pub(crate) seq: Seq,
}

/// An event's number among its key's events, from 0 up to `u32::MAX - 1` and then round
/// again: held one up, so that an absent event or node (`Option<EventId>`, `Option<NodeId>`)
/// takes no room of its own. Written and read as the number itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Seq(NonZeroU32);

impl Seq {
    /// The first number.
    pub(crate) const FIRST: Seq = Seq(NonZeroU32::MIN);

    /// The number `n`; `None` for `u32::MAX`, which no event has.
    pub(crate) fn from_number(n: u32) -> Option<Seq> {
        n.checked_add(1).and_then(NonZeroU32::new).map(Seq)
    }

    /// The number.
    pub(crate) fn number(self) -> u32 {
        self.0.get() - 1
    }

    /// The next number, back to the first after the last.
    pub(crate) fn next(self) -> Seq {
        Seq::from_number(self.number().wrapping_add(1)).unwrap_or(Seq::FIRST)
    }
}

impl Serialize for Seq {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.number())
    }
}

impl<'de> Deserialize<'de> for Seq {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u32::deserialize(d)?;
        Seq::from_number(n).ok_or_else(|| serde::de::Error::custom("an event number out of range"))
    }
}

/// An event taken by a step (by the index of the step's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct NodeId {
    pub(crate) event: EventId,
    pub(crate) page: u16,
}

/// A stored event: the value, its serialized form once made (what the store keeps; short
/// ones inline) and its locks.
pub(crate) struct Event<V> {
    pub(crate) id: EventId,
    pub(crate) value: V,
    pub(crate) bytes: Option<SmallValue>,
    pub(crate) locks: u32,
}

/// A link from a node back to the node taken before it, under a version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Edge {
    pub(crate) target: Option<NodeId>,
    pub(crate) version: Version,
    pub(crate) locks: u32,
}

/// A node: an event taken by a step, with its edges back, in the order they were added.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Node {
    pub(crate) id: NodeId,
    pub(crate) locks: u32,
    pub(crate) edges: Vec<Edge>,
}

/// One path read back from the buffer: the events of each step, steps in the order of their
/// first event.
pub(crate) type Path = Vec<(u16, Vec<EventId>)>;

/// A key's shared buffer. Small per key, so kept in vectors searched in order.
pub(crate) struct SharedBuffer<V> {
    pub(crate) events: Vec<Event<V>>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) next_seq: Seq,
}

impl<V> Default for SharedBuffer<V> {
    fn default() -> Self {
        SharedBuffer {
            events: Vec::new(),
            nodes: Vec::new(),
            next_seq: Seq::FIRST,
        }
    }
}

/// A lock released: whether none is left.
fn release(locks: &mut u32) -> bool {
    if *locks == 0 {
        return true;
    }
    *locks -= 1;
    *locks == 0
}

impl<V> SharedBuffer<V> {
    /// Whether the buffer holds nothing.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.events.is_empty() && self.nodes.is_empty()
    }

    /// Empties the buffer, its room kept.
    pub(crate) fn clear(&mut self) {
        self.events.clear();
        self.nodes.clear();
        self.next_seq = Seq::FIRST;
    }

    /// Stores an event with one lock (the caller's, released when it is done with it).
    pub(crate) fn register_event(&mut self, value: V, timestamp: Timestamp) -> EventId {
        let id = EventId {
            timestamp,
            seq: self.next_seq,
        };
        self.next_seq = self.next_seq.next();
        self.events.push(Event {
            id,
            value,
            bytes: None,
            locks: 1,
        });
        id
    }

    /// The value of an event.
    pub(crate) fn event(&self, id: EventId) -> Option<&V> {
        self.events.iter().find(|e| e.id == id).map(|e| &e.value)
    }

    fn node_mut(&mut self, id: NodeId) -> Option<&mut Node> {
        self.nodes.iter_mut().find(|n| n.id == id)
    }

    fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Records that step `page` took `event` after `previous`, under `version`.
    pub(crate) fn put(
        &mut self,
        page: u16,
        event: EventId,
        previous: Option<NodeId>,
        version: &Version,
    ) -> NodeId {
        if let Some(previous) = previous {
            self.lock_node(previous, version);
        }
        let id = NodeId { event, page };
        let edge = Edge {
            target: previous,
            version: version.clone(),
            locks: 0,
        };
        match self.node_mut(id) {
            Some(node) => node.edges.push(edge),
            None => {
                self.nodes.push(Node {
                    id,
                    locks: 0,
                    edges: vec![edge],
                });
                if let Some(e) = self.events.iter_mut().find(|e| e.id == event) {
                    e.locks += 1;
                }
            }
        }
        id
    }

    /// Locks a node and its edges compatible with `version`.
    pub(crate) fn lock_node(&mut self, id: NodeId, version: &Version) {
        if let Some(node) = self.node_mut(id) {
            node.locks += 1;
            for edge in &mut node.edges {
                if version.is_compatible_with(&edge.version) {
                    edge.locks += 1;
                }
            }
        }
    }

    /// Releases a node locked under `version`, and what only it held (a node missing ends
    /// the release, as in Flink). Most releases follow one chain of edges back, without
    /// allocating; a second edge released at a node puts the first in a vector.
    pub(crate) fn release_node(&mut self, id: NodeId, version: &Version) {
        let mut next = Some((id, version.clone()));
        let mut more: Vec<(NodeId, Version)> = Vec::new();
        while let Some((id, version)) = next.take().or_else(|| more.pop()) {
            let Some(index) = self.nodes.iter().position(|n| n.id == id) else {
                break;
            };
            let node = &mut self.nodes[index];
            let mut i = 0;
            while i < node.edges.len() {
                let edge = &mut node.edges[i];
                if version.is_compatible_with(&edge.version) && release(&mut edge.locks) {
                    let edge = node.edges.remove(i);
                    if let Some(target) = edge.target {
                        // Last found, first released, as Flink's stack releases them.
                        if let Some(earlier) = next.replace((target, edge.version)) {
                            more.push(earlier);
                        }
                    }
                    continue;
                }
                i += 1;
            }
            if release(&mut node.locks) {
                let node = self.nodes.swap_remove(index);
                self.release_event(node.id.event);
            }
        }
    }

    /// Releases a lock on an event; it goes with the last.
    pub(crate) fn release_event(&mut self, id: EventId) {
        if let Some(index) = self.events.iter().position(|e| e.id == id) {
            if release(&mut self.events[index].locks) {
                self.events.swap_remove(index);
            }
        }
    }

    /// The paths back from `id` along edges compatible with `version`, depth first, as
    /// Flink's `extractPatterns` reads them.
    pub(crate) fn extract(&self, id: NodeId, version: &Version) -> Vec<Path> {
        let mut result = Vec::new();
        if self.node(id).is_none() {
            return result;
        }
        // (node or the end, version, the path so far: nodes from the last taken back)
        let mut states: Vec<(Option<NodeId>, Version, Vec<NodeId>)> =
            vec![(Some(id), version.clone(), Vec::new())];
        while let Some((entry, version, mut path)) = states.pop() {
            let Some(entry) = entry else {
                let mut complete: Path = Vec::new();
                for node in path.iter().rev() {
                    match complete.iter_mut().find(|(page, _)| *page == node.page) {
                        Some((_, events)) => events.push(node.event),
                        None => complete.push((node.page, vec![node.event])),
                    }
                }
                result.push(complete);
                continue;
            };
            let Some(node) = self.node(entry) else {
                continue;
            };
            path.push(entry);
            let compatible: Vec<&Edge> = node
                .edges
                .iter()
                .filter(|e| version.is_compatible_with(&e.version))
                .collect();
            for edge in compatible {
                states.push((edge.target, edge.version.clone(), path.clone()));
            }
        }
        result
    }
}
