//! [`KGroupedStream`]: a stream grouped by key, ready for `count`, `reduce` or `aggregate`.
//! An aggregation repartitions first when the key changed upstream, through
//! `<Grouped name or store name>-repartition`, as Kafka Streams does.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::aggregate::{Fold, StreamAggregate};
use super::kstream::KStream;
use super::ktable::KTable;
use super::nulls::Nulls;
use super::options::{Materialized, Named, SerdeOf};
use super::windowed::{SessionWindowedKStream, TimeWindowedKStream, WindowSpec};
use crate::serde::I64Serde;
use crate::streams::processor::Data;
use crate::streams::processor::Processor;
use crate::streams::record::Change;
use crate::streams::store::{StoreBuilder, StoreKind, TimestampedSerde};
use crate::streams::windows::{SessionWindows, SlidingWindows, TimeWindows};
use crate::streams::TopologyError;

/// A stream grouped by key.
pub struct KGroupedStream<K, V> {
    stream: KStream<K, V>,
    keys: Option<SerdeOf<K>>,
    values: Option<SerdeOf<V>>,
    name: Option<String>,
    repartition_required: bool,
}

impl<K: Data, V: Data> KGroupedStream<K, V> {
    pub(crate) fn new(
        stream: KStream<K, V>,
        keys: Option<SerdeOf<K>>,
        values: Option<SerdeOf<V>>,
        name: Option<String>,
        repartition_required: bool,
    ) -> Self {
        Self {
            stream,
            keys,
            values,
            name,
            repartition_required,
        }
    }

    pub(crate) fn builder(&self) -> super::builder::StreamsBuilder {
        self.stream.builder.clone()
    }

    pub(crate) fn value_serde(&self) -> Option<SerdeOf<V>> {
        self.values.clone()
    }

    pub(crate) fn key_serde(&self) -> Option<SerdeOf<K>> {
        self.keys.clone()
    }

    /// Names the node of the aggregation that follows.
    pub fn named(mut self, name: Named) -> Self {
        self.stream.next_name = Some(name.0);
        self
    }

    /// The number of records of each key.
    pub fn count(self, materialized: Materialized<K, i64>) -> KTable<K, i64> {
        let materialized = Materialized {
            values: materialized.values.or(Some(Arc::new(I64Serde))),
            ..materialized
        };
        self.fold(
            "KSTREAM-AGGREGATE-",
            Fold::Aggregate {
                init: Arc::new(|| 0),
                step: Arc::new(|_, _, n| n + 1),
            },
            materialized,
        )
    }

    /// Each key's values combined by `reducer(aggregate, value)`, starting from the first.
    pub fn reduce(
        self,
        reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
        materialized: Materialized<K, V>,
    ) -> KTable<K, V> {
        let materialized = Materialized {
            values: materialized.values.or(self.values.clone()),
            ..materialized
        };
        self.fold(
            "KSTREAM-REDUCE-",
            Fold::Reduce {
                first: Arc::new(|v| v),
                step: Arc::new(reducer),
            },
            materialized,
        )
    }

    /// Each key's values folded by `aggregator(key, value, aggregate)` from `initializer()`.
    pub fn aggregate<VA: Data>(
        self,
        initializer: impl Fn() -> VA + Send + Sync + 'static,
        aggregator: impl Fn(&K, V, VA) -> VA + Send + Sync + 'static,
        materialized: Materialized<K, VA>,
    ) -> KTable<K, VA> {
        self.fold(
            "KSTREAM-AGGREGATE-",
            Fold::Aggregate {
                init: Arc::new(initializer),
                step: Arc::new(aggregator),
            },
            materialized,
        )
    }

