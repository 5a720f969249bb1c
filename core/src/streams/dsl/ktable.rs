//! [`KTable`]: the latest value of each key, as a stream of updates ([`Change`]s: the new
//! value and, when a node downstream needs it, the old one). A `None` new value deletes the key.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::aggregate::TableSourceProcessor;
use super::builder::StreamsBuilder;
use super::getter::ValueGetter;
use super::kstream::KStream;
use super::nulls::Nulls;
use super::options::{Materialized, Named, SerdeOf};
use crate::serde::Nullable;
use crate::streams::processor::{Data, Processor, ProcessorContext};
use crate::streams::record::{Change, Record};
use crate::streams::store::{StoreBuilder, TimestampedSerde, ValueAndTimestamp};
use crate::streams::StreamsError;

/// Makes a table's value getter when a join first asks for it.
pub(crate) type LazyGetter<K, V> = Rc<dyn Fn() -> Option<ValueGetter<K, V>>>;

/// A table: the latest value of each key.
pub struct KTable<K, V> {
    pub(crate) builder: StreamsBuilder,
    pub(crate) node: String,
    pub(crate) keys: Option<SerdeOf<K>>,
    pub(crate) values: Option<SerdeOf<V>>,
    /// The store that holds the table, when it is materialized.
    pub(crate) store: Option<String>,
    /// Whether this table can send old values without being materialized: it has a store,
    /// or the table it derives from can (Kafka's `enableSendingOldValues(false)`).
    pub(crate) old_values_available: bool,
    /// Set when a node downstream needs old values: this node's flag first, then those of
    /// the table nodes upstream of it, which must send them too.
    pub(crate) send_old_values: Vec<Arc<AtomicBool>>,
    /// The grace period (plus the gap, for sessions) of the windowed aggregation this table
    /// comes from: when its windows close.
    pub(crate) window_grace: Option<i64>,
    /// Makes the table's value getter, materializing a source table on first use.
    pub(crate) getter: Option<LazyGetter<K, V>>,
    next_name: Option<String>,
}

impl<K: Data, V: Data> KTable<K, V> {
    pub(crate) fn new(
        builder: StreamsBuilder,
        node: String,
        keys: Option<SerdeOf<K>>,
        values: Option<SerdeOf<V>>,
        store: Option<String>,
    ) -> Self {
        Self {
            builder,
            node,
            keys,
            values,
            old_values_available: store.is_some(),
            window_grace: None,
            getter: store.as_deref().map(|s| {
                let getter = ValueGetter::of_store(s);
                Rc::new(move || Some(getter.clone())) as LazyGetter<K, V>
            }),
            store,
            send_old_values: vec![Arc::new(AtomicBool::new(false))],
            next_name: None,
        }
    }

    /// Takes the name given with [`KTable::named`] for the next operation.
    pub(crate) fn take_next_name(&mut self) -> Option<String> {
        self.next_name.take()
    }

    /// Kafka's `enableSendingOldValues(true)`: materializes the source table if it must, and
    /// makes every table node up to it send old values.
    pub(crate) fn force_send_old_values(&self) {
        let _ = self.value_getter();
        self.enable_send_old_values();
    }

    /// The table's value getter (materializing a source table that has no store yet).
    pub(crate) fn value_getter(&self) -> Option<ValueGetter<K, V>> {
        self.getter.as_ref().and_then(|g| g())
    }

