//! Tables re-grouped by a new key ([`KTable::group_by`]) and aggregated with an adder and a
//! subtractor ([`KGroupedTable`]): each update of a row removes its old value from the old
//! group's aggregate and adds its new value to the new group's, through a repartition topic
//! that carries both, as Kafka Streams does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::BufMut;

use super::ktable::{table_store, KTable};
use super::options::{Grouped, Materialized, SerdeOf};
use crate::serde::{I64Serde, Serde, SerdeError};
use crate::streams::processor::{Data, KeyValueStoreHandle, Processor, ProcessorContext};
use crate::streams::record::{Change, Record};
use crate::streams::store::ValueAndTimestamp;
use crate::streams::topology::{InternalTopicKind, SinkSpec, SinkTarget};
use crate::streams::{StreamsError, TopologyError};

/// The serde of a [`Change`] on a repartition topic: a byte of flags (1: new value present,
/// 2: old value present), the new value's length (4 bytes BE) and bytes, then the old value's.
pub(crate) struct ChangeSerde<V>(pub(crate) SerdeOf<V>);

impl<V: 'static> Serde for ChangeSerde<V> {
    type Value = Change<V>;

    fn name(&self) -> &'static str {
        "change"
    }

    fn serialize_into(
        &self,
        topic: &str,
        value: &Change<V>,
        out: &mut Vec<u8>,
    ) -> Result<(), SerdeError> {
        let flags = u8::from(value.new.is_some()) | (u8::from(value.old.is_some()) << 1);
        out.push(flags);
        if let Some(new) = &value.new {
            let mut bytes = Vec::new();
            self.0.serialize_into(topic, new, &mut bytes)?;
            let len = u32::try_from(bytes.len())
                .map_err(|_| SerdeError::new(self.name(), topic, "value too large"))?;
            out.put_u32(len);
            out.extend_from_slice(&bytes);
        }
        if let Some(old) = &value.old {
            self.0.serialize_into(topic, old, out)?;
        }
        Ok(())
    }

    fn deserialize(&self, topic: &str, bytes: &[u8]) -> Result<Change<V>, SerdeError> {
        let bad = || SerdeError::new("change", topic, "truncated change");
        let (&flags, mut rest) = bytes.split_first().ok_or_else(bad)?;
        let new = if flags & 1 != 0 {
            let (len, after) = rest.split_first_chunk::<4>().ok_or_else(bad)?;
            let len = u32::from_be_bytes(*len) as usize;
            if after.len() < len {
                return Err(bad());
            }
            let (value, after) = after.split_at(len);
            rest = after;
            Some(self.0.deserialize(topic, value)?)
        } else {
            None
        };
        let old = if flags & 2 != 0 {
            Some(self.0.deserialize(topic, rest)?)
        } else {
            None
        };
        Ok(Change { new, old })
    }
}

/// `KTable::group_by`: each update becomes a removal from the old group and an addition to
/// the new one (one record when the group stays the same).
struct TableRepartitionMap<F> {
    selector: Arc<F>,
}

impl<K: Data, V: Data, K1: Data + PartialEq, V1: Data, F> Processor<K, Change<V>, K1, Change<V1>>
    for TableRepartitionMap<F>
where
    F: Fn(&K, &V) -> (K1, V1) + Send + Sync + 'static,
{
    fn process(
        &mut self,
        r: Record<K, Change<V>>,
        ctx: &mut ProcessorContext<'_, K1, Change<V1>>,
    ) -> Result<(), StreamsError> {
        let new = r.value.new.as_ref().map(|v| (self.selector)(&r.key, v));
        let old = r.value.old.as_ref().map(|v| (self.selector)(&r.key, v));
        let out = |key: K1, change: Change<V1>| Record {
            key,
            value: change,
            timestamp: r.timestamp,
            headers: r.headers.clone(),
        };
        match (old, new) {
            (Some((ok, ov)), Some((nk, nv))) if ok == nk => {
                ctx.forward(out(nk, Change::new(Some(nv), Some(ov))));
            }
            (old, new) => {
                if let Some((k, v)) = old {
                    ctx.forward(out(k, Change::new(None, Some(v))));
                }
                if let Some((k, v)) = new {
                    ctx.forward(out(k, Change::new(Some(v), None)));
                }
            }
        }
        Ok(())
    }
}

