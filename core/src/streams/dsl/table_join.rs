//! Joins with tables: a stream with a table (`join_table`, `left_join_table`: each record looks
//! up the table's current value for its key) and a table with a table (`join`, `left_join`,
//! `outer_join`: each update of either side looks up the other, and the result is a table),
//! with Kafka Streams' nodes, names and rules for timestamps and tombstones.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::getter::ValueGetter;
use super::kstream::KStream;
use super::ktable::{table_store, KTable};
use super::nulls::Nulls;
use super::options::{Materialized, SerdeOf};
use crate::serde::Serde;
use crate::streams::processor::{Data, KeyValueStoreHandle, Processor, ProcessorContext};
use crate::streams::record::{Change, Record};
use crate::streams::store::ValueAndTimestamp;
use crate::streams::StreamsError;
use crate::streams::TopologyError;

/// How a stream is joined with a table: serdes for a repartition and the join's name (Kafka's
/// `Joined`).
pub struct Joined<K, V, VT> {
    pub(crate) keys: Option<SerdeOf<K>>,
    pub(crate) values: Option<SerdeOf<V>>,
    pub(crate) name: Option<String>,
    _table: std::marker::PhantomData<fn() -> VT>,
}

impl<K, V, VT> Default for Joined<K, V, VT> {
    fn default() -> Self {
        Self {
            keys: None,
            values: None,
            name: None,
            _table: std::marker::PhantomData,
        }
    }
}

impl<K: 'static, V: 'static, VT> Joined<K, V, VT> {
    /// Repartitions the stream, when it must be, with these serdes.
    pub fn with(keys: impl Serde<Value = K>, values: impl Serde<Value = V>) -> Self {
        Self {
            keys: Some(Arc::new(keys)),
            values: Some(Arc::new(values)),
            ..Self::default()
        }
    }

    /// Names the join's node (and the repartition topic before it).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// A stream record's value with the table's, `None` where the join gives nothing.
type StreamTableJoiner<V, VT, R> = Arc<dyn Fn(&V, Option<&VT>) -> Option<R> + Send + Sync>;

/// Looks each stream record's key up in the table. A record with a null key finds nothing:
/// a left join forwards it at once without a value (KIP-962), an inner join drops it.
struct StreamTableJoin<K, V, VT, R> {
    getter: ValueGetter<K, VT>,
    joiner: StreamTableJoiner<V, VT, R>,
    null_keys: Nulls<K>,
    _types: std::marker::PhantomData<fn(K, V)>,
}

impl<K: Data, V: Data, VT: Data, R: Data> Processor<K, V, K, R> for StreamTableJoin<K, V, VT, R> {
    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K, R>,
    ) -> Result<(), StreamsError> {
        let null_key = self.null_keys.is_null(&r.key);
        let found = if null_key {
            None
        } else {
            (self.getter.get)(&mut ctx.reader(), &r.key)?
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
    /// Joins each record with the table's value for its key, when there is one.
    pub fn join_table<VT: Data, R: Data>(
        self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&V, &VT) -> R + Send + Sync + 'static,
        joined: Joined<K, V, VT>,
    ) -> KStream<K, R> {
        let joiner: StreamTableJoiner<V, VT, R> = Arc::new(move |v, t| Some(joiner(v, t?)));
        self.stream_table_join(table, joiner, joined, "KSTREAM-JOIN-")
    }

    /// Joins each record with the table's value for its key, or `None` when it has none.
    pub fn left_join_table<VT: Data, R: Data>(
        self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&V, Option<&VT>) -> R + Send + Sync + 'static,
        joined: Joined<K, V, VT>,
    ) -> KStream<K, R> {
        let joiner: StreamTableJoiner<V, VT, R> = Arc::new(move |v, t| Some(joiner(v, t)));
        self.stream_table_join(table, joiner, joined, "KSTREAM-LEFTJOIN-")
    }

