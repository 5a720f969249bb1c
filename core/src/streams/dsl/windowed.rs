//! Grouped streams in windows: [`TimeWindowedKStream`] (time and sliding windows) and
//! [`SessionWindowedKStream`], whose aggregations give tables keyed by [`Windowed`] keys.
//! Their stores keep windows for the window size (or twice the time difference for sliding
//! windows, or the gap for sessions) plus grace, or longer with `Materialized::with_retention`.

use std::sync::Arc;

use super::emit_final::EmitFinal;
use super::grouped::KGroupedStream;
use super::ktable::KTable;
use super::nulls::Nulls;
use super::options::{Materialized, SerdeOf};
use super::window_aggregate::{
    Merger, SessionWindowAggregate, SlidingWindowAggregate, TimeWindowAggregate,
};
use crate::serde::I64Serde;
use crate::streams::processor::Data;
use crate::streams::store::StoreKind;
use crate::streams::windowed::{SessionWindowedSerde, TimeWindowedSerde, Windowed};
use crate::streams::windows::{SessionWindows, SlidingWindows, TimeWindows};

use super::aggregate::Fold;

/// Which windows a [`TimeWindowedKStream`] aggregates in.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WindowSpec {
    Time(TimeWindows),
    Sliding(SlidingWindows),
}

impl WindowSpec {
    /// The size windowed keys are read back with.
    fn size(&self) -> i64 {
        match self {
            Self::Time(w) => w.size_ms(),
            Self::Sliding(w) => w.time_difference_ms(),
        }
    }

    fn grace(&self) -> i64 {
        match self {
            Self::Time(w) => w.grace_ms(),
            Self::Sliding(w) => w.grace_ms(),
        }
    }

    fn default_retention(&self) -> i64 {
        match self {
            Self::Time(w) => w.size_ms() + w.grace_ms(),
            Self::Sliding(w) => 2 * w.time_difference_ms() + w.grace_ms(),
        }
    }
}

/// A grouped stream in time or sliding windows.
pub struct TimeWindowedKStream<K, V> {
    grouped: KGroupedStream<K, V>,
    windows: WindowSpec,
    emit_final: bool,
}

impl<K: Data, V: Data> TimeWindowedKStream<K, V> {
    pub(crate) fn new(grouped: KGroupedStream<K, V>, windows: WindowSpec) -> Self {
        Self {
            grouped,
            windows,
            emit_final: false,
        }
    }

    /// Emits each window's aggregate once, when the window closes (its end plus grace), in
    /// order of window start, instead of every update (Kafka's
    /// `emitStrategy(EmitStrategy.onWindowClose())`). Like Kafka, it looks for closed windows
    /// at most once a second of wall-clock time.
    pub fn emit_on_window_close(mut self) -> Self {
        self.emit_final = true;
        self
    }

    /// The number of records of each key in each window.
    pub fn count(self, materialized: Materialized<K, i64>) -> KTable<Windowed<K>, i64> {
        let materialized = Materialized {
            values: materialized.values.or(Some(Arc::new(I64Serde))),
            ..materialized
        };
        self.fold("KSTREAM-AGGREGATE-", count(), materialized)
    }

    /// Each key's values in each window combined by `reducer(aggregate, value)`, starting
    /// from the window's first value.
    pub fn reduce(
        self,
        reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
        materialized: Materialized<K, V>,
    ) -> KTable<Windowed<K>, V> {
        let materialized = Materialized {
            values: materialized.values.or(self.grouped.value_serde()),
            ..materialized
        };
        self.fold("KSTREAM-REDUCE-", reduce(reducer), materialized)
    }

    /// Each key's values in each window folded by `aggregator(key, value, aggregate)` from
    /// `initializer()`.
    pub fn aggregate<VA: Data>(
        self,
        initializer: impl Fn() -> VA + Send + Sync + 'static,
        aggregator: impl Fn(&K, V, VA) -> VA + Send + Sync + 'static,
        materialized: Materialized<K, VA>,
    ) -> KTable<Windowed<K>, VA> {
        self.fold(
            "KSTREAM-AGGREGATE-",
            aggregate(initializer, aggregator),
            materialized,
        )
    }

