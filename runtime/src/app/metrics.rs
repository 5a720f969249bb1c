//! What an application measures: records processed and the time they took, commits and
//! their latency, each input partition's lag, restoration's progress, records dropped and
//! rebalances. Each stream thread adds to the instance's `StreamsMetrics`, which
//! [`crate::app::Streams::metrics`] reads as a [`MetricsSnapshot`], and records the same
//! figures through the `metrics` facade (`eddy_streams_*`, labelled with the application
//! id), so that an exporter the application installs (Prometheus, say) publishes them.
//! Threads count per batch of records, never per record.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use eddy_core::log::TopicPartition;
use metrics::{Counter, Gauge, Histogram};

/// The figures of an instance, as its threads report them.
#[derive(Debug, Default)]
pub(crate) struct StreamsMetrics {
    processed: AtomicU64,
    processing_nanos: AtomicU64,
    commits: AtomicU64,
    commit_nanos: AtomicU64,
    commit_max_nanos: AtomicU64,
    rebalances: AtomicU64,
    restored: AtomicU64,
    /// Records left to restore, by thread.
    restoring: Mutex<BTreeMap<usize, u64>>,
    /// Lag of each input partition of the tasks running, by thread.
    lag: Mutex<BTreeMap<usize, BTreeMap<TopicPartition, i64>>>,
    /// Records dropped, by reason.
    dropped: Mutex<BTreeMap<String, u64>>,
}

/// A snapshot of an instance's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Input records processed.
    pub records_processed: u64,
    /// The mean time a record took to process.
    pub process_latency_avg: Duration,
    /// Commits made.
    pub commits: u64,
    /// The mean time a commit took.
    pub commit_latency_avg: Duration,
    /// The longest a commit took.
    pub commit_latency_max: Duration,
    /// Assignments taken up.
    pub rebalances: u64,
    /// Changelog records restored.
    pub records_restored: u64,
    /// Changelog records left to restore.
    pub records_to_restore: u64,
    /// How far each input partition of the tasks running is behind its end.
    pub lag: BTreeMap<TopicPartition, i64>,
    /// Records dropped, by reason: `deserialization`, `processing` and `production` (skipped
    /// by the error handlers), `late` (too late for their window).
    pub dropped_records: BTreeMap<String, u64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl StreamsMetrics {
    /// The figures now.
    pub(crate) fn snapshot(&self) -> MetricsSnapshot {
        let processed = self.processed.load(Ordering::Relaxed);
        let commits = self.commits.load(Ordering::Relaxed);
        let mean = |total: &AtomicU64, n: u64| {
            Duration::from_nanos(total.load(Ordering::Relaxed).checked_div(n).unwrap_or(0))
        };
        MetricsSnapshot {
            records_processed: processed,
            process_latency_avg: mean(&self.processing_nanos, processed),
            commits,
            commit_latency_avg: mean(&self.commit_nanos, commits),
            commit_latency_max: Duration::from_nanos(self.commit_max_nanos.load(Ordering::Relaxed)),
            rebalances: self.rebalances.load(Ordering::Relaxed),
            records_restored: self.restored.load(Ordering::Relaxed),
            records_to_restore: lock(&self.restoring).values().sum(),
            lag: lock(&self.lag)
                .values()
                .flatten()
                .map(|(tp, l)| (tp.clone(), *l))
                .collect(),
            dropped_records: lock(&self.dropped).clone(),
        }
    }
}

/// One thread's handles: the instance's figures and the facade's.
pub(crate) struct ThreadMetrics {
    shared: std::sync::Arc<StreamsMetrics>,
    thread: usize,
    application: String,
    processed: Counter,
    process_latency: Histogram,
    commits: Counter,
    commit_latency: Histogram,
    rebalances: Counter,
    restored: Counter,
    to_restore: Gauge,
    /// The lag gauge of each input partition, registered once.
    lag_gauges: std::sync::Mutex<BTreeMap<TopicPartition, Gauge>>,
}

impl ThreadMetrics {
    /// Thread `thread` of application `application`, adding to `shared`.
    pub(crate) fn new(
        shared: std::sync::Arc<StreamsMetrics>,
        application: &str,
        thread: usize,
    ) -> Self {
        let app = application.to_string();
        Self {
            shared,
            thread,
            processed: metrics::counter!("eddy_streams_records_processed_total", "application" => app.clone()),
            process_latency: metrics::histogram!("eddy_streams_process_latency_seconds", "application" => app.clone()),
            commits: metrics::counter!("eddy_streams_commits_total", "application" => app.clone()),
            commit_latency: metrics::histogram!("eddy_streams_commit_latency_seconds", "application" => app.clone()),
            rebalances: metrics::counter!("eddy_streams_rebalances_total", "application" => app.clone()),
            restored: metrics::counter!("eddy_streams_restored_records_total", "application" => app.clone()),
            to_restore: metrics::gauge!("eddy_streams_restore_remaining_records", "application" => app.clone(), "thread" => thread.to_string()),
            lag_gauges: std::sync::Mutex::new(BTreeMap::new()),
            application: app,
        }
    }

    /// `records` were processed in `took`.
    pub(crate) fn processed(&self, records: u64, took: Duration) {
        if records == 0 {
            return;
        }
        self.shared.processed.fetch_add(records, Ordering::Relaxed);
        self.shared
            .processing_nanos
            .fetch_add(nanos(took), Ordering::Relaxed);
        self.processed.increment(records);
        self.process_latency
            .record(took.as_secs_f64() / records as f64);
    }

    /// A commit took `took`.
    pub(crate) fn committed(&self, took: Duration) {
        let n = nanos(took);
        self.shared.commits.fetch_add(1, Ordering::Relaxed);
        self.shared.commit_nanos.fetch_add(n, Ordering::Relaxed);
        self.shared.commit_max_nanos.fetch_max(n, Ordering::Relaxed);
        self.commits.increment(1);
        self.commit_latency.record(took.as_secs_f64());
    }

    /// An assignment was taken up.
    pub(crate) fn rebalanced(&self) {
        self.shared.rebalances.fetch_add(1, Ordering::Relaxed);
        self.rebalances.increment(1);
    }

    /// Restoration applied `restored` more records and has `remaining` to go.
    pub(crate) fn restoring(&self, restored: u64, remaining: u64) {
        self.shared.restored.fetch_add(restored, Ordering::Relaxed);
        self.restored.increment(restored);
        lock(&self.shared.restoring).insert(self.thread, remaining);
        self.to_restore.set(remaining as f64);
    }

    /// The lag of the thread's input partitions now.
    pub(crate) fn lags(&self, lags: BTreeMap<TopicPartition, i64>) {
        let mut gauges = lock(&self.lag_gauges);
        for (tp, lag) in &lags {
            gauges
                .entry(tp.clone())
                .or_insert_with(|| {
                    metrics::gauge!(
                        "eddy_streams_consumer_lag",
                        "application" => self.application.clone(),
                        "topic" => tp.topic.to_string(),
                        "partition" => tp.partition.to_string()
                    )
                })
                .set(*lag as f64);
        }
        lock(&self.shared.lag).insert(self.thread, lags);
    }

    /// `n` more records were dropped for `reason`.
    pub(crate) fn dropped(&self, reason: &str, n: u64) {
        if n == 0 {
            return;
        }
        *lock(&self.shared.dropped)
            .entry(reason.to_string())
            .or_insert(0) += n;
        metrics::counter!(
            "eddy_streams_dropped_records_total",
            "application" => self.application.clone(),
            "reason" => reason.to_string()
        )
        .increment(n);
    }
}