    fn stream_table_join<VT: Data, R: Data>(
        mut self,
        table: &KTable<K, VT>,
        joiner: StreamTableJoiner<V, VT, R>,
        joined: Joined<K, V, VT>,
        prefix: &str,
    ) -> KStream<K, R> {
        let builder = self.builder.clone();
        let keys = joined.keys.clone().or(self.keys.clone());
        if self.repartition_required {
            let values = joined.values.clone().or(self.values.clone());
            let prefix = joined.name.clone().unwrap_or_else(|| self.node.clone());
            self.node = self.repartition_through(&prefix, keys.clone(), values);
        }
        let name = builder.name(joined.name.clone(), prefix);
        let Some(getter) = table.value_getter() else {
            builder.fail(TopologyError::Invalid(format!(
                "{name}: the table {} cannot be looked up; materialize it",
                table.node
            )));
            return KStream::new(builder, name, keys, None);
        };
        let parent = self.node.clone();
        builder.with_topology(|t| {
            t.copartition(&[&parent, &table.node]);
            Ok(())
        });
        let stores = getter.stores.clone();
        let null_keys = Nulls::of(keys.clone().or(table.keys.clone()));
        builder.with_topology(|t| {
            let p = t.index_of(&parent).into_iter().collect();
            t.add_processor_node(&name, p, move || StreamTableJoin {
                getter: getter.clone(),
                joiner: joiner.clone(),
                null_keys: null_keys.clone(),
                _types: std::marker::PhantomData,
            })?;
            for s in &stores {
                t.connect_store(&name, s)?;
            }
            Ok(())
        });
        KStream::new(builder, name, keys, None)
    }
}

/// Which table-table join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TableJoinKind {
    Inner,
    Left,
    Outer,
}

/// A table join's value function over the two sides' values.
type TableJoiner<V1, V2, R> = Arc<dyn Fn(Option<&V1>, Option<&V2>) -> R + Send + Sync>;

/// One side of a table-table join: each update of this side looks up the other.
struct TableJoinSide<K, VThis, VOther, R> {
    /// Whether this is the left table's side.
    left: bool,
    kind: TableJoinKind,
    other: ValueGetter<K, VOther>,
    joiner: TableJoiner<VThis, VOther, R>,
    send_old_values: Arc<AtomicBool>,
}