    fn fold<VA: Data>(
        mut self,
        prefix: &str,
        fold: Fold<K, V, VA>,
        materialized: Materialized<K, VA>,
    ) -> KTable<Windowed<K>, VA> {
        let builder = self.grouped.builder();
        let nulls = (
            Nulls::of(materialized.keys.clone().or(self.grouped.key_serde())),
            Nulls::of(self.grouped.value_serde()),
        );
        let windows = self.windows;
        let emit_final = self.emit_final.then(EmitFinal::default);
        let retention_ms = materialized
            .retention_ms
            .unwrap_or_else(|| windows.default_retention())
            .max(windows.default_retention());
        // Kafka keeps the windows of emit-on-window-close in a time-ordered store, whose reads
        // see windows starting exactly `retention` before the latest: one ms more than others.
        let kind = StoreKind::Window {
            retention_ms: retention_ms + i64::from(emit_final.is_some()),
        };
        let parts = match windows {
            WindowSpec::Time(w) => self.grouped.aggregate_node(
                prefix,
                &materialized,
                kind,
                true,
                move |store, flag| {
                    TimeWindowAggregate::new(
                        store,
                        nulls.clone(),
                        w,
                        fold.clone(),
                        flag,
                        emit_final,
                    )
                },
            ),
            WindowSpec::Sliding(w) => self.grouped.aggregate_node(
                prefix,
                &materialized,
                kind,
                true,
                move |store, flag| {
                    SlidingWindowAggregate::new(
                        store,
                        nulls.clone(),
                        w,
                        fold.clone(),
                        flag,
                        emit_final,
                    )
                },
            ),
        };
        let mut table = windowed_table(builder, parts, |keys| {
            Arc::new(TimeWindowedSerde::new(keys, windows.size())) as SerdeOf<Windowed<K>>
        });
        table.window_grace = Some(windows.grace());
        table
    }
}

fn windowed_table<K: Data, VA: Data>(
    builder: super::builder::StreamsBuilder,
    parts: Option<super::grouped::AggregateNode<K, VA>>,
    windowed: impl FnOnce(SerdeOf<K>) -> SerdeOf<Windowed<K>>,
) -> KTable<Windowed<K>, VA> {
    match parts {
        Some(p) => {
            let mut table = KTable::new(
                builder,
                p.name,
                Some(windowed(p.keys)),
                Some(p.values),
                Some(p.store),
            );
            table.send_old_values = vec![p.send_old_values];
            table
        }
        None => KTable::new(builder, String::new(), None, None, None),
    }
}

/// A grouped stream in session windows.
pub struct SessionWindowedKStream<K, V> {
    grouped: KGroupedStream<K, V>,
    windows: SessionWindows,
    emit_final: bool,
}

impl<K: Data, V: Data> SessionWindowedKStream<K, V> {
    pub(crate) fn new(grouped: KGroupedStream<K, V>, windows: SessionWindows) -> Self {
        Self {
            grouped,
            windows,
            emit_final: false,
        }
    }

    /// Emits each session's aggregate once, when it closes (its end plus the inactivity gap
    /// plus grace), in order of session end, instead of every update and without the
    /// tombstones of merged sessions (Kafka's `emitStrategy(EmitStrategy.onWindowClose())`).
    /// Like Kafka, it looks for closed sessions at most once a second of wall-clock time.
    pub fn emit_on_window_close(mut self) -> Self {
        self.emit_final = true;
        self
    }

    /// The number of records of each key in each session.
    pub fn count(self, materialized: Materialized<K, i64>) -> KTable<Windowed<K>, i64> {
        let materialized = Materialized {
            values: materialized.values.or(Some(Arc::new(I64Serde))),
            ..materialized
        };
        let merger: Merger<K, i64> = Arc::new(|_, a, b| a + b);
        self.fold("KSTREAM-AGGREGATE-", count(), merger, materialized)
    }

