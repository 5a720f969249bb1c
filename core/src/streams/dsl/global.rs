//! Global tables: a table every instance holds whole, filled from all partitions of its topic
//! ([`StreamsBuilder::global_table`]), and the joins of streams with it, which look up a key
//! the record chooses (no repartition, no co-partitioning).

use std::sync::{Arc, Mutex};

use super::builder::StreamsBuilder;
use super::getter::ValueGetter;
use super::kstream::KStream;
use super::ktable::{table_store, TableSource};
use super::nulls::Nulls;
use super::options::{Consumed, Materialized, SerdeOf};
use crate::serde::Nullable;
use crate::streams::processor::{Data, Processor, ProcessorContext};
use crate::streams::record::Record;
use crate::streams::{StreamsError, TopologyError};

/// A table held whole by every instance of the application.
pub struct GlobalKTable<K, V> {
    store: String,
    getter: ValueGetter<K, V>,
    null_keys: Nulls<K>,
}

impl<K, V> GlobalKTable<K, V> {
    /// The name of the store holding the table.
    pub fn store_name(&self) -> &str {
        &self.store
    }
}

impl StreamsBuilder {
    /// A global table of `topic`: every instance reads all its partitions into its own store
    /// (named by `materialized`, or generated). The topic is the store's changelog.
    pub fn global_table<K: Data, V: Data>(
        &self,
        topic: &str,
        consumed: Consumed<K, V>,
        materialized: Materialized<K, V>,
    ) -> GlobalKTable<K, V> {
        let store = materialized
            .name
            .clone()
            .unwrap_or_else(|| self.new_store_name(&format!("{topic}-")));
        let source = self.name_with_suffix(consumed.name.as_deref(), "-source", "KSTREAM-SOURCE-");
        let processor = self.name(consumed.name.clone(), "KTABLE-SOURCE-");
        let getter = ValueGetter::of_store(&store);
        let keys = materialized.keys.clone().or(consumed.keys.clone());
        let values = materialized.values.clone().or(consumed.values.clone());
        let (Some(keys), Some(values)) = (keys, values) else {
            self.fail(TopologyError::MissingSerde {
                node: source,
                which: "key or value",
            });
            return GlobalKTable {
                store,
                getter,
                null_keys: Nulls::of(None),
            };
        };
        let keys_of_table = keys.clone();
        let nullable: SerdeOf<Option<V>> = Arc::new(Nullable(values.clone()));
        self.with_topology(|t| {
            t.global_topics.push(topic.to_string());
            t.add_source_node(
                &source,
                vec![topic.to_string()],
                consumed.extractor.clone(),
                keys.clone(),
                nullable,
            )
            .map(|_| ())
        });
        let slot = Arc::new(Mutex::new(None));
        TableSource::add(
            self,
            &processor,
            &source,
            slot.clone(),
            keys.clone(),
            values.clone(),
            false,
        );
        let definition = table_store(&store, keys, values, false).global();
        self.with_topology(|t| t.add_state_store(definition, &[&processor]).map(|_| ()));
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(store.clone());
        GlobalKTable {
            store,
            getter,
            null_keys: Nulls::of(Some(keys_of_table)),
        }
    }
}

/// Chooses the global table's key for a stream record.
type KeyChooser<K, V, KG> = Arc<dyn Fn(&K, &V) -> KG + Send + Sync>;

/// A stream record's value with the global table's, `None` where the join gives nothing.
type GlobalJoiner<V, VG, R> = Arc<dyn Fn(&V, Option<&VG>) -> Option<R> + Send + Sync>;

/// Looks up the key each record chooses in a global table. A null key finds nothing: a left
/// join forwards the record without a value, an inner join drops it.
struct GlobalJoin<K, V, KG, VG, R> {
    key: KeyChooser<K, V, KG>,
    getter: ValueGetter<KG, VG>,
    null_keys: Nulls<KG>,
    joiner: GlobalJoiner<V, VG, R>,
}

impl<K: Data, V: Data, KG: Data, VG: Data, R: Data> Processor<K, V, K, R>
    for GlobalJoin<K, V, KG, VG, R>
{
    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K, R>,
    ) -> Result<(), StreamsError> {
        let key = (self.key)(&r.key, &r.value);
        let null_key = self.null_keys.is_null(&key);
        let found = if null_key {
            None
        } else {
            (self.getter.get)(&mut ctx.reader(), &key)?
        };
        match (self.joiner)(&r.value, found.as_ref().map(|v| &v.value)) {
            Some(out) => ctx.forward(r.with_value(out)),
            // Kafka counts a record dropped for its null key, not for finding no match.
            None if null_key => ctx.record_dropped(),
            None => {}
        }
        Ok(())
    }
}

impl<K: Data, V: Data> KStream<K, V> {
    /// Joins each record with the global table's value for the key `key(k, v)` chooses, when
    /// there is one.
    pub fn join_global<KG: Data, VG: Data, R: Data>(
        self,
        table: &GlobalKTable<KG, VG>,
        key: impl Fn(&K, &V) -> KG + Send + Sync + 'static,
        joiner: impl Fn(&V, &VG) -> R + Send + Sync + 'static,
    ) -> KStream<K, R> {
        let joiner: GlobalJoiner<V, VG, R> = Arc::new(move |v, g| Some(joiner(v, g?)));
        self.global_join(table, Arc::new(key), joiner)
    }

    /// Joins each record with the global table's value for the key `key(k, v)` chooses, or
    /// `None` when it has none.
    pub fn left_join_global<KG: Data, VG: Data, R: Data>(
        self,
        table: &GlobalKTable<KG, VG>,
        key: impl Fn(&K, &V) -> KG + Send + Sync + 'static,
        joiner: impl Fn(&V, Option<&VG>) -> R + Send + Sync + 'static,
    ) -> KStream<K, R> {
        let joiner: GlobalJoiner<V, VG, R> = Arc::new(move |v, g| Some(joiner(v, g)));
        self.global_join(table, Arc::new(key), joiner)
    }

    fn global_join<KG: Data, VG: Data, R: Data>(
        mut self,
        table: &GlobalKTable<KG, VG>,
        key: KeyChooser<K, V, KG>,
        joiner: GlobalJoiner<V, VG, R>,
    ) -> KStream<K, R> {
        // Kafka names both kinds of global join KSTREAM-LEFTJOIN-.
        let name = self
            .builder
            .name(self.next_name.take(), "KSTREAM-LEFTJOIN-");
        let getter = table.getter.clone();
        let null_keys = table.null_keys.clone();
        let parent = self.node.clone();
        self.builder.with_topology(|t| {
            let p = t.index_of(&parent).into_iter().collect();
            t.add_processor_node(&name, p, move || GlobalJoin {
                key: key.clone(),
                getter: getter.clone(),
                null_keys: null_keys.clone(),
                joiner: joiner.clone(),
            })
        });
        let keys = self.keys.clone();
        let mut out = KStream::new(self.builder.clone(), name, keys, None);
        out.repartition_required = self.repartition_required;
        out
    }
}