impl<K: Data, VThis: Data, VOther: Data, R: Data> Processor<K, Change<VThis>, K, Change<R>>
    for TableJoinSide<K, VThis, VOther, R>
{
    fn process(
        &mut self,
        r: Record<K, Change<VThis>>,
        ctx: &mut ProcessorContext<'_, K, Change<R>>,
    ) -> Result<(), StreamsError> {
        let found = (self.other.get)(&mut ctx.reader(), &r.key)?;
        let send_old = self.send_old_values.load(Ordering::Relaxed);
        let (other, timestamp) = match &found {
            Some(v) => (Some(&v.value), r.timestamp.max(v.timestamp)),
            None => (None, r.timestamp),
        };
        let join = |this: Option<&VThis>| (self.joiner)(this, other);
        let (new, old) = match (self.kind, self.left) {
            // Kafka's KTableKTableInnerJoin, either side.
            (TableJoinKind::Inner, _) => {
                if other.is_none() {
                    return Ok(());
                }
                (
                    r.value.new.as_ref().map(|v| join(Some(v))),
                    r.value
                        .old
                        .as_ref()
                        .filter(|_| send_old)
                        .map(|v| join(Some(v))),
                )
            }
            // KTableKTableLeftJoin: the left side of a left join.
            (TableJoinKind::Left, true) => {
                if other.is_none() && r.value.new.is_none() && r.value.old.is_none() {
                    return Ok(());
                }
                (
                    r.value.new.as_ref().map(|v| join(Some(v))),
                    r.value
                        .old
                        .as_ref()
                        .filter(|_| send_old)
                        .map(|v| join(Some(v))),
                )
            }
            // KTableKTableRightJoin: the right side of a left join.
            (TableJoinKind::Left, false) => {
                if other.is_none() {
                    return Ok(());
                }
                (
                    Some(join(r.value.new.as_ref())),
                    send_old.then(|| join(r.value.old.as_ref())),
                )
            }
            // KTableKTableOuterJoin, either side.
            (TableJoinKind::Outer, _) => {
                if other.is_none() && r.value.new.is_none() && r.value.old.is_none() {
                    return Ok(());
                }
                (
                    (other.is_some() || r.value.new.is_some()).then(|| join(r.value.new.as_ref())),
                    (send_old && (other.is_some() || r.value.old.is_some()))
                        .then(|| join(r.value.old.as_ref())),
                )
            }
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

/// Forwards both sides' results, keeping them in the join's store when it has one.
struct TableJoinMerge<K, R> {
    store: Option<String>,
    send_old_values: Arc<AtomicBool>,
    handle: Option<KeyValueStoreHandle<K, ValueAndTimestamp<R>>>,
}

impl<K: Data, R: Data> Processor<K, Change<R>, K, Change<R>> for TableJoinMerge<K, R> {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, Change<R>>) -> Result<(), StreamsError> {
        if let Some(store) = &self.store {
            self.handle = Some(ctx.key_value_store_handle(store)?);
        }
        Ok(())
    }

    fn process(
        &mut self,
        r: Record<K, Change<R>>,
        ctx: &mut ProcessorContext<'_, K, Change<R>>,
    ) -> Result<(), StreamsError> {
        let send_old = self.send_old_values.load(Ordering::Relaxed);
        if let Some(handle) = &self.handle {
            let new = r.value.new.clone().map(|value| ValueAndTimestamp {
                value,
                timestamp: r.timestamp,
            });
            let old = {
                let mut store = ctx.key_value_store(handle);
                let old = store.get(&r.key)?.map(|v| v.value);
                store.put(&r.key, new.as_ref())?;
                old
            };
            let old = if send_old { old } else { None };
            ctx.forward(r.clone().with_value(Change::new(r.value.new, old)));
        } else if send_old {
            ctx.forward(r);
        } else {
            let new = r.value.new.clone();
            ctx.forward(r.with_value(Change::new(new, None)));
        }
        Ok(())
    }
}

impl<K: Data, V1: Data> KTable<K, V1> {
    /// The rows whose key is in both tables, with `joiner(left, right)`.
    pub fn join<V2: Data, R: Data>(
        self,
        other: &KTable<K, V2>,
        joiner: impl Fn(&V1, &V2) -> R + Send + Sync + 'static,
        materialized: Materialized<K, R>,
    ) -> KTable<K, R> {
        // An inner join's joiner has both sides; without one there is no result.
        let j: TableJoiner<V1, V2, Option<R>> = Arc::new(move |l, r| Some(joiner(l?, r?)));
        self.table_join(other, j, materialized, TableJoinKind::Inner)
    }

    /// Every row of this table, with the other's value for its key or `None`.
    pub fn left_join<V2: Data, R: Data>(
        self,
        other: &KTable<K, V2>,
        joiner: impl Fn(&V1, Option<&V2>) -> R + Send + Sync + 'static,
        materialized: Materialized<K, R>,
    ) -> KTable<K, R> {
        let j: TableJoiner<V1, V2, Option<R>> = Arc::new(move |l, r| Some(joiner(l?, r)));
        self.table_join(other, j, materialized, TableJoinKind::Left)
    }

    /// Every key of either table, with both sides' values where present.
    pub fn outer_join<V2: Data, R: Data>(
        self,
        other: &KTable<K, V2>,
        joiner: impl Fn(Option<&V1>, Option<&V2>) -> R + Send + Sync + 'static,
        materialized: Materialized<K, R>,
    ) -> KTable<K, R> {
        let j: TableJoiner<V1, V2, Option<R>> = Arc::new(move |l, r| Some(joiner(l, r)));
        self.table_join(other, j, materialized, TableJoinKind::Outer)
    }

    fn table_join<V2: Data, R: Data>(
        mut self,
        other: &KTable<K, V2>,
        joiner: TableJoiner<V1, V2, Option<R>>,
        materialized: Materialized<K, R>,
        kind: TableJoinKind,
    ) -> KTable<K, R> {
        let builder = self.builder.clone();
        let named = self.take_next_name();
        let merge = builder.name(named.clone(), "KTABLE-MERGE-");
        if kind != TableJoinKind::Inner {
            self.force_send_old_values();
        }
        if kind == TableJoinKind::Outer {
            other.force_send_old_values();
        }
        builder.with_topology(|t| {
            t.copartition(&[&self.node, &other.node]);
            Ok(())
        });
        let join_this =
            builder.name_with_suffix(named.as_deref(), "-join-this", "KTABLE-JOINTHIS-");
        let join_other =
            builder.name_with_suffix(named.as_deref(), "-join-other", "KTABLE-JOINOTHER-");
        let (Some(this_getter), Some(other_getter)) = (self.value_getter(), other.value_getter())
        else {
            builder.fail(TopologyError::Invalid(format!(
                "{merge}: both tables of a join must be materialized"
            )));
            return KTable::new(builder, merge, None, None, None);
        };
        let keys = materialized.keys.clone().or(self.keys.clone());
        let store = materialized.name.clone();
        let flags = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let merge_flag = Arc::new(AtomicBool::new(false));
        let (this_node, other_node) = (self.node.clone(), other.node.clone());
        let (this_stores, other_stores) = (this_getter.stores.clone(), other_getter.stores.clone());
        let (jl, jr) = (joiner.clone(), joiner.clone());
        let (lf, rf, mf) = (flags.0.clone(), flags.1.clone(), merge_flag.clone());
        let (tg, og) = (this_getter.clone(), other_getter.clone());
        let store_for_merge = store.clone();
        let definition = match (&store, &keys, &materialized.values) {
            (Some(s), Some(k), Some(v)) => {
                Some(table_store(s, k.clone(), v.clone(), materialized.logging))
            }
            (Some(_), _, _) => {
                builder.fail(TopologyError::MissingSerde {
                    node: merge.clone(),
                    which: "key or value (give them with Materialized)",
                });
                None
            }
            _ => None,
        };
        builder.with_topology(|t| {
            let p = t.index_of(&this_node).into_iter().collect();
            t.add_processor_node(
                &join_this,
                p,
                move || TableJoinSide::<K, V1, V2, Option<R>> {
                    left: true,
                    kind,
                    other: og.clone(),
                    joiner: jl.clone(),
                    send_old_values: lf.clone(),
                },
            )?;
            let p = t.index_of(&other_node).into_iter().collect();
            t.add_processor_node(&join_other, p, move || {
                let j = jr.clone();
                TableJoinSide::<K, V2, V1, Option<R>> {
                    left: false,
                    kind,
                    other: tg.clone(),
                    joiner: Arc::new(move |this, other| j(other, this)),
                    send_old_values: rf.clone(),
                }
            })?;
            let p = [t.index_of(&join_this), t.index_of(&join_other)]
                .into_iter()
                .flatten()
                .collect();
            t.add_processor_node(&merge, p, move || FlattenMerge::<K, R> {
                inner: TableJoinMerge {
                    store: store_for_merge.clone(),
                    send_old_values: mf.clone(),
                    handle: None,
                },
            })?;
            for s in &other_stores {
                t.connect_store(&join_this, s)?;
            }
            for s in &this_stores {
                t.connect_store(&join_other, s)?;
            }
            if let Some(d) = definition {
                t.add_state_store(d, &[&merge])?;
            }
            Ok(())
        });
        let mut table = KTable::new(
            builder,
            merge,
            keys,
            materialized.values.clone(),
            store.clone(),
        );
        table.send_old_values = vec![merge_flag, flags.0, flags.1];
        if store.is_none() {
            let getter = join_getter(this_getter, other_getter, joiner, kind);
            table.getter = Some(Rc::new(move || Some(getter.clone())));
        }
        table
    }
}

/// The value getter of a join that has no store: both sides looked up and joined.
fn join_getter<K: 'static, V1: 'static, V2: 'static, R: 'static>(
    left: ValueGetter<K, V1>,
    right: ValueGetter<K, V2>,
    joiner: TableJoiner<V1, V2, Option<R>>,
    kind: TableJoinKind,
) -> ValueGetter<K, R> {
    let mut stores = left.stores.clone();
    stores.extend(right.stores.iter().cloned());
    ValueGetter {
        stores,
        get: Arc::new(move |reader, key| {
            let l = (left.get)(reader, key)?;
            let r = (right.get)(reader, key)?;
            let present = match kind {
                TableJoinKind::Inner => l.is_some() && r.is_some(),
                TableJoinKind::Left => l.is_some(),
                TableJoinKind::Outer => l.is_some() || r.is_some(),
            };
            if !present {
                return Ok(None);
            }
            let timestamp = l
                .as_ref()
                .map_or(i64::MIN, |v| v.timestamp)
                .max(r.as_ref().map_or(i64::MIN, |v| v.timestamp));
            Ok(
                joiner(l.as_ref().map(|v| &v.value), r.as_ref().map(|v| &v.value))
                    .map(|value| ValueAndTimestamp { value, timestamp }),
            )
        }),
    }
}

/// The merge of a join whose sides give `Option<R>` (a joiner that may give nothing): results
/// without a value are deletions.
struct FlattenMerge<K, R> {
    inner: TableJoinMerge<K, R>,
}

impl<K: Data, R: Data> Processor<K, Change<Option<R>>, K, Change<R>> for FlattenMerge<K, R> {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, Change<R>>) -> Result<(), StreamsError> {
        self.inner.init(ctx)
    }

    fn process(
        &mut self,
        r: Record<K, Change<Option<R>>>,
        ctx: &mut ProcessorContext<'_, K, Change<R>>,
    ) -> Result<(), StreamsError> {
        let change = Change::new(r.value.new.flatten(), r.value.old.flatten());
        self.inner.process(
            Record {
                key: r.key,
                value: change,
                timestamp: r.timestamp,
                headers: r.headers,
            },
            ctx,
        )
    }
}