    fn fold<VA: Data>(
        mut self,
        prefix: &str,
        fold: Fold<K, V, VA>,
        materialized: Materialized<K, VA>,
    ) -> KTable<K, VA> {
        let builder = self.stream.builder.clone();
        let nulls = (
            Nulls::of(materialized.keys.clone().or(self.keys.clone())),
            Nulls::of(self.values.clone()),
        );
        let parts = self.aggregate_node(
            prefix,
            &materialized,
            StoreKind::KeyValue,
            true,
            move |store, flag| StreamAggregate {
                store,
                fold: fold.clone(),
                nulls: nulls.clone(),
                send_old_values: flag,
                handle: None,
                forwarded_at_flush: false,
            },
        );
        match parts {
            Some(p) => {
                let mut table =
                    KTable::new(builder, p.name, Some(p.keys), Some(p.values), Some(p.store));
                table.send_old_values = vec![p.send_old_values];
                table
            }
            None => KTable::new(builder, String::new(), None, None, None),
        }
    }

    /// Adds an aggregation's processor (after a repartition when the key changed upstream)
    /// and its store, named as Kafka names them: the store first, then the processor, then
    /// the repartition topic's nodes. `None` when a serde is missing (the builder keeps the
    /// error).
    pub(crate) fn aggregate_node<KOut: Data, VA: Data, P>(
        &mut self,
        prefix: &str,
        materialized: &Materialized<K, VA>,
        kind: StoreKind,
        timestamped: bool,
        processor: impl Fn(String, Arc<AtomicBool>) -> P + Send + Sync + 'static,
    ) -> Option<AggregateNode<K, VA>>
    where
        P: Processor<K, V, KOut, Change<VA>>,
    {
        let builder = self.stream.builder.clone();
        let store = match &materialized.name {
            Some(n) => n.clone(),
            None => builder.new_store_name(prefix),
        };
        let name = builder.name(self.stream.next_name.take(), prefix);
        let parent = if self.repartition_required {
            let prefix = self.name.clone().unwrap_or_else(|| store.clone());
            self.stream
                .repartition_through(&prefix, self.keys.clone(), self.values.clone())
        } else {
            self.stream.node.clone()
        };
        let keys = materialized.keys.clone().or(self.keys.clone());
        let (Some(keys), Some(values)) = (keys, materialized.values.clone()) else {
            builder.fail(TopologyError::MissingSerde {
                node: name,
                which: "key or value (give them with Materialized)",
            });
            return None;
        };
        let mut definition = if timestamped {
            StoreBuilder::key_value_with(
                &store,
                keys.clone(),
                Arc::new(TimestampedSerde(values.clone())),
            )
            .timestamped()
        } else {
            StoreBuilder::key_value_with(&store, keys.clone(), values.clone())
        }
        .with_kind(kind);
        if !materialized.logging {
            definition = definition.with_logging_disabled();
        }
        let send_old_values = Arc::new(AtomicBool::new(false));
        let flag = send_old_values.clone();
        let store_name = store.clone();
        builder.with_topology(|t| {
            let p = t.index_of(&parent).into_iter().collect();
            t.add_processor_node(&name, p, move || {
                processor(store_name.clone(), flag.clone())
            })?;
            t.add_state_store(definition, &[&name])?;
            Ok(())
        })?;
        Some(AggregateNode {
            name,
            keys,
            values,
            store,
            send_old_values,
        })
    }

    /// The same grouped stream in time windows (tumbling or hopping).
    pub fn windowed_by(self, windows: TimeWindows) -> TimeWindowedKStream<K, V> {
        TimeWindowedKStream::new(self, WindowSpec::Time(windows))
    }

    /// The same grouped stream in sliding windows.
    pub fn windowed_by_sliding(self, windows: SlidingWindows) -> TimeWindowedKStream<K, V> {
        TimeWindowedKStream::new(self, WindowSpec::Sliding(windows))
    }

    /// The same grouped stream in session windows.
    pub fn windowed_by_session(self, windows: SessionWindows) -> SessionWindowedKStream<K, V> {
        SessionWindowedKStream::new(self, windows)
    }
}

/// What [`KGroupedStream::aggregate_node`] added.
pub(crate) struct AggregateNode<K, VA> {
    pub(crate) name: String,
    pub(crate) keys: SerdeOf<K>,
    pub(crate) values: SerdeOf<VA>,
    pub(crate) store: String,
    pub(crate) send_old_values: Arc<AtomicBool>,
}
