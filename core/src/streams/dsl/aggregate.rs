//! The processors of stateful DSL operations on keys: stream aggregations (`count`, `reduce`,
//! `aggregate`) and the source of a table. Their stores keep each value with its timestamp
//! (Kafka's timestamped stores), and an update's timestamp is the larger of the record's and
//! the stored one's, as in Kafka Streams.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::nulls::Nulls;
use crate::streams::processor::{Data, KeyValueStoreHandle, Processor, ProcessorContext};
use crate::streams::record::{Change, Record};
use crate::streams::store::ValueAndTimestamp;
use crate::streams::StreamsError;

/// `(key, value, aggregate) -> aggregate`.
pub(crate) type Aggregator<K, V, VA> = Arc<dyn Fn(&K, V, VA) -> VA + Send + Sync>;

/// How an aggregation folds a record into the aggregate of its key.
pub(crate) enum Fold<K, V, VA> {
    /// `aggregate`: the initial aggregate, and the step `(key, value, aggregate) -> aggregate`.
    Aggregate {
        init: Arc<dyn Fn() -> VA + Send + Sync>,
        step: Aggregator<K, V, VA>,
    },
    /// `reduce`: the first value as the aggregate, then `(aggregate, value) -> aggregate`.
    Reduce {
        first: Arc<dyn Fn(V) -> VA + Send + Sync>,
        step: Arc<dyn Fn(VA, V) -> VA + Send + Sync>,
    },
}

impl<K, V, VA> Clone for Fold<K, V, VA> {
    fn clone(&self) -> Self {
        match self {
            Self::Aggregate { init, step } => Self::Aggregate {
                init: init.clone(),
                step: step.clone(),
            },
            Self::Reduce { first, step } => Self::Reduce {
                first: first.clone(),
                step: step.clone(),
            },
        }
    }
}

impl<K, V, VA> Fold<K, V, VA> {
    /// The aggregate of a new window before its first record: the initial value of an
    /// `aggregate`, nothing for a `reduce`.
    pub(crate) fn seed(&self) -> Option<VA> {
        match self {
            Self::Aggregate { init, .. } => Some(init()),
            Self::Reduce { .. } => None,
        }
    }

    /// Folds `value` into `aggregate` (the seed when there is none yet).
    pub(crate) fn apply(&self, key: &K, value: V, aggregate: Option<VA>) -> VA {
        match (self, aggregate) {
            (Self::Aggregate { init, step }, aggregate) => {
                step(key, value, aggregate.unwrap_or_else(|| init()))
            }
            (Self::Reduce { first, .. }, None) => first(value),
            (Self::Reduce { step, .. }, Some(aggregate)) => step(aggregate, value),
        }
    }
}

/// `count`, `reduce` and `aggregate` of a grouped stream. Records with a null key or value
/// are skipped (and counted as dropped), as Kafka's `KStreamAggregate` skips them.
pub(crate) struct StreamAggregate<K, V, VA> {
    pub(crate) store: String,
    pub(crate) fold: Fold<K, V, VA>,
    pub(crate) nulls: (Nulls<K>, Nulls<V>),
    pub(crate) send_old_values: Arc<AtomicBool>,
    pub(crate) handle: Option<KeyValueStoreHandle<K, ValueAndTimestamp<VA>>>,
    /// Whether the store's record cache forwards the updates, when it sends them down.
    pub(crate) forwarded_at_flush: bool,
}

impl<K: Data, V: Data, VA: Data> Processor<K, V, K, Change<VA>> for StreamAggregate<K, V, VA> {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, Change<VA>>) -> Result<(), StreamsError> {
        let handle = ctx.key_value_store_handle(&self.store)?;
        let old_values = self.send_old_values.load(Ordering::Relaxed);
        self.forwarded_at_flush = ctx.forward_on_flush(&handle, old_values);
        self.handle = Some(handle);
        Ok(())
    }

    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K, Change<VA>>,
    ) -> Result<(), StreamsError> {
        let Some(handle) = &self.handle else {
            return Ok(());
        };
        if self.nulls.0.is_null(&r.key) || self.nulls.1.is_null(&r.value) {
            ctx.record_dropped();
            return Ok(());
        }
        let send_old = self.send_old_values.load(Ordering::Relaxed);
        // Forwarded at flush, the update needs no copy here.
        let forward_now = !self.forwarded_at_flush;
        let mut outcome = None;
        let fold = &self.fold;
        let mut value = Some(r.value);
        ctx.key_value_store(handle).update(&r.key, |stored| {
            let (old, timestamp) = match stored {
                Some(s) => (Some(s.value), r.timestamp.max(s.timestamp)),
                None => (None, r.timestamp),
            };
            let kept = if send_old && forward_now {
                old.clone()
            } else {
                None
            };
            let new = fold.apply(&r.key, value.take()?, old);
            if forward_now {
                outcome = Some((new.clone(), kept, timestamp));
            }
            Some(ValueAndTimestamp {
                value: new,
                timestamp,
            })
        })?;
        let Some((new, old, timestamp)) = outcome else {
            return Ok(());
        };
        ctx.forward(Record {
            key: r.key,
            value: Change::new(Some(new), old),
            timestamp,
            headers: r.headers,
        });
        Ok(())
    }
}

/// The source of a table: turns each record into an update, kept in the table's store when
/// it has one (forwarded when the store's record cache sends it down, if it has a cache). Records with a null key are skipped (and counted as dropped), as Kafka's
/// `KTableSource` skips them.
pub(crate) struct TableSourceProcessor<K, V> {
    pub(crate) store: Option<String>,
    pub(crate) null_keys: Nulls<K>,
    pub(crate) send_old_values: Arc<AtomicBool>,
    pub(crate) handle: Option<KeyValueStoreHandle<K, ValueAndTimestamp<V>>>,
    /// Whether the store's record cache forwards the updates, when it sends them down.
    pub(crate) forwarded_at_flush: bool,
}

impl<K: Data, V: Data> Processor<K, Option<V>, K, Change<V>> for TableSourceProcessor<K, V> {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, Change<V>>) -> Result<(), StreamsError> {
        if let Some(store) = &self.store {
            let handle = ctx.key_value_store_handle(store)?;
            let old_values = self.send_old_values.load(Ordering::Relaxed);
            self.forwarded_at_flush = ctx.forward_on_flush(&handle, old_values);
            self.handle = Some(handle);
        }
        Ok(())
    }

    fn process(
        &mut self,
        r: Record<K, Option<V>>,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
    ) -> Result<(), StreamsError> {
        if self.null_keys.is_null(&r.key) {
            ctx.record_dropped();
            return Ok(());
        }
        let old = match &self.handle {
            Some(handle) => {
                let mut store = ctx.key_value_store(handle);
                let old = store.get(&r.key)?.map(|s| s.value);
                let new = r.value.clone().map(|value| ValueAndTimestamp {
                    value,
                    timestamp: r.timestamp,
                });
                store.put(&r.key, new.as_ref())?;
                if self.forwarded_at_flush {
                    return Ok(());
                }
                if self.send_old_values.load(Ordering::Relaxed) {
                    old
                } else {
                    None
                }
            }
            None => None,
        };
        ctx.forward(Record {
            key: r.key,
            value: Change::new(r.value, old),
            timestamp: r.timestamp,
            headers: r.headers,
        });
        Ok(())
    }
}
