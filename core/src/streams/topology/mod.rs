//! A topology: the graph of sources, processors and sinks, the stores the processors use and
//! the internal topics between sub-topologies. Built by the DSL ([`crate::streams::StreamsBuilder`])
//! or by hand with Kafka Streams' low-level calls ([`Topology::add_source`],
//! [`Topology::add_processor`], [`Topology::add_sink`], [`Topology::add_state_store`]), and
//! printed by [`Topology::describe`] in Kafka's exact text.
//!
//! A sub-topology is a connected part of the graph (processors that share a store are
//! connected through it); each runs as one task per input partition.

mod describe;
mod java;
pub(crate) mod nodes;

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::Arc;

pub use describe::TopologyDescription;

use crate::serde::Serde;
use crate::streams::graph::{Node, PartitionCounts};
use crate::streams::processor::{Data, Processor};
use crate::streams::record::Record;
use crate::streams::store::StoreBuilder;
use nodes::{ProcessorNode, SinkNode, SinkTopic, SourceNode};

use crate::streams::TopologyError;
pub use nodes::{StreamPartitioner, TimestampExtractor, TopicNameExtractor};

/// The type of the records a node takes or forwards, to check connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Payload {
    id: TypeId,
    name: &'static str,
}

impl Payload {
    pub(crate) fn of<T: 'static>() -> Self {
        Self {
            id: TypeId::of::<T>(),
            name: std::any::type_name::<T>(),
        }
    }

    pub(crate) fn record<K: 'static, V: 'static>() -> Self {
        Self::of::<Record<K, V>>()
    }
}

/// What a node's factory knows when a task builds it.
pub(crate) struct BuildContext<'a> {
    pub(crate) application_id: &'a str,
    pub(crate) topology: &'a Topology,
    pub(crate) partitions: Option<PartitionCounts>,
}

impl BuildContext<'_> {
    /// The full name of `topic`: internal topics are prefixed with the application id.
    pub(crate) fn topic(&self, topic: &str) -> Arc<str> {
        Arc::from(self.topology.full_topic_name(self.application_id, topic))
    }
}

/// Builds a node's instance for one task.
pub(crate) type NodeFactory = Arc<dyn Fn(&BuildContext<'_>) -> Box<dyn Node> + Send + Sync>;

/// What kind of node.
#[derive(Clone)]
pub(crate) enum NodeKind {
    /// Reads these topics.
    Source {
        topics: Vec<String>,
        extractor: Option<Arc<dyn TimestampExtractor>>,
    },
    /// Processes records.
    Processor,
    /// Writes a topic, fixed or chosen per record.
    Sink { topic: Option<String> },
}

/// A node of the topology.
#[derive(Clone)]
pub(crate) struct NodeDef {
    pub(crate) name: String,
    pub(crate) kind: NodeKind,
    pub(crate) parents: Vec<usize>,
    pub(crate) stores: Vec<String>,
    pub(crate) factory: NodeFactory,
    pub(crate) input: Option<Payload>,
    pub(crate) output: Option<Payload>,
}

/// A topic the topology creates for itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalTopic {
    /// Its name without the application id (`counts-repartition`).
    pub name: String,
    /// Repartition or changelog.
    pub kind: InternalTopicKind,
}

/// The two kinds of internal topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InternalTopicKind {
    /// Carries re-keyed records from one sub-topology to the next.
    Repartition,
    /// Carries a store's writes (compacted).
    Changelog,
}

/// A connected part of a topology, which runs as one task per partition of its inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subtopology {
    /// Its number, as `describe()` prints it.
    pub id: u32,
    /// The topics its sources read (internal ones without the application id).
    pub source_topics: Vec<String>,
    /// The names of its nodes, in the order they were added.
    pub nodes: Vec<String>,
    /// The stores its processors use.
    pub stores: Vec<String>,
    /// Whether it fills a global store (it runs once per instance, reading every partition
    /// of its topic, and makes no tasks).
    pub global: bool,
    /// The topics its sinks write, where a sink names one (internal ones without the
    /// application id).
    pub sink_topics: Vec<String>,
}

