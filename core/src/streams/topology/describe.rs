//! `Topology::describe()` in Kafka Streams' exact text, so that a snapshot of it is the same
//! whether Kafka Streams or eddy printed it, and any rename shows before it breaks a store or a
//! topic. The order of nodes and neighbours follows Kafka's: nodes by the size of the sub-tree
//! they root, then by name; neighbours in the order Kafka's description builder leaves them
//! (see [`super::java`]).

use std::cmp::Ordering;
use std::fmt;

use super::java::{hash_order, hash_set_string, TreeSet};
use super::{NodeKind, Topology};

/// The printable description of a topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyDescription {
    text: String,
}

impl fmt::Display for TopologyDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

pub(crate) fn describe(topology: &Topology) -> TopologyDescription {
    let mut text = String::from("Topologies:\n ");
    for (id, members) in topology.groups().into_iter().enumerate() {
        text.push_str("  ");
        if topology.is_global_group(&members) {
            text.push_str(&global_store(topology, id, &members));
        } else {
            text.push_str(&subtopology(topology, id, &members));
        }
    }
    TopologyDescription { text }
}

fn subtopology(topology: &Topology, id: usize, members: &[usize]) -> String {
    let n = members.len();
    let local = |global: usize| members.iter().position(|&m| m == global);
    let names: Vec<&str> = members
        .iter()
        .map(|&m| topology.nodes[m].name.as_str())
        .collect();
    let mut size = vec![1usize; n];
    let mut predecessors = vec![TreeSet::default(); n];
    let mut successors = vec![TreeSet::default(); n];

    // Kafka walks the nodes in the order of a HashMap of their names and, for each, links
    // its predecessors in the order they were given, growing sub-tree sizes as it goes.
    for node in hash_order(&names) {
        for &p in &topology.nodes[members[node]].parents {
            let Some(p) = local(p) else { continue };
            predecessors[node].add(p, |a, b| compare(&size, &names, a, b));
            successors[p].add(node, |a, b| compare(&size, &names, a, b));
            let delta = size[node];
            grow(&mut size, &predecessors, p, delta);
        }
    }

    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| compare(&size, &names, a, b));
    let mut out = format!("Sub-topology: {id}\n");
    for node in order {
        let def = &topology.nodes[members[node]];
        let list = |set: &TreeSet| {
            if set.is_empty() {
                "none".to_string()
            } else {
                set.iter()
                    .into_iter()
                    .map(|i| names[i])
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        out.push_str("    ");
        match &def.kind {
            NodeKind::Source { topics, .. } => {
                out.push_str(&format!(
                    "Source: {} (topics: {})\n      --> {}",
                    def.name,
                    hash_set_string(topics),
                    list(&successors[node])
                ));
            }
            NodeKind::Processor => {
                out.push_str(&format!(
                    "Processor: {} (stores: {})\n      --> {}\n      <-- {}",
                    def.name,
                    hash_set_string(&def.stores),
                    list(&successors[node]),
                    list(&predecessors[node])
                ));
            }
            NodeKind::Sink { topic } => {
                let target = match topic {
                    Some(t) => format!("topic: {t}"),
                    None => format!("extractor class: {}", def.name),
                };
                out.push_str(&format!(
                    "Sink: {} ({target})\n      <-- {}",
                    def.name,
                    list(&predecessors[node])
                ));
            }
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

/// A global store's group, as Kafka's `GlobalStore` prints it: its source and the processor
/// that fills the store, with no blank line after.
fn global_store(topology: &Topology, id: usize, members: &[usize]) -> String {
    let source = members
        .iter()
        .map(|&m| &topology.nodes[m])
        .find(|n| matches!(n.kind, NodeKind::Source { .. }));
    let processor = members
        .iter()
        .map(|&m| &topology.nodes[m])
        .find(|n| matches!(n.kind, NodeKind::Processor));
    let (Some(source), Some(processor)) = (source, processor) else {
        return format!("Sub-topology: {id} for global store (will not generate tasks)\n");
    };
    let NodeKind::Source { topics, .. } = &source.kind else {
        unreachable!("found as a source");
    };
    format!(
        "Sub-topology: {id} for global store (will not generate tasks)\n    \
         Source: {} (topics: {})\n      --> {}\n    \
         Processor: {} (stores: {})\n      --> none\n      <-- {}\n",
        source.name,
        hash_set_string(&topics[..1]),
        processor.name,
        processor.name,
        hash_set_string(&processor.stores[..processor.stores.len().min(1)]),
        source.name,
    )
}

/// Kafka's `NodeComparator`: larger sub-trees first, then by name.
fn compare(size: &[usize], names: &[&str], a: usize, b: usize) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    size[b]
        .cmp(&size[a])
        .then_with(|| java_string_cmp(names[a], names[b]))
}

/// `String.compareTo`: by UTF-16 code unit.
fn java_string_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Kafka's `updateSize`: adds `delta` to `node` and to everything upstream of it.
fn grow(size: &mut [usize], predecessors: &[TreeSet], node: usize, delta: usize) {
    size[node] += delta;
    for p in predecessors[node].iter() {
        grow(size, predecessors, p, delta);
    }
}
