//! What an application measures: records processed and the time they took, commits and
//! their latency, each input partition's lag, restoration's progress, records dropped,
//! rebalances, and where the stream threads' time went. Each stream thread adds to the instance's `StreamsMetrics`, which
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
    /// The threads' time, by [`ThreadPart`].
    thread_nanos: [AtomicU64; ThreadPart::ALL.len()],
}

/// A snapshot of an instance's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Input records processed.
    pub records_processed: u64,
    /// The mean time a record took to process.
    pub process_latency_avg: Duration,
    /// Commits made: those that committed something (input offsets that moved, or records
    /// sent), as Kafka Streams counts them; a commit interval that passes idle is not one.
    pub commits: u64,
    /// The mean time a commit took: from its start (the caches flushed) until its offsets
    /// were committed (exactly-once, its transaction; the thread processes on meanwhile).
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
    /// Where the stream threads' time went, summed over the threads.
    pub thread_time: ThreadTime,
}

/// Where stream threads' time went, each part summed over the threads. Two snapshots'
/// difference ([`ThreadTime::since`]) says where an interval's went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThreadTime {
    /// Running records through their tasks (punctuations included), and taking up
    /// assignments.
    pub processing: Duration,
    /// Restoring stores from their changelogs (and keeping standbys up to date), waiting for
    /// changelog records included.
    pub restoring: Duration,
    /// Flushing at a commit: the record caches sending their entries down (and what they
    /// forward run through the tasks), what the tasks wrote handed to the producer,
    /// checkpoints started.
    pub flushing: Duration,
    /// Waiting on commits: for every send to be acknowledged and the input offsets committed
    /// (at-least-once), or for the last interval's transaction to commit (exactly-once,
    /// where it commits while the thread processes, and is waited for only when it is not
    /// done by the next commit or when what the tasks wrote meanwhile fills the room for it).
    pub committing: Duration,
    /// Waiting on polls that brought records: on fetches.
    pub polling: Duration,
    /// Waiting on polls that brought nothing: no input to process.
    pub idle: Duration,
}

impl ThreadTime {
    /// All the time measured.
    pub fn total(&self) -> Duration {
        self.processing
            + self.restoring
            + self.flushing
            + self.committing
            + self.polling
            + self.idle
    }

    /// The time since `earlier`, a snapshot taken before this one.
    pub fn since(&self, earlier: &ThreadTime) -> ThreadTime {
        ThreadTime {
            processing: self.processing.saturating_sub(earlier.processing),
            restoring: self.restoring.saturating_sub(earlier.restoring),
            flushing: self.flushing.saturating_sub(earlier.flushing),
            committing: self.committing.saturating_sub(earlier.committing),
            polling: self.polling.saturating_sub(earlier.polling),
            idle: self.idle.saturating_sub(earlier.idle),
        }
    }

    /// Each part's share of the total, by name (`processing`, `restoring`, `flushing`,
    /// `committing`, `polling`, `idle`); all 0 when nothing was measured.
    pub fn shares(&self) -> [(&'static str, f64); 6] {
        let total = self.total().as_secs_f64();
        let share = |d: Duration| {
            if total > 0.0 {
                d.as_secs_f64() / total
            } else {
                0.0
            }
        };
        [
            ("processing", share(self.processing)),
            ("restoring", share(self.restoring)),
            ("flushing", share(self.flushing)),
            ("committing", share(self.committing)),
            ("polling", share(self.polling)),
            ("idle", share(self.idle)),
        ]
    }
}

/// A part of a stream thread's time (see [`ThreadTime`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ThreadPart {
    Processing,
    Restoring,
    Flushing,
    Committing,
    Polling,
    Idle,
}

impl ThreadPart {
    const ALL: [ThreadPart; 6] = [
        ThreadPart::Processing,
        ThreadPart::Restoring,
        ThreadPart::Flushing,
        ThreadPart::Committing,
        ThreadPart::Polling,
        ThreadPart::Idle,
    ];

    fn name(self) -> &'static str {
        match self {
            ThreadPart::Processing => "processing",
            ThreadPart::Restoring => "restoring",
            ThreadPart::Flushing => "flushing",
            ThreadPart::Committing => "committing",
            ThreadPart::Polling => "polling",
            ThreadPart::Idle => "idle",
        }
    }
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
            thread_time: {
                let part = |p: ThreadPart| {
                    Duration::from_nanos(self.thread_nanos[p as usize].load(Ordering::Relaxed))
                };
                ThreadTime {
                    processing: part(ThreadPart::Processing),
                    restoring: part(ThreadPart::Restoring),
                    flushing: part(ThreadPart::Flushing),
                    committing: part(ThreadPart::Committing),
                    polling: part(ThreadPart::Polling),
                    idle: part(ThreadPart::Idle),
                }
            },
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
    /// The thread's time in nanoseconds, by [`ThreadPart`].
    thread_time: [Counter; ThreadPart::ALL.len()],
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
            thread_time: ThreadPart::ALL.map(|part| {
                metrics::counter!(
                    "eddy_streams_thread_time_nanoseconds_total",
                    "application" => app.clone(),
                    "thread" => thread.to_string(),
                    "part" => part.name()
                )
            }),
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

    /// The thread spent `took` on `part`.
    pub(crate) fn spent(&self, part: ThreadPart, took: Duration) {
        let n = nanos(took);
        self.shared.thread_nanos[part as usize].fetch_add(n, Ordering::Relaxed);
        self.thread_time[part as usize].increment(n);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threads_time_adds_up_by_part_and_between_snapshots() {
        let shared = std::sync::Arc::new(StreamsMetrics::default());
        let thread = ThreadMetrics::new(shared.clone(), "app", 0);
        thread.spent(ThreadPart::Processing, Duration::from_millis(30));
        let before = shared.snapshot().thread_time;
        thread.spent(ThreadPart::Processing, Duration::from_millis(30));
        thread.spent(ThreadPart::Committing, Duration::from_millis(20));
        thread.spent(ThreadPart::Flushing, Duration::from_millis(6));
        thread.spent(ThreadPart::Idle, Duration::from_millis(4));
        let now = shared.snapshot().thread_time;
        assert_eq!(now.processing, Duration::from_millis(60));
        let interval = now.since(&before);
        assert_eq!(interval.total(), Duration::from_millis(60));
        let expected = [
            ("processing", 0.5),
            ("restoring", 0.0),
            ("flushing", 0.1),
            ("committing", 1.0 / 3.0),
            ("polling", 0.0),
            ("idle", 1.0 / 15.0),
        ];
        for ((part, share), (name, expected)) in interval.shares().into_iter().zip(expected) {
            assert_eq!(part, name);
            assert!((share - expected).abs() < 1e-9, "{part}: {share}");
        }
        assert_eq!(ThreadTime::default().shares()[0], ("processing", 0.0));
    }
}