    /// Makes this table and the table nodes upstream of it send old values with each
    /// update (what filters over stores, aggregations with a subtractor and joins need).
    pub(crate) fn enable_send_old_values(&self) {
        for flag in &self.send_old_values {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// The name of the node this table comes out of.
    pub fn node_name(&self) -> &str {
        &self.node
    }

    /// The name of the store holding the table, when it has one.
    pub fn store_name(&self) -> Option<&str> {
        self.store.as_deref()
    }

    /// Names the node of the next operation.
    pub fn named(mut self, name: Named) -> Self {
        self.next_name = Some(name.0);
        self
    }

    fn name_or(&mut self, prefix: &str) -> String {
        self.builder.name(self.next_name.take(), prefix)
    }

    fn then<V2: Data, P: Processor<K, Change<V>, K, Change<V2>>>(
        &mut self,
        prefix: &str,
        supplier: impl Fn(Arc<AtomicBool>) -> P + Send + Sync + 'static,
        values: Option<SerdeOf<V2>>,
        derive: impl Fn(ValueGetter<K, V>) -> ValueGetter<K, V2> + 'static,
    ) -> KTable<K, V2> {
        let name = self.name_or(prefix);
        let parent = self.node.clone();
        let flag = Arc::new(AtomicBool::new(false));
        let shared = flag.clone();
        self.builder.with_topology(|t| {
            let p = t.index_of(&parent).into_iter().collect();
            t.add_processor_node(&name, p, move || supplier(shared.clone()))
        });
        let mut send_old_values = vec![flag];
        send_old_values.extend(self.send_old_values.iter().cloned());
        let parent = self.getter.clone();
        let getter =
            parent.map(|parent| Rc::new(move || parent().map(&derive)) as LazyGetter<K, V2>);
        KTable {
            builder: self.builder.clone(),
            node: name,
            keys: self.keys.clone(),
            values,
            store: None,
            old_values_available: self.old_values_available,
            window_grace: self.window_grace,
            send_old_values,
            getter,
            next_name: None,
        }
    }

    /// The rows for which `predicate` holds; an update that fails it deletes the key
    /// downstream (a tombstone), as in Kafka Streams. When the table upstream keeps old values
    /// (it has a store), the filter compares with the old row and sends no tombstone for a key
    /// it never let through.
    pub fn filter(self, predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static) -> Self {
        self.filter_keeping(predicate, true)
    }

    /// The rows for which `predicate` does not hold.
    pub fn filter_not(self, predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static) -> Self {
        self.filter_keeping(predicate, false)
    }

    fn filter_keeping(
        mut self,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
        keep: bool,
    ) -> Self {
        let predicate = Arc::new(predicate);
        let kept = predicate.clone();
        let v = self.values.clone();
        let send_old = self.old_values_available;
        if send_old {
            self.enable_send_old_values();
        }
        let table = self.then(
            "KTABLE-FILTER-",
            move |flag| TableFilter {
                predicate: predicate.clone(),
                keep,
                send_old_values: flag,
            },
            v,
            move |g| {
                let p = kept.clone();
                g.map(move |k, v| ((p)(k, &v.value) == keep).then_some(v))
            },
        );
        if send_old {
            table.send_old_values[0].store(true, Ordering::Relaxed);
        }
        table
    }

    /// Each row with a new value.
    pub fn map_values<V2: Data>(
        mut self,
        mapper: impl Fn(&K, &V) -> V2 + Send + Sync + 'static,
    ) -> KTable<K, V2> {
        let mapper = Arc::new(mapper);
        let mapped = mapper.clone();
        self.then(
            "KTABLE-MAPVALUES-",
            move |flag| TableMapValues {
                mapper: mapper.clone(),
                send_old_values: flag,
            },
            None,
            move |g| {
                let m = mapped.clone();
                g.map(move |k, v| {
                    Some(ValueAndTimestamp {
                        value: m(k, &v.value),
                        timestamp: v.timestamp,
                    })
                })
            },
        )
    }

    /// The table's updates as a stream: each new value, `None` for a deletion.
    pub fn to_stream(mut self) -> KStream<K, Option<V>> {
        let name = self.name_or("KTABLE-TOSTREAM-");
        let parent = self.node.clone();
        self.builder.with_topology(|t| {
            let p = t.index_of(&parent).into_iter().collect();
            t.add_processor_node::<ToStream, K, Change<V>, K, Option<V>>(&name, p, || ToStream)
        });
        let values: Option<SerdeOf<Option<V>>> = self
            .values
            .clone()
            .map(|v| Arc::new(Nullable(v)) as SerdeOf<Option<V>>);
        KStream::new(self.builder.clone(), name, self.keys.clone(), values)
    }

    /// The table of a stream (`KStream::to_table`).
    pub(crate) fn from_stream(mut stream: KStream<K, V>, materialized: Materialized<K, V>) -> Self {
        let builder = stream.builder.clone();
        let name = builder.name(stream.next_name.take(), "KSTREAM-TOTABLE-");
        let store = materialized
            .name
            .clone()
            .or_else(|| Some(builder.new_store_name("KSTREAM-TOTABLE-")))
            .filter(|_| materialized.name.is_some());
        let keys = materialized.keys.clone().or(stream.keys.clone());
        let values = materialized.values.clone().or(stream.values.clone());
        let parent = if stream.repartition_required {
            stream.repartition_through(&name, keys.clone(), values.clone())
        } else {
            stream.node.clone()
        };
        let Some((keys, values)) = keys.zip(values) else {
            builder.fail(crate::streams::TopologyError::MissingSerde {
                node: name.clone(),
                which: "key or value (give them with Materialized)",
            });
            return KTable::new(builder, name, None, None, None);
        };
        let slot = Arc::new(Mutex::new(store.clone()));
        let table = TableSource::add_after_stream(
            &builder,
            &name,
            &parent,
            slot,
            keys.clone(),
            values.clone(),
            materialized.logging,
        );
        let mut out = KTable::new(builder, name, Some(keys), Some(values), store);
        out.send_old_values = vec![table];
        out
    }
}

/// Adds the processor that turns a table's input into updates.
pub(crate) struct TableSource;

impl TableSource {
    /// After a source of `Option<V>` values (a table topic).
    pub(crate) fn add<K: Data, V: Data>(
        builder: &StreamsBuilder,
        name: &str,
        source: &str,
        store: StoreSlotName,
        keys: SerdeOf<K>,
        values: SerdeOf<V>,
        logging: bool,
    ) -> Arc<AtomicBool> {
        Self::add_with(
            builder,
            name,
            source,
            store,
            (keys, values),
            logging,
            |inner| inner,
        )
    }

    /// After a stream of `V` values (`KStream::to_table`): values are wrapped as present.
    pub(crate) fn add_after_stream<K: Data, V: Data>(
        builder: &StreamsBuilder,
        name: &str,
        parent: &str,
        store: StoreSlotName,
        keys: SerdeOf<K>,
        values: SerdeOf<V>,
        logging: bool,
    ) -> Arc<AtomicBool> {
        Self::add_with(
            builder,
            name,
            parent,
            store,
            (keys, values),
            logging,
            |inner| StreamToTable { inner },
        )
    }

    /// Adds the processor `wrap` makes of a table source processor, and its store.
    fn add_with<K: Data, V: Data, VIn: 'static, P>(
        builder: &StreamsBuilder,
        name: &str,
        parent: &str,
        store: StoreSlotName,
        (keys, values): (SerdeOf<K>, SerdeOf<V>),
        logging: bool,
        wrap: impl Fn(TableSourceProcessor<K, V>) -> P + Send + Sync + 'static,
    ) -> Arc<AtomicBool>
    where
        P: Processor<K, VIn, K, Change<V>>,
    {
        let flag = Arc::new(AtomicBool::new(false));
        let shared = flag.clone();
        let now = store.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let null_keys = Nulls::of(Some(keys.clone()));
        builder.with_topology(|t| {
            let p = t.index_of(parent).into_iter().collect();
            t.add_processor_node(name, p, move || {
                wrap(TableSourceProcessor {
                    store: store.lock().unwrap_or_else(|e| e.into_inner()).clone(),
                    null_keys: null_keys.clone(),
                    send_old_values: shared.clone(),
                    handle: None,
                    forwarded_at_flush: false,
                })
            })?;
            if let Some(store) = now {
                t.add_state_store(table_store(&store, keys, values, logging), &[name])?;
            }
            Ok(())
        });
        flag
    }
}

/// The store a table source writes: set at declaration when the table is named, later when
/// a join first needs the table's values; read when a task builds the processor.
pub(crate) type StoreSlotName = Arc<Mutex<Option<String>>>;

/// The timestamped store of a table.
pub(crate) fn table_store<K: 'static, V: 'static>(
    name: &str,
    keys: SerdeOf<K>,
    values: SerdeOf<V>,
    logging: bool,
) -> StoreBuilder {
    let definition =
        StoreBuilder::key_value_with(name, keys, Arc::new(TimestampedSerde(values))).timestamped();
    if logging {
        definition
    } else {
        definition.with_logging_disabled()
    }
}

/// `KStream::to_table`: a table source fed by a stream.
struct StreamToTable<K, V> {
    inner: TableSourceProcessor<K, V>,
}

impl<K: Data, V: Data> Processor<K, V, K, Change<V>> for StreamToTable<K, V> {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, Change<V>>) -> Result<(), StreamsError> {
        self.inner.init(ctx)
    }

    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
    ) -> Result<(), StreamsError> {
        let value = Some(r.value);
        self.inner.process(
            Record {
                key: r.key,
                value,
                timestamp: r.timestamp,
                headers: r.headers,
            },
            ctx,
        )
    }
}

