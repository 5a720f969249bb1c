//! [`KStream`]: a stream of records, each an independent event, and its operations, named
//! as in Kafka Streams (`filter`, `map_values`, `group_by`, …) and producing the same nodes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::builder::StreamsBuilder;
use super::grouped::KGroupedStream;
use super::ktable::KTable;
use super::ops::{
    Branch, BranchPredicate, Filter, FlatMap, FlatMapValues, Map, MapValues, PassThrough, Peek,
    SelectKey,
};
use super::options::{Grouped, Materialized, Named, Produced, SerdeOf};
use crate::log::Timestamp;
use crate::streams::processor::{Data, Processor};
use crate::streams::topology::{InternalTopicKind, SinkSpec, SinkTarget};
use crate::streams::TopologyError;

/// A stream of records with keys `K` and values `V`.
pub struct KStream<K, V> {
    pub(crate) builder: StreamsBuilder,
    pub(crate) node: String,
    pub(crate) keys: Option<SerdeOf<K>>,
    pub(crate) values: Option<SerdeOf<V>>,
    /// Whether the key changed since the last repartition, so that a stateful operation must
    /// repartition first.
    pub(crate) repartition_required: bool,
    pub(crate) next_name: Option<String>,
}

impl<K, V> Clone for KStream<K, V> {
    fn clone(&self) -> Self {
        Self {
            builder: self.builder.clone(),
            node: self.node.clone(),
            keys: self.keys.clone(),
            values: self.values.clone(),
            repartition_required: self.repartition_required,
            next_name: self.next_name.clone(),
        }
    }
}

impl<K: Data, V: Data> KStream<K, V> {
    pub(crate) fn new(
        builder: StreamsBuilder,
        node: String,
        keys: Option<SerdeOf<K>>,
        values: Option<SerdeOf<V>>,
    ) -> Self {
        Self {
            builder,
            node,
            keys,
            values,
            repartition_required: false,
            next_name: None,
        }
    }

    /// The name of the node this stream comes out of.
    pub fn node_name(&self) -> &str {
        &self.node
    }

    /// Names the node of the next operation on the returned stream (Kafka's `Named`
    /// argument): `stream.named(Named::new("drop-bots")).filter(…)`.
    pub fn named(mut self, name: Named) -> Self {
        self.next_name = Some(name.0);
        self
    }

    fn name_or(&mut self, prefix: &str) -> String {
        self.builder.name(self.next_name.take(), prefix)
    }

    /// Adds a processor after this stream and returns the stream it forwards.
    fn then<K2: Data, V2: Data, P: Processor<K, V, K2, V2>>(
        &mut self,
        prefix: &str,
        supplier: impl Fn() -> P + Send + Sync + 'static,
        keys: Option<SerdeOf<K2>>,
        values: Option<SerdeOf<V2>>,
        rekeyed: bool,
    ) -> KStream<K2, V2> {
        let name = self.name_or(prefix);
        let parent = self.node.clone();
        self.builder.with_topology(|t| {
            let p = t.index_of(&parent).into_iter().collect();
            t.add_processor_node(&name, p, supplier)
        });
        KStream {
            builder: self.builder.clone(),
            node: name,
            keys,
            values,
            repartition_required: self.repartition_required || rekeyed,
            next_name: None,
        }
    }

    /// The records for which `predicate` holds.
    pub fn filter(self, predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static) -> Self {
        self.filter_keeping(predicate, true)
    }

    /// The records for which `predicate` does not hold.
    pub fn filter_not(self, predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static) -> Self {
        self.filter_keeping(predicate, false)
    }

    fn filter_keeping(
        mut self,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
        keep: bool,
    ) -> Self {
        let predicate = Arc::new(predicate);
        let (k, v) = (self.keys.clone(), self.values.clone());
        self.then(
            "KSTREAM-FILTER-",
            move || Filter {
                predicate: predicate.clone(),
                keep,
            },
            k,
            v,
            false,
        )
    }

    /// Each record with a new key and value. The key changes, so a later stateful operation
    /// repartitions.
    pub fn map<K2: Data, V2: Data>(
        mut self,
        mapper: impl Fn(K, V) -> (K2, V2) + Send + Sync + 'static,
    ) -> KStream<K2, V2> {
        let mapper = Arc::new(mapper);
        self.then(
            "KSTREAM-MAP-",
            move || Map(mapper.clone()),
            None,
            None,
            true,
        )
    }

    /// Each record with a new value; the key stays.
    pub fn map_values<V2: Data>(
        self,
        mapper: impl Fn(V) -> V2 + Send + Sync + 'static,
    ) -> KStream<K, V2> {
        self.map_values_with_key(move |_, v| mapper(v))
    }

