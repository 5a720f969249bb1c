//! [`StreamsBuilder`]: where a DSL topology starts, and the naming of its nodes, stores and
//! internal topics exactly as Kafka Streams generates them (one counter for all:
//! `KSTREAM-SOURCE-0000000000`, `KSTREAM-AGGREGATE-STATE-STORE-0000000001`, …), so that
//! `describe()` matches Kafka's.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use super::getter::ValueGetter;
use super::kstream::KStream;
use super::ktable::{table_store, KTable, TableSource};
use super::options::{Consumed, Materialized, SerdeOf};
use crate::serde::Nullable;
use crate::streams::processor::Data;
use crate::streams::store::StoreBuilder;
use crate::streams::{Topology, TopologyError};

pub(crate) struct BuilderState {
    pub(crate) topology: Topology,
    index: u32,
    error: Option<TopologyError>,
}

/// Declares a topology with the DSL, then [`StreamsBuilder::build`]s it.
///
/// ```
/// use eddy_core::serde::{I64Serde, Nullable, StringSerde};
/// use eddy_core::streams::{Consumed, Grouped, Materialized, Produced, StreamsBuilder};
///
/// let builder = StreamsBuilder::new();
/// builder
///     .stream("text-lines", Consumed::with(Nullable(StringSerde), StringSerde))
///     .flat_map_values(|line: String| {
///         line.to_lowercase().split(' ').map(str::to_string).collect::<Vec<_>>()
///     })
///     .group_by(|_, word| word.clone(), Grouped::with(StringSerde, StringSerde))
///     .count(Materialized::named("counts"))
///     .to_stream()
///     .to("word-counts", Produced::with(StringSerde, Nullable(I64Serde)));
/// let topology = builder.build().unwrap();
/// assert!(topology.describe().to_string().contains("counts-repartition"));
/// ```
#[derive(Clone)]
pub struct StreamsBuilder {
    pub(crate) state: Rc<RefCell<BuilderState>>,
}

impl Default for StreamsBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for StreamsBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamsBuilder").finish_non_exhaustive()
    }
}