/// A graph of sources, processors and sinks with its stores: what an application runs.
#[derive(Clone, Default)]
pub struct Topology {
    pub(crate) nodes: Vec<NodeDef>,
    pub(crate) stores: Vec<StoreBuilder>,
    pub(crate) internal_topics: Vec<InternalTopic>,
    pub(crate) global_topics: Vec<String>,
    /// Nodes whose inputs must be co-partitioned (the two sides of each join).
    pub(crate) copartitioned: Vec<Vec<usize>>,
    by_name: HashMap<String, usize>,
}

impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe().to_string())
    }
}

impl Topology {
    /// An empty topology.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a source called `name` reading `topics` with these serdes (Kafka's
    /// `Topology.addSource`).
    pub fn add_source<K: Data, V: Data>(
        &mut self,
        name: &str,
        topics: &[&str],
        keys: impl Serde<Value = K>,
        values: impl Serde<Value = V>,
    ) -> Result<&mut Self, TopologyError> {
        self.add_source_node(
            name,
            topics.iter().map(|t| t.to_string()).collect(),
            None,
            Arc::new(keys),
            Arc::new(values),
        )?;
        Ok(self)
    }

    /// Adds a processor called `name`, built for each task by `supplier`, taking the records
    /// of `parents` (Kafka's `Topology.addProcessor`).
    pub fn add_processor<P, KIn, VIn, KOut, VOut>(
        &mut self,
        name: &str,
        supplier: impl Fn() -> P + Send + Sync + 'static,
        parents: &[&str],
    ) -> Result<&mut Self, TopologyError>
    where
        P: Processor<KIn, VIn, KOut, VOut>,
        KIn: 'static,
        VIn: 'static,
        KOut: 'static,
        VOut: 'static,
    {
        let parents = self.parents_of(name, parents)?;
        self.add_processor_node(name, parents, supplier)?;
        Ok(self)
    }

    /// Adds a sink called `name` writing the records of `parents` to `topic` with these
    /// serdes (Kafka's `Topology.addSink`).
    pub fn add_sink<K: Data, V: Data>(
        &mut self,
        name: &str,
        topic: &str,
        keys: impl Serde<Value = K>,
        values: impl Serde<Value = V>,
        parents: &[&str],
    ) -> Result<&mut Self, TopologyError> {
        let parents = self.parents_of(name, parents)?;
        self.add_sink_node(
            name,
            parents,
            SinkSpec {
                topic: SinkTarget::Fixed(topic.to_string()),
                keys: Arc::new(keys),
                values: Arc::new(values),
                partitioner: None,
            },
        )?;
        Ok(self)
    }

    /// Adds a store and connects it to `processors` (Kafka's `Topology.addStateStore`).
    pub fn add_state_store(
        &mut self,
        store: StoreBuilder,
        processors: &[&str],
    ) -> Result<&mut Self, TopologyError> {
        if self.stores.iter().any(|s| s.name() == store.name()) {
            return Err(TopologyError::Duplicate {
                what: "store",
                name: store.name().to_string(),
            });
        }
        let name = store.name().to_string();
        self.stores.push(store);
        if store_logged(self.stores.last()) {
            self.internal_topics.push(InternalTopic {
                name: format!("{name}-changelog"),
                kind: InternalTopicKind::Changelog,
            });
        }
        for p in processors {
            self.connect_store(p, &name)?;
        }
        Ok(self)
    }

    /// Connects stores already added to a processor (Kafka's
    /// `Topology.connectProcessorAndStateStores`).
    pub fn connect_processor_and_state_stores(
        &mut self,
        processor: &str,
        stores: &[&str],
    ) -> Result<&mut Self, TopologyError> {
        for s in stores {
            self.connect_store(processor, s)?;
        }
        Ok(self)
    }

    /// The topology as Kafka Streams' `Topology.describe()` prints it.
    pub fn describe(&self) -> TopologyDescription {
        describe::describe(self)
    }