    /// Each record with a new value computed from key and value; the key stays.
    pub fn map_values_with_key<V2: Data>(
        mut self,
        mapper: impl Fn(&K, V) -> V2 + Send + Sync + 'static,
    ) -> KStream<K, V2> {
        let mapper = Arc::new(mapper);
        let k = self.keys.clone();
        self.then(
            "KSTREAM-MAPVALUES-",
            move || MapValues(mapper.clone()),
            k,
            None,
            false,
        )
    }

    /// Any number of records from each; keys may change.
    pub fn flat_map<K2: Data, V2: Data, I>(
        mut self,
        mapper: impl Fn(K, V) -> I + Send + Sync + 'static,
    ) -> KStream<K2, V2>
    where
        I: IntoIterator<Item = (K2, V2)> + 'static,
    {
        let mapper = Arc::new(mapper);
        self.then(
            "KSTREAM-FLATMAP-",
            move || FlatMap(mapper.clone()),
            None,
            None,
            true,
        )
    }

    /// Any number of values from each record, each with the record's key.
    pub fn flat_map_values<V2: Data, I>(
        self,
        mapper: impl Fn(V) -> I + Send + Sync + 'static,
    ) -> KStream<K, V2>
    where
        I: IntoIterator<Item = V2> + 'static,
    {
        self.flat_map_values_with_key(move |_, v| mapper(v))
    }

    /// Any number of values from each record's key and value, each with the record's key.
    pub fn flat_map_values_with_key<V2: Data, I>(
        mut self,
        mapper: impl Fn(&K, V) -> I + Send + Sync + 'static,
    ) -> KStream<K, V2>
    where
        I: IntoIterator<Item = V2> + 'static,
    {
        let mapper = Arc::new(mapper);
        let k = self.keys.clone();
        self.then(
            "KSTREAM-FLATMAPVALUES-",
            move || FlatMapValues(mapper.clone()),
            k,
            None,
            false,
        )
    }

    /// Each record with a new key computed from it; the value stays.
    pub fn select_key<K2: Data>(
        mut self,
        selector: impl Fn(&K, &V) -> K2 + Send + Sync + 'static,
    ) -> KStream<K2, V> {
        let selector = Arc::new(selector);
        let v = self.values.clone();
        self.then(
            "KSTREAM-KEY-SELECT-",
            move || SelectKey(selector.clone()),
            None,
            v,
            true,
        )
    }

    /// Calls `action` with each record and forwards it unchanged.
    pub fn peek(mut self, action: impl Fn(&K, &V) + Send + Sync + 'static) -> Self {
        let action = Arc::new(action);
        let (k, v) = (self.keys.clone(), self.values.clone());
        self.then(
            "KSTREAM-PEEK-",
            move || Peek {
                action: action.clone(),
                forward: true,
            },
            k,
            v,
            false,
        )
    }

    /// Calls `action` with each record; nothing comes after.
    pub fn foreach(mut self, action: impl Fn(&K, &V) + Send + Sync + 'static) {
        let action = Arc::new(action);
        self.then::<K, V, _>(
            "KSTREAM-FOREACH-",
            move || Peek {
                action: action.clone(),
                forward: false,
            },
            None,
            None,
            false,
        );
    }

    /// The records of both streams.
    pub fn merge(mut self, other: KStream<K, V>) -> Self {
        let name = self.name_or("KSTREAM-MERGE-");
        let parents = [self.node.clone(), other.node.clone()];
        self.builder.with_topology(|t| {
            let p = parents.iter().filter_map(|n| t.index_of(n)).collect();
            t.add_processor_node::<PassThrough, K, V, K, V>(&name, p, || PassThrough)
        });
        KStream {
            builder: self.builder.clone(),
            node: name,
            keys: self.keys.clone(),
            values: self.values.clone(),
            repartition_required: self.repartition_required || other.repartition_required,
            next_name: None,
        }
    }

    /// Runs a processor of one's own on each record (the Processor API). `stores` are the
    /// stores (added with [`StreamsBuilder::add_state_store`]) it may use.
    pub fn process<K2: Data, V2: Data, P: Processor<K, V, K2, V2>>(
        mut self,
        supplier: impl Fn() -> P + Send + Sync + 'static,
        stores: &[&str],
    ) -> KStream<K2, V2> {
        let out = self.then("KSTREAM-PROCESSOR-", supplier, None, None, true);
        let name = out.node.clone();
        for s in stores {
            self.builder.with_topology(|t| t.connect_store(&name, s));
        }
        out
    }