impl StreamsBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            state: Rc::new(RefCell::new(BuilderState {
                topology: Topology::new(),
                index: 0,
                error: None,
            })),
        }
    }

    /// A stream of the records of `topic`.
    pub fn stream<K: Data, V: Data>(&self, topic: &str, consumed: Consumed<K, V>) -> KStream<K, V> {
        self.stream_of(&[topic], consumed)
    }

    /// A stream of the records of several topics, read by one source.
    pub fn stream_of<K: Data, V: Data>(
        &self,
        topics: &[&str],
        consumed: Consumed<K, V>,
    ) -> KStream<K, V> {
        let name = self.name(consumed.name.clone(), "KSTREAM-SOURCE-");
        let (Some(keys), Some(values)) = (consumed.keys.clone(), consumed.values.clone()) else {
            self.fail(TopologyError::MissingSerde {
                node: name.clone(),
                which: if consumed.keys.is_none() {
                    "key"
                } else {
                    "value"
                },
            });
            return KStream::new(self.clone(), name, consumed.keys, consumed.values);
        };
        let topics = topics.iter().map(|t| t.to_string()).collect();
        self.with_topology(|t| {
            t.add_source_node(
                &name,
                topics,
                consumed.extractor.clone(),
                keys.clone(),
                values.clone(),
            )
        });
        KStream::new(self.clone(), name, Some(keys), Some(values))
    }

    /// A table of the latest value of each key of `topic` (a null value deletes the key).
    /// Named by `materialized`, the table keeps a store that can be queried and joined.
    pub fn table<K: Data, V: Data>(
        &self,
        topic: &str,
        consumed: Consumed<K, V>,
        materialized: Materialized<K, V>,
    ) -> KTable<K, V> {
        let store = materialized
            .name
            .clone()
            .unwrap_or_else(|| self.new_store_name(&format!("{topic}-")));
        let source = self.name_with_suffix(consumed.name.as_deref(), "-source", "KSTREAM-SOURCE-");
        let table_source = self.name(consumed.name.clone(), "KTABLE-SOURCE-");
        let keys = materialized.keys.clone().or(consumed.keys.clone());
        let values = materialized.values.clone().or(consumed.values.clone());
        let (Some(keys), Some(values)) = (keys, values) else {
            self.fail(TopologyError::MissingSerde {
                node: source.clone(),
                which: "key or value",
            });
            return KTable::new(self.clone(), table_source, None, None, None);
        };
        let nullable: SerdeOf<Option<V>> = Arc::new(Nullable(values.clone()));
        self.with_topology(|t| {
            t.add_source_node(
                &source,
                vec![topic.to_string()],
                consumed.extractor.clone(),
                keys.clone(),
                nullable,
            )
        });
        let materialize = materialized.name.is_some();
        let store_name = materialize.then(|| store.clone());
        let slot = Arc::new(Mutex::new(store_name.clone()));
        let flag = TableSource::add(
            self,
            &table_source,
            &source,
            slot.clone(),
            keys.clone(),
            values.clone(),
            materialized.logging,
        );
        let mut table = KTable::new(
            self.clone(),
            table_source.clone(),
            Some(keys.clone()),
            Some(values.clone()),
            store_name,
        );
        table.send_old_values = vec![flag];
        if !materialize {
            // Materialized on first use by a join, under the name generated above (Kafka's
            // `KTableSource.materialize()`).
            let builder = self.clone();
            let logging = materialized.logging;
            table.getter = Some(Rc::new(move || {
                let mut current = slot.lock().unwrap_or_else(|e| e.into_inner());
                if current.is_none() {
                    let definition = table_store(&store, keys.clone(), values.clone(), logging);
                    builder.with_topology(|t| {
                        t.add_state_store(definition, &[&table_source]).map(|_| ())
                    })?;
                    *current = Some(store.clone());
                }
                Some(ValueGetter::of_store(&store))
            }));
        }
        table
    }

    /// Adds a store for processors of [`KStream::process`] to use by name.
    pub fn add_state_store(&self, store: StoreBuilder) {
        self.with_topology(|t| t.add_state_store(store, &[]).map(|_| ()));
    }

    /// The topology declared so far, or the first error made while declaring it.
    pub fn build(&self) -> Result<Topology, TopologyError> {
        let state = self.state.borrow();
        match &state.error {
            Some(e) => Err(e.clone()),
            None => Ok(state.topology.clone()),
        }
    }

    // ----- shared by the DSL -----

    /// A processor's name: `given`, or one generated from `prefix`. Either way it takes the
    /// next index, as Kafka Streams 4 does, so naming one node does not rename the others.
    pub(crate) fn name(&self, given: Option<String>, prefix: &str) -> String {
        let generated = self.new_name(prefix);
        given.unwrap_or(generated)
    }

    /// [`StreamsBuilder::name`] for a name derived from a given one (`<given><suffix>`).
    pub(crate) fn name_with_suffix(
        &self,
        given: Option<&str>,
        suffix: &str,
        prefix: &str,
    ) -> String {
        self.name(given.map(|g| format!("{g}{suffix}")), prefix)
    }

    /// A generated processor name: `prefix` and the next index on ten digits.
    pub(crate) fn new_name(&self, prefix: &str) -> String {
        let mut state = self.state.borrow_mut();
        let name = format!("{prefix}{:010}", state.index);
        state.index += 1;
        name
    }

    /// A generated store name: `prefix`, `STATE-STORE-` and the next index.
    pub(crate) fn new_store_name(&self, prefix: &str) -> String {
        self.new_name(&format!("{prefix}STATE-STORE-"))
    }

    /// Records the first error, which `build` returns.
    pub(crate) fn fail(&self, error: TopologyError) {
        let mut state = self.state.borrow_mut();
        if state.error.is_none() {
            state.error = Some(error);
        }
    }

    /// Runs `f` on the topology, keeping its error.
    pub(crate) fn with_topology<T>(
        &self,
        f: impl FnOnce(&mut Topology) -> Result<T, TopologyError>,
    ) -> Option<T> {
        let result = f(&mut self.state.borrow_mut().topology);
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }
}