    /// The sub-topologies, numbered as `describe()` numbers them.
    pub fn subtopologies(&self) -> Vec<Subtopology> {
        self.groups()
            .into_iter()
            .enumerate()
            .map(|(id, members)| self.subtopology(id as u32, &members))
            .collect()
    }

    /// The topics the topology creates (repartition topics and store changelogs).
    pub fn internal_topics(&self) -> &[InternalTopic] {
        &self.internal_topics
    }

    /// The stores, in the order they were added.
    pub fn stores(&self) -> &[StoreBuilder] {
        &self.stores
    }

    /// The groups of source topics that must have as many partitions as each other (the
    /// topics upstream of the two sides of each join, internal ones without the
    /// application id), each sorted, groups that share a topic merged.
    pub fn copartition_groups(&self) -> Vec<Vec<String>> {
        let mut groups: Vec<Vec<String>> = Vec::new();
        for nodes in &self.copartitioned {
            let mut group: Vec<String> = nodes
                .iter()
                .flat_map(|&n| self.source_topics_upstream(n))
                .collect();
            // Merge the groups this one meets.
            let mut i = 0;
            while i < groups.len() {
                if groups[i].iter().any(|t| group.contains(t)) {
                    group.extend(groups.swap_remove(i));
                } else {
                    i += 1;
                }
            }
            group.sort();
            group.dedup();
            groups.push(group);
        }
        groups.sort();
        groups
    }

    /// Notes that the inputs of `nodes` must be co-partitioned: what a join calls with its
    /// two sides.
    pub(crate) fn copartition(&mut self, nodes: &[&str]) {
        let nodes: Vec<usize> = nodes.iter().filter_map(|n| self.index_of(n)).collect();
        self.copartitioned.push(nodes);
    }