impl<K: Data, V: Data> KTable<K, V> {
    /// Groups the rows by a new key (and value) computed from each, for an aggregation with
    /// an adder and a subtractor. Goes through a repartition topic.
    pub fn group_by<K1: Data + PartialEq, V1: Data>(
        mut self,
        selector: impl Fn(&K, &V) -> (K1, V1) + Send + Sync + 'static,
        grouped: Grouped<K1, V1>,
    ) -> KGroupedTable<K1, V1> {
        let builder = self.builder.clone();
        // Kafka burns an index for the selector even when the grouping names it.
        let generated = builder.new_name("KTABLE-SELECT-");
        let name = self
            .take_next_name()
            .or(grouped.name.clone())
            .unwrap_or(generated);
        self.force_send_old_values();
        let selector = Arc::new(selector);
        let parent = self.node.clone();
        builder.with_topology(|t| {
            let p = t.index_of(&parent).into_iter().collect();
            t.add_processor_node(&name, p, move || TableRepartitionMap {
                selector: selector.clone(),
            })
        });
        KGroupedTable {
            builder,
            node: name,
            keys: grouped.keys,
            values: grouped.values,
            name: grouped.name,
        }
    }
}

/// A table grouped by a new key.
pub struct KGroupedTable<K, V> {
    builder: super::builder::StreamsBuilder,
    node: String,
    keys: Option<SerdeOf<K>>,
    values: Option<SerdeOf<V>>,
    name: Option<String>,
}

/// `(key, value, aggregate) -> aggregate`.
type Step<K, V, VA> = Arc<dyn Fn(&K, &V, VA) -> VA + Send + Sync>;

/// How the aggregate of a group starts: from an initial value, or (reduce) from the first
/// value.
enum Start<V, VA> {
    Init(Arc<dyn Fn() -> VA + Send + Sync>),
    First(Arc<dyn Fn(&V) -> VA + Send + Sync>),
}

impl<V, VA> Clone for Start<V, VA> {
    fn clone(&self) -> Self {
        match self {
            Self::Init(f) => Self::Init(f.clone()),
            Self::First(f) => Self::First(f.clone()),
        }
    }
}

/// Kafka's `KTableAggregate` and `KTableReduce`; with a record cache, the updates are
/// forwarded when the cache sends them down.
struct TableAggregate<K, V, VA> {
    store: String,
    start: Start<V, VA>,
    adder: Step<K, V, VA>,
    subtractor: Step<K, V, VA>,
    send_old_values: Arc<AtomicBool>,
    handle: Option<KeyValueStoreHandle<K, ValueAndTimestamp<VA>>>,
    /// Whether the store's record cache forwards the updates, when it sends them down.
    forwarded_at_flush: bool,
}

impl<K: Data, V: Data, VA: Data> Processor<K, Change<V>, K, Change<VA>>
    for TableAggregate<K, V, VA>
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, Change<VA>>) -> Result<(), StreamsError> {
        let handle = ctx.key_value_store_handle(&self.store)?;
        let old_values = self.send_old_values.load(Ordering::Relaxed);
        self.forwarded_at_flush = ctx.forward_on_flush(&handle, old_values);
        self.handle = Some(handle);
        Ok(())
    }

    fn process(
        &mut self,
        r: Record<K, Change<V>>,
        ctx: &mut ProcessorContext<'_, K, Change<VA>>,
    ) -> Result<(), StreamsError> {
        let Some(handle) = &self.handle else {
            return Ok(());
        };
        let (new, old, timestamp) = {
            let mut store = ctx.key_value_store(handle);
            let stored = store.get(&r.key)?;
            let old = stored.as_ref().map(|s| s.value.clone());
            let mut timestamp = r.timestamp;
            // First remove the old value, then add the new one.
            let intermediate = match (&r.value.old, &stored) {
                (Some(old_value), Some(s)) => {
                    timestamp = r.timestamp.max(s.timestamp);
                    Some((self.subtractor)(&r.key, old_value, s.value.clone()))
                }
                _ => old.clone(),
            };
            let new = match &r.value.new {
                Some(new_value) => {
                    if let Some(s) = &stored {
                        timestamp = r.timestamp.max(s.timestamp);
                    }
                    Some(match (intermediate, &self.start) {
                        (Some(agg), _) => (self.adder)(&r.key, new_value, agg),
                        (None, Start::Init(init)) => (self.adder)(&r.key, new_value, init()),
                        (None, Start::First(first)) => first(new_value),
                    })
                }
                None => intermediate,
            };
            let stored_new = new
                .clone()
                .map(|value| ValueAndTimestamp { value, timestamp });
            store.put(&r.key, stored_new.as_ref())?;
            (new, old, timestamp)
        };
        if self.forwarded_at_flush {
            return Ok(());
        }
        let old = if self.send_old_values.load(Ordering::Relaxed) {
            old
        } else {
            None
        };
        ctx.forward(Record {
            key: r.key,
            value: Change::new(new, old),
            timestamp,
            headers: r.headers,
        });
        Ok(())
    }
}