    /// Each key's values in each session combined by `reducer(aggregate, value)`; merged
    /// sessions combine with it too.
    pub fn reduce(
        self,
        reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
        materialized: Materialized<K, V>,
    ) -> KTable<Windowed<K>, V> {
        let materialized = Materialized {
            values: materialized.values.or(self.grouped.value_serde()),
            ..materialized
        };
        let reducer = Arc::new(reducer);
        let merge = reducer.clone();
        let merger: Merger<K, V> = Arc::new(move |_, a, b| merge(a, b));
        self.fold(
            "KSTREAM-REDUCE-",
            reduce_with(reducer),
            merger,
            materialized,
        )
    }

    /// Each key's values in each session folded by `aggregator` from `initializer()`; when
    /// sessions merge, their aggregates are combined by `merger`.
    pub fn aggregate<VA: Data>(
        self,
        initializer: impl Fn() -> VA + Send + Sync + 'static,
        aggregator: impl Fn(&K, V, VA) -> VA + Send + Sync + 'static,
        merger: impl Fn(&K, VA, VA) -> VA + Send + Sync + 'static,
        materialized: Materialized<K, VA>,
    ) -> KTable<Windowed<K>, VA> {
        let merger: Merger<K, VA> = Arc::new(merger);
        self.fold(
            "KSTREAM-AGGREGATE-",
            aggregate(initializer, aggregator),
            merger,
            materialized,
        )
    }

    fn fold<VA: Data>(
        mut self,
        prefix: &str,
        fold: Fold<K, V, VA>,
        merger: Merger<K, VA>,
        materialized: Materialized<K, VA>,
    ) -> KTable<Windowed<K>, VA> {
        let builder = self.grouped.builder();
        let nulls = (
            Nulls::of(materialized.keys.clone().or(self.grouped.key_serde())),
            Nulls::of(self.grouped.value_serde()),
        );
        let windows = self.windows;
        let emit_final = self.emit_final.then(EmitFinal::default);
        let minimum = windows.inactivity_gap_ms() + windows.grace_ms();
        let kind = StoreKind::Session {
            retention_ms: materialized.retention_ms.unwrap_or(minimum).max(minimum),
        };
        let parts =
            self.grouped
                .aggregate_node(prefix, &materialized, kind, false, move |store, flag| {
                    SessionWindowAggregate {
                        store,
                        nulls: nulls.clone(),
                        windows,
                        fold: fold.clone(),
                        merger: merger.clone(),
                        send_old_values: flag,
                        observed: -1,
                        handle: None,
                        emit_final,
                        forwarded_at_flush: false,
                    }
                });
        let mut table = windowed_table(builder, parts, |keys| {
            Arc::new(SessionWindowedSerde(keys)) as SerdeOf<Windowed<K>>
        });
        table.window_grace = Some(windows.grace_ms() + windows.inactivity_gap_ms());
        table
    }
}

fn count<K, V>() -> Fold<K, V, i64> {
    Fold::Aggregate {
        init: Arc::new(|| 0),
        step: Arc::new(|_, _, n| n + 1),
    }
}

fn reduce<K, V: 'static>(reducer: impl Fn(V, V) -> V + Send + Sync + 'static) -> Fold<K, V, V> {
    reduce_with(Arc::new(reducer))
}

fn reduce_with<K, V: 'static>(reducer: Arc<dyn Fn(V, V) -> V + Send + Sync>) -> Fold<K, V, V> {
    Fold::Reduce {
        first: Arc::new(|v| v),
        step: reducer,
    }
}

fn aggregate<K, V, VA>(
    initializer: impl Fn() -> VA + Send + Sync + 'static,
    aggregator: impl Fn(&K, V, VA) -> VA + Send + Sync + 'static,
) -> Fold<K, V, VA> {
    Fold::Aggregate {
        init: Arc::new(initializer),
        step: Arc::new(aggregator),
    }
}