    /// The topics of the sources upstream of `node`, global ones excluded.
    fn source_topics_upstream(&self, node: usize) -> Vec<String> {
        let mut topics = Vec::new();
        let mut seen = vec![false; self.nodes.len()];
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            if std::mem::replace(&mut seen[n], true) {
                continue;
            }
            if let NodeKind::Source { topics: t, .. } = &self.nodes[n].kind {
                topics.extend(
                    t.iter()
                        .filter(|t| !self.global_topics.contains(t))
                        .cloned(),
                );
            }
            stack.extend(&self.nodes[n].parents);
        }
        topics
    }

    /// The full name of `topic` for `application_id`: `<app>-<topic>` for internal topics.
    pub fn full_topic_name(&self, application_id: &str, topic: &str) -> String {
        if self.internal_topics.iter().any(|t| t.name == topic) {
            format!("{application_id}-{topic}")
        } else {
            topic.to_string()
        }
    }

    // ----- building blocks, shared with the DSL -----

    pub(crate) fn index_of(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    fn parents_of(&self, node: &str, parents: &[&str]) -> Result<Vec<usize>, TopologyError> {
        if parents.is_empty() {
            return Err(bad(node, "must have at least one parent"));
        }
        parents
            .iter()
            .map(|p| {
                let i = self
                    .index_of(p)
                    .ok_or_else(|| bad(node, &format!("parent {p} is not added yet")))?;
                if matches!(self.nodes[i].kind, NodeKind::Sink { .. }) {
                    return Err(bad(node, &format!("sink {p} cannot be a parent")));
                }
                Ok(i)
            })
            .collect()
    }

    pub(crate) fn add_node(&mut self, node: NodeDef) -> Result<usize, TopologyError> {
        if self.by_name.contains_key(&node.name) {
            return Err(TopologyError::Duplicate {
                what: "processor",
                name: node.name,
            });
        }
        for &p in &node.parents {
            let parent = &self.nodes[p];
            if let (Some(out), Some(input)) = (parent.output, node.input) {
                if out != input {
                    return Err(TopologyError::TypeMismatch {
                        parent: parent.name.clone(),
                        child: node.name.clone(),
                        forwards: out.name,
                        takes: input.name,
                    });
                }
            }
        }
        let i = self.nodes.len();
        self.by_name.insert(node.name.clone(), i);
        self.nodes.push(node);
        Ok(i)
    }

    pub(crate) fn add_source_node<K: Data, V: Data>(
        &mut self,
        name: &str,
        topics: Vec<String>,
        extractor: Option<Arc<dyn TimestampExtractor>>,
        keys: Arc<dyn Serde<Value = K>>,
        values: Arc<dyn Serde<Value = V>>,
    ) -> Result<usize, TopologyError> {
        if topics.is_empty() {
            return Err(bad(name, "a source must read at least one topic"));
        }
        for t in &topics {
            if self.source_topics().any(|s| s == t) {
                return Err(TopologyError::Duplicate {
                    what: "topic",
                    name: t.clone(),
                });
            }
        }
        self.add_node(NodeDef {
            name: name.to_string(),
            kind: NodeKind::Source { topics, extractor },
            parents: Vec::new(),
            stores: Vec::new(),
            factory: Arc::new(move |_| {
                Box::new(SourceNode {
                    keys: keys.clone(),
                    values: values.clone(),
                })
            }),
            input: Some(Payload::of::<crate::log::Record>()),
            output: Some(Payload::record::<K, V>()),
        })
    }

    pub(crate) fn add_processor_node<P, KIn, VIn, KOut, VOut>(
        &mut self,
        name: &str,
        parents: Vec<usize>,
        supplier: impl Fn() -> P + Send + Sync + 'static,
    ) -> Result<usize, TopologyError>
    where
        P: Processor<KIn, VIn, KOut, VOut>,
        KIn: 'static,
        VIn: 'static,
        KOut: 'static,
        VOut: 'static,
    {
        self.add_node(NodeDef {
            name: name.to_string(),
            kind: NodeKind::Processor,
            parents,
            stores: Vec::new(),
            factory: Arc::new(move |_| {
                Box::new(ProcessorNode::<P, KIn, VIn, KOut, VOut>::new(supplier()))
            }),
            input: Some(Payload::record::<KIn, VIn>()),
            output: Some(Payload::record::<KOut, VOut>()),
        })
    }

    pub(crate) fn add_sink_node<K: Data, V: Data>(
        &mut self,
        name: &str,
        parents: Vec<usize>,
        spec: SinkSpec<K, V>,
    ) -> Result<usize, TopologyError> {
        let SinkSpec {
            topic,
            keys,
            values,
            partitioner,
        } = spec;
        let described = match &topic {
            SinkTarget::Fixed(t) => Some(t.clone()),
            SinkTarget::Chosen(_) => None,
        };
        self.add_node(NodeDef {
            name: name.to_string(),
            kind: NodeKind::Sink { topic: described },
            parents,
            stores: Vec::new(),
            factory: Arc::new(move |ctx| {
                let topic = match &topic {
                    SinkTarget::Fixed(t) => SinkTopic::Fixed(ctx.topic(t)),
                    SinkTarget::Chosen(f) => SinkTopic::Chosen(f.clone()),
                };
                Box::new(SinkNode {
                    topic,
                    keys: keys.clone(),
                    values: values.clone(),
                    partitioner: partitioner.clone(),
                    partitions: ctx.partitions.clone(),
                    topic_index: None,
                })
            }),
            input: Some(Payload::record::<K, V>()),
            output: None,
        })
    }

    pub(crate) fn add_internal_topic(&mut self, name: &str, kind: InternalTopicKind) {
        if !self.internal_topics.iter().any(|t| t.name == name) {
            self.internal_topics.push(InternalTopic {
                name: name.to_string(),
                kind,
            });
        }
    }

    pub(crate) fn connect_store(
        &mut self,
        processor: &str,
        store: &str,
    ) -> Result<(), TopologyError> {
        let Some(i) = self.index_of(processor) else {
            return Err(bad(processor, "is not added yet"));
        };
        if !matches!(self.nodes[i].kind, NodeKind::Processor) {
            return Err(bad(processor, "only processors use stores"));
        }
        if !self.stores.iter().any(|s| s.name() == store) {
            return Err(bad(processor, &format!("store {store} is not added yet")));
        }
        if !self.nodes[i].stores.iter().any(|s| s == store) {
            self.nodes[i].stores.push(store.to_string());
        }
        Ok(())
    }

    fn source_topics(&self) -> impl Iterator<Item = &String> {
        self.nodes.iter().flat_map(|n| match &n.kind {
            NodeKind::Source { topics, .. } => topics.as_slice(),
            _ => &[],
        })
    }

    /// The connected groups of nodes, numbered in the order their first node was added
    /// (Kafka's `makeNodeGroups`); each lists its nodes in the order they were added.
    pub(crate) fn groups(&self) -> Vec<Vec<usize>> {
        let mut roots: Vec<usize> = (0..self.nodes.len()).collect();
        fn find(roots: &mut [usize], mut i: usize) -> usize {
            while roots[i] != i {
                roots[i] = roots[roots[i]];
                i = roots[i];
            }
            i
        }
        let unite = |roots: &mut Vec<usize>, a: usize, b: usize| {
            let (ra, rb) = (find(roots, a), find(roots, b));
            if ra != rb {
                roots[rb] = ra;
            }
        };
        for (i, node) in self.nodes.iter().enumerate() {
            for &p in &node.parents {
                unite(&mut roots, p, i);
            }
        }
        for store in &self.stores {
            let users: Vec<usize> = (0..self.nodes.len())
                .filter(|&i| self.nodes[i].stores.iter().any(|s| s == store.name()))
                .collect();
            for pair in users.windows(2) {
                unite(&mut roots, pair[0], pair[1]);
            }
        }
        let mut group_of_root: HashMap<usize, usize> = HashMap::new();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for i in 0..self.nodes.len() {
            let root = find(&mut roots, i);
            let g = *group_of_root.entry(root).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[g].push(i);
        }
        groups
    }

    fn subtopology(&self, id: u32, members: &[usize]) -> Subtopology {
        let mut source_topics = Vec::new();
        let mut sink_topics = Vec::new();
        let mut stores: Vec<String> = Vec::new();
        for &i in members {
            match &self.nodes[i].kind {
                NodeKind::Source { topics, .. } => source_topics.extend(topics.iter().cloned()),
                NodeKind::Sink { topic: Some(topic) } if !sink_topics.contains(topic) => {
                    sink_topics.push(topic.clone());
                }
                _ => {}
            }
            for s in &self.nodes[i].stores {
                if !stores.contains(s) {
                    stores.push(s.clone());
                }
            }
        }
        Subtopology {
            id,
            global: self.is_global_group(members),
            source_topics,
            sink_topics,
            nodes: members
                .iter()
                .map(|&i| self.nodes[i].name.clone())
                .collect(),
            stores,
        }
    }

    /// Whether a group of nodes fills a global store: it reads a global topic.
    pub(crate) fn is_global_group(&self, members: &[usize]) -> bool {
        members.iter().any(|&i| match &self.nodes[i].kind {
            NodeKind::Source { topics, .. } => {
                topics.iter().any(|t| self.global_topics.contains(t))
            }
            _ => false,
        })
    }
}

fn store_logged(store: Option<&StoreBuilder>) -> bool {
    store.is_some_and(StoreBuilder::logging)
}

fn bad(node: &str, reason: &str) -> TopologyError {
    TopologyError::BadConnection {
        node: node.to_string(),
        reason: reason.to_string(),
    }
}

/// Where a sink writes, as declared.
pub(crate) enum SinkTarget<K, V> {
    Fixed(String),
    Chosen(crate::streams::TopicNameExtractor<K, V>),
}

/// A sink's declaration.
pub(crate) struct SinkSpec<K, V> {
    pub(crate) topic: SinkTarget<K, V>,
    pub(crate) keys: Arc<dyn Serde<Value = K>>,
    pub(crate) values: Arc<dyn Serde<Value = V>>,
    pub(crate) partitioner: Option<crate::streams::StreamPartitioner<K, V>>,
}

#[cfg(test)]
mod tests;