impl<K: Data, V: Data> KGroupedTable<K, V> {
    /// The number of rows in each group.
    pub fn count(self, materialized: Materialized<K, i64>) -> KTable<K, i64> {
        let materialized = Materialized {
            values: materialized.values.or(Some(Arc::new(I64Serde))),
            ..materialized
        };
        self.fold(
            "KTABLE-AGGREGATE-",
            Start::Init(Arc::new(|| 0)),
            Arc::new(|_, _, n| n + 1),
            Arc::new(|_, _, n| n - 1),
            materialized,
        )
    }

    /// Each group's values combined: `adder(aggregate, value)` for a value joining the group,
    /// `subtractor(aggregate, value)` for one leaving it.
    pub fn reduce(
        self,
        adder: impl Fn(V, &V) -> V + Send + Sync + 'static,
        subtractor: impl Fn(V, &V) -> V + Send + Sync + 'static,
        materialized: Materialized<K, V>,
    ) -> KTable<K, V> {
        let materialized = Materialized {
            values: materialized.values.or(self.values.clone()),
            ..materialized
        };
        self.fold(
            "KTABLE-REDUCE-",
            Start::First(Arc::new(V::clone)),
            Arc::new(move |_, v, agg| adder(agg, v)),
            Arc::new(move |_, v, agg| subtractor(agg, v)),
            materialized,
        )
    }

    /// Each group's values folded from `initializer()`: `adder(key, value, aggregate)` for a
    /// value joining the group, `subtractor(key, value, aggregate)` for one leaving it.
    pub fn aggregate<VA: Data>(
        self,
        initializer: impl Fn() -> VA + Send + Sync + 'static,
        adder: impl Fn(&K, &V, VA) -> VA + Send + Sync + 'static,
        subtractor: impl Fn(&K, &V, VA) -> VA + Send + Sync + 'static,
        materialized: Materialized<K, VA>,
    ) -> KTable<K, VA> {
        self.fold(
            "KTABLE-AGGREGATE-",
            Start::Init(Arc::new(initializer)),
            Arc::new(adder),
            Arc::new(subtractor),
            materialized,
        )
    }

    fn fold<VA: Data>(
        self,
        prefix: &str,
        start: Start<V, VA>,
        adder: Step<K, V, VA>,
        subtractor: Step<K, V, VA>,
        materialized: Materialized<K, VA>,
    ) -> KTable<K, VA> {
        let builder = self.builder.clone();
        let store = materialized
            .name
            .clone()
            .unwrap_or_else(|| builder.new_store_name(prefix));
        let sink = builder.new_name("KSTREAM-SINK-");
        let source = builder.new_name("KSTREAM-SOURCE-");
        let name = builder.new_name(prefix);
        let topic = format!(
            "{}-repartition",
            self.name.clone().unwrap_or_else(|| store.clone())
        );
        let keys = materialized.keys.clone().or(self.keys.clone());
        let (Some(keys), Some(values), Some(agg_values)) =
            (keys, self.values.clone(), materialized.values.clone())
        else {
            builder.fail(TopologyError::MissingSerde {
                node: name.clone(),
                which: "key or value (give them with Grouped and Materialized)",
            });
            return KTable::new(builder, name, None, None, None);
        };
        let changes: SerdeOf<Change<V>> = Arc::new(ChangeSerde(values));
        let send_old = Arc::new(AtomicBool::new(false));
        let flag = send_old.clone();
        let definition = table_store(
            &store,
            keys.clone(),
            agg_values.clone(),
            materialized.logging,
        );
        let (select, store_name) = (self.node.clone(), store.clone());
        builder.with_topology(|t| {
            t.add_internal_topic(&topic, InternalTopicKind::Repartition);
            let p = t.index_of(&select).into_iter().collect();
            t.add_sink_node(
                &sink,
                p,
                SinkSpec {
                    topic: SinkTarget::Fixed(topic.clone()),
                    keys: keys.clone(),
                    values: changes.clone(),
                    partitioner: None,
                },
            )?;
            let s = t.add_source_node(&source, vec![topic.clone()], None, keys.clone(), changes)?;
            t.add_processor_node(&name, vec![s], move || TableAggregate {
                store: store_name.clone(),
                start: start.clone(),
                adder: adder.clone(),
                subtractor: subtractor.clone(),
                send_old_values: flag.clone(),
                handle: None,
                forwarded_at_flush: false,
            })?;
            t.add_state_store(definition, &[&name])?;
            Ok(())
        });
        let mut table = KTable::new(builder, name, Some(keys), Some(agg_values), Some(store));
        table.send_old_values = vec![send_old];
        table
    }
}
