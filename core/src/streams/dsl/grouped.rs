//! [`KGroupedStream`]: a stream grouped by key, ready for `count`, `reduce` or `aggregate`.
//! An aggregation repartitions first when the key changed upstream, through
//! `<Grouped name or store name>-repartition`, as Kafka Streams does.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::aggregate::{Fold, StreamAggregate};
use super::kstream::KStream;
use super::ktable::KTable;
use super::options::{Materialized, Named, SerdeOf};
use crate::serde::I64Serde;
use crate::streams::processor::Data;
use crate::streams::store::{StoreBuilder, TimestampedSerde};
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
        let store = match &materialized.name {
            Some(n) => n.clone(),
            None => builder.new_store_name(prefix),
        };
        let name = match self.stream.next_name.take() {
            Some(n) => n,
            None => builder.new_name(prefix),
        };
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
                node: name.clone(),
                which: "key or value (give them with Materialized)",
            });
            return KTable::new(builder, name, None, None, None);
        };
        let mut definition = StoreBuilder::key_value_with(
            &store,
            keys.clone(),
            Arc::new(TimestampedSerde(values.clone())),
        )
        .timestamped();
        if !materialized.logging {
            definition = definition.with_logging_disabled();
        }
        let send_old_values = Arc::new(AtomicBool::new(false));
        let flag = send_old_values.clone();
        let store_name = store.clone();
        builder.with_topology(|t| {
            let p = t.index_of(&parent).into_iter().collect();
            t.add_processor_node(&name, p, move || StreamAggregate {
                store: store_name.clone(),
                fold: fold.clone(),
                send_old_values: flag.clone(),
                handle: None,
            })?;
            t.add_state_store(definition, &[&name])?;
            Ok(())
        });
        let mut table = KTable::new(builder, name, Some(keys), Some(values), Some(store));
        table.send_old_values = vec![send_old_values];
        table
    }
}