    /// Writes every record to `topic`.
    pub fn to(self, topic: &str, produced: Produced<K, V>) {
        self.sink(SinkTarget::Fixed(topic.to_string()), produced);
    }

    /// Writes each record to the topic `extractor` chooses for it.
    pub fn to_topic_chosen_by(
        self,
        extractor: impl Fn(&K, &V, Timestamp) -> String + Send + Sync + 'static,
        produced: Produced<K, V>,
    ) {
        self.sink(SinkTarget::Chosen(Arc::new(extractor)), produced);
    }

    fn sink(mut self, target: SinkTarget<K, V>, produced: Produced<K, V>) {
        let given = produced.name.clone().or(self.next_name.take());
        let name = self.builder.name(given, "KSTREAM-SINK-");
        let (Some(keys), Some(values)) = (
            produced.keys.clone().or(self.keys.clone()),
            produced.values.clone().or(self.values.clone()),
        ) else {
            self.builder.fail(TopologyError::MissingSerde {
                node: name,
                which: "key or value",
            });
            return;
        };
        let parent = self.node.clone();
        self.builder.with_topology(|t| {
            let p = t.index_of(&parent).into_iter().collect();
            t.add_sink_node(
                &name,
                p,
                SinkSpec {
                    topic: target,
                    keys,
                    values,
                    partitioner: produced.partitioner.clone(),
                },
            )
        });
    }

    /// Sends the stream through a repartition topic (`<name>-repartition`, or a generated
    /// name), so that records are spread by their current key.
    pub fn repartition(mut self, grouped: Grouped<K, V>) -> Self {
        let given = grouped.name.clone().or(self.next_name.take());
        let name = self.builder.name(given, "KSTREAM-REPARTITION-");
        let keys = grouped.keys.clone().or(self.keys.clone());
        let values = grouped.values.clone().or(self.values.clone());
        let source = self.repartition_through(&name, keys.clone(), values.clone());
        KStream {
            builder: self.builder.clone(),
            node: source,
            keys,
            values,
            repartition_required: false,
            next_name: None,
        }
    }

    /// Adds Kafka's three repartition nodes after this stream (a pass-through filter, a sink to
    /// `<prefix>-repartition` and a source reading it) and returns the source's name. Generated
    /// prefixes give generated node names; chosen ones give `<topic>-filter`, `-sink`, `-source`.
    pub(crate) fn repartition_through(
        &self,
        prefix: &str,
        keys: Option<SerdeOf<K>>,
        values: Option<SerdeOf<V>>,
    ) -> String {
        let topic = if prefix.ends_with("-repartition") {
            prefix.to_string()
        } else {
            format!("{prefix}-repartition")
        };
        let sink_generated = self.builder.new_name("KSTREAM-SINK-");
        let filter_generated = self.builder.new_name("KSTREAM-FILTER-");
        let source_generated = self.builder.new_name("KSTREAM-SOURCE-");
        let generated = is_generated(prefix);
        let (sink, filter, source) = if generated {
            (sink_generated, filter_generated, source_generated)
        } else {
            (
                format!("{topic}-sink"),
                format!("{topic}-filter"),
                format!("{topic}-source"),
            )
        };
        let (Some(keys), Some(values)) = (keys, values) else {
            self.builder.fail(TopologyError::MissingSerde {
                node: sink,
                which: "key or value (give them with Grouped)",
            });
            return source;
        };
        let parent = self.node.clone();
        self.builder.with_topology(|t| {
            t.add_internal_topic(&topic, InternalTopicKind::Repartition);
            let p = t.index_of(&parent).into_iter().collect();
            let f = t.add_processor_node::<PassThrough, K, V, K, V>(&filter, p, || PassThrough)?;
            t.add_sink_node(
                &sink,
                vec![f],
                SinkSpec {
                    topic: SinkTarget::Fixed(topic.clone()),
                    keys: keys.clone(),
                    values: values.clone(),
                    partitioner: None,
                },
            )?;
            t.add_source_node(&source, vec![topic.clone()], None, keys, values)
        });
        source
    }

    /// Groups by the current key, for an aggregation. If the key changed upstream, the
    /// aggregation repartitions first.
    pub fn group_by_key(self, grouped: Grouped<K, V>) -> KGroupedStream<K, V> {
        let keys = grouped.keys.clone().or(self.keys.clone());
        let values = grouped.values.clone().or(self.values.clone());
        let repartition = self.repartition_required;
        KGroupedStream::new(self, keys, values, grouped.name, repartition)
    }