/// `KTable::filter`.
struct TableFilter<F> {
    predicate: Arc<F>,
    keep: bool,
    send_old_values: Arc<AtomicBool>,
}

impl<K: Data, V: Data, F> Processor<K, Change<V>, K, Change<V>> for TableFilter<F>
where
    F: Fn(&K, &V) -> bool + Send + Sync + 'static,
{
    fn process(
        &mut self,
        r: Record<K, Change<V>>,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
    ) -> Result<(), StreamsError> {
        let pass = |v: Option<V>| v.filter(|v| (self.predicate)(&r.key, v) == self.keep);
        let send_old = self.send_old_values.load(Ordering::Relaxed);
        let new = pass(r.value.new.clone());
        let old = if send_old {
            pass(r.value.old.clone())
        } else {
            None
        };
        if send_old && new.is_none() && old.is_none() {
            return Ok(());
        }
        ctx.forward(Record {
            key: r.key,
            value: Change::new(new, old),
            timestamp: r.timestamp,
            headers: r.headers,
        });
        Ok(())
    }
}

/// `KTable::map_values`.
struct TableMapValues<F> {
    mapper: Arc<F>,
    send_old_values: Arc<AtomicBool>,
}

impl<K: Data, V: Data, V2: Data, F> Processor<K, Change<V>, K, Change<V2>> for TableMapValues<F>
where
    F: Fn(&K, &V) -> V2 + Send + Sync + 'static,
{
    fn process(
        &mut self,
        r: Record<K, Change<V>>,
        ctx: &mut ProcessorContext<'_, K, Change<V2>>,
    ) -> Result<(), StreamsError> {
        let new = r.value.new.as_ref().map(|v| (self.mapper)(&r.key, v));
        let old = if self.send_old_values.load(Ordering::Relaxed) {
            r.value.old.as_ref().map(|v| (self.mapper)(&r.key, v))
        } else {
            None
        };
        ctx.forward(Record {
            key: r.key,
            value: Change::new(new, old),
            timestamp: r.timestamp,
            headers: r.headers,
        });
        Ok(())
    }
}

/// `KTable::to_stream`.
struct ToStream;

impl<K: Data, V: Data> Processor<K, Change<V>, K, Option<V>> for ToStream {
    fn process(
        &mut self,
        r: Record<K, Change<V>>,
        ctx: &mut ProcessorContext<'_, K, Option<V>>,
    ) -> Result<(), StreamsError> {
        ctx.forward(Record {
            key: r.key,
            value: r.value.new,
            timestamp: r.timestamp,
            headers: r.headers,
        });
        Ok(())
    }
}