    /// Groups by a new key computed from each record; the aggregation repartitions first.
    pub fn group_by<K2: Data>(
        mut self,
        selector: impl Fn(&K, &V) -> K2 + Send + Sync + 'static,
        grouped: Grouped<K2, V>,
    ) -> KGroupedStream<K2, V> {
        let selector = Arc::new(selector);
        let v = self.values.clone();
        if let Some(name) = &grouped.name {
            // Kafka names the key selector after the grouping.
            self.next_name = Some(name.clone());
        }
        let keyed = self.then(
            "KSTREAM-KEY-SELECT-",
            move || SelectKey(selector.clone()),
            None,
            v,
            true,
        );
        let keys = grouped.keys.clone();
        let values = grouped.values.clone().or(keyed.values.clone());
        KGroupedStream::new(keyed, keys, values, grouped.name, true)
    }

    /// The stream read as a table: each record the latest value of its key.
    pub fn to_table(self, materialized: Materialized<K, V>) -> KTable<K, V> {
        KTable::from_stream(self, materialized)
    }

    /// Splits the stream into branches by predicates (Kafka's `split`).
    pub fn split(mut self) -> BranchedKStream<K, V> {
        let name = self.name_or("KSTREAM-BRANCH-");
        let shared: Arc<Mutex<SplitState<K, V>>> = Arc::new(Mutex::new(SplitState {
            predicates: Vec::new(),
            children: Vec::new(),
            default: false,
        }));
        let factory_state = shared.clone();
        let parent = self.node.clone();
        self.builder.with_topology(|t| {
            let p = t.index_of(&parent).into_iter().collect();
            t.add_processor_node(&name, p, move || {
                let s = factory_state.lock().unwrap_or_else(|e| e.into_inner());
                Branch {
                    predicates: Arc::new(s.predicates.clone()),
                    children: Arc::new(s.children.clone()),
                    default: s.default,
                }
            })
        });
        BranchedKStream {
            source: self,
            splitter: name,
            state: shared,
            branches: HashMap::new(),
        }
    }
}

struct SplitState<K, V> {
    predicates: Vec<BranchPredicate<K, V>>,
    children: Vec<String>,
    default: bool,
}

/// A stream being split into branches: each record goes to the first branch whose predicate
/// holds.
pub struct BranchedKStream<K, V> {
    source: KStream<K, V>,
    splitter: String,
    state: Arc<Mutex<SplitState<K, V>>>,
    branches: HashMap<String, KStream<K, V>>,
}

impl<K: Data, V: Data> BranchedKStream<K, V> {
    /// A branch for the records `predicate` accepts, called `<split name><number>` or, with a
    /// name, `<split name><name>`.
    pub fn branch(
        self,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
        name: Option<&str>,
    ) -> Self {
        let index = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.predicates.push(Arc::new(predicate));
            s.predicates.len()
        };
        self.add_branch(index, name)
    }

    /// The branch for every record no predicate accepted, and all the branches by name.
    pub fn default_branch(self, name: Option<&str>) -> HashMap<String, KStream<K, V>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).default = true;
        self.add_branch(0, name).branches
    }

    /// All the branches by name; records no predicate accepted are dropped.
    pub fn no_default_branch(self) -> HashMap<String, KStream<K, V>> {
        self.branches
    }

    fn add_branch(mut self, index: usize, name: Option<&str>) -> Self {
        let child = match name {
            Some(n) => format!("{}{n}", self.splitter),
            None => format!("{}{index}", self.splitter),
        };
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .children
            .push(child.clone());
        // Kafka burns an index for each branch.
        let _ = self.source.builder.new_name(&child);
        let splitter = self.splitter.clone();
        self.source.builder.with_topology(|t| {
            let p = t.index_of(&splitter).into_iter().collect();
            t.add_processor_node::<PassThrough, K, V, K, V>(&child, p, || PassThrough)
        });
        let branch = KStream {
            builder: self.source.builder.clone(),
            node: child.clone(),
            keys: self.source.keys.clone(),
            values: self.source.values.clone(),
            repartition_required: self.source.repartition_required,
            next_name: None,
        };
        self.branches.insert(child, branch);
        self
    }
}

/// Whether a repartition prefix was generated (Kafka: `KSTREAM.*-[0-9]{10}`).
pub(crate) fn is_generated(prefix: &str) -> bool {
    let Some(rest) = prefix.strip_prefix("KSTREAM") else {
        return false;
    };
    let bytes = rest.as_bytes();
    bytes.len() >= 11
        && bytes[bytes.len() - 11] == b'-'
        && bytes[bytes.len() - 10..].iter().all(u8::is_ascii_digit)
}
