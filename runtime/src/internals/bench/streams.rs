//! Streams application throughput, what `eddy bench streams` measures: the input written
//! first (keyed, fixed-size values), then an application started over it, timed from the
//! moment it runs its tasks until it has processed and committed every record. Three
//! topologies: stateless (filter, then map_values), a count by key, and a tumbling-window
//! count by key; at-least-once or exactly-once. With [`StreamsLoad::restore`], the
//! application is then closed, its state directory emptied and the application started
//! again, timed until it has rebuilt its stores from their changelogs and runs again.

use std::time::Duration;

use bytes::Bytes;

use crate::app::{
    Bootstrap, MetricsSnapshot, ProcessingGuarantee, Progress, State, Streams, StreamsConfig,
    ThreadTime,
};
use crate::client::{
    Admin, ClientError, NewTopic, Producer, ProducerConfig, ProducerRecord, Topic,
};
use crate::serde::{BytesSerde, I64Serde, Nullable, StringSerde};
use crate::streams::windows::TimeWindows;
use crate::streams::{
    Consumed, Grouped, Materialized, Produced, StreamsBuilder, TimeWindowedSerde, Topology,
};
use crate::time::Instant;

/// The topology measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamsWorkload {
    /// `filter` (keeps every record) then `map_values` (the value's length).
    Stateless,
    /// `group_by_key().count()`.
    CountByKey,
    /// `group_by_key().windowed_by(1 minute tumbling).count()`.
    WindowedCount,
}

impl std::str::FromStr for StreamsWorkload {
    type Err = String;

    /// By the names of `eddy bench streams --workload`: `stateless`, `count` or `windowed`.
    fn from_str(name: &str) -> Result<Self, String> {
        match name {
            "stateless" => Ok(Self::Stateless),
            "count" => Ok(Self::CountByKey),
            "windowed" => Ok(Self::WindowedCount),
            other => Err(format!(
                "expected stateless, count or windowed, not {other}"
            )),
        }
    }
}

impl StreamsWorkload {
    /// Its name, as `--workload` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Stateless => "stateless",
            Self::CountByKey => "count",
            Self::WindowedCount => "windowed",
        }
    }
}

/// What a streams run processes.
#[derive(Debug, Clone)]
pub struct StreamsLoad {
    /// The topology.
    pub workload: StreamsWorkload,
    /// Input records.
    pub records: u64,
    /// Distinct keys, spread round-robin over the records.
    pub keys: u64,
    /// Bytes of each value.
    pub value_size: usize,
    /// Partitions of the input and output topics.
    pub partitions: i32,
    /// The processing guarantee.
    pub guarantee: ProcessingGuarantee,
    /// `commit.interval.ms`; the guarantee's default when `None`.
    pub commit_interval: Option<Duration>,
    /// `num.stream.threads`.
    pub threads: usize,
    /// `state.checkpoint.interval.ms`; the default when `None`.
    pub checkpoint_interval: Option<Duration>,
    /// Whether to measure a full restore after the run (stateful workloads).
    pub restore: bool,
    /// Further settings of the application, as Kafka-style properties.
    pub properties: Vec<(String, String)>,
}

/// What a streams run measured.
#[derive(Debug, Clone, Copy)]
pub struct StreamsThroughput {
    /// Records processed.
    pub records: u64,
    /// From the application running its tasks until every record was processed and
    /// committed.
    pub elapsed: Duration,
    /// Commits made meanwhile.
    pub commits: u64,
    /// The mean time a commit took, over the application's life.
    pub commit_latency_avg: Duration,
    /// The longest commit, over the application's life.
    pub commit_latency_max: Duration,
    /// Where the stream threads' time went, from running until every record was processed
    /// and committed.
    pub thread_time: ThreadTime,
    /// The full restore that followed, when one was asked for.
    pub restore: Option<RestoreFigures>,
    /// The process's peak resident memory from the input written until the run closed, in
    /// bytes, where the system says.
    pub peak_memory: Option<u64>,
    /// The process's resident memory when the application started, the input written (what
    /// the writer left with the allocator included), in bytes, where the system says.
    pub start_memory: Option<u64>,
}

/// What a full restore measured.
#[derive(Debug, Clone, Copy)]
pub struct RestoreFigures {
    /// Changelog records restored.
    pub records: u64,
    /// From the application's start over an empty state directory until its tasks had
    /// restored their stores and were running again.
    pub elapsed: Duration,
    /// The process's peak resident memory through the restore, in bytes, where the system
    /// says.
    pub peak_memory: Option<u64>,
}

impl RestoreFigures {
    /// Records restored per second.
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64()
    }
}

impl StreamsThroughput {
    /// Records per second.
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64()
    }
}

/// The topology of `workload`, reading `input` (string keys, byte values) and writing `output`.
pub fn topology(workload: StreamsWorkload, input: &str, output: &str) -> Topology {
    let builder = StreamsBuilder::new();
    let stream = builder.stream(input, Consumed::with(StringSerde, BytesSerde));
    match workload {
        StreamsWorkload::Stateless => {
            stream
                .filter(|_k: &String, v: &Bytes| !v.is_empty())
                .map_values(|v: Bytes| v.len() as i64)
                .to(output, Produced::with(StringSerde, I64Serde));
        }
        StreamsWorkload::CountByKey => {
            stream
                .group_by_key(Grouped::with(StringSerde, BytesSerde))
                .count(Materialized::named("bench-counts"))
                .to_stream()
                .to(output, Produced::with(StringSerde, Nullable(I64Serde)));
        }
        StreamsWorkload::WindowedCount => {
            let minute = TimeWindows::of_size_with_no_grace(Duration::from_secs(60))
                .expect("a positive size");
            stream
                .group_by_key(Grouped::with(StringSerde, BytesSerde))
                .windowed_by(minute)
                .count(Materialized::named("bench-window-counts"))
                .to_stream()
                .to(
                    output,
                    Produced::with(
                        TimeWindowedSerde::new(StringSerde, 60_000),
                        Nullable(I64Serde),
                    ),
                );
        }
    }
    builder.build().expect("the bench topologies are valid")
}

/// How often a run reports its [`Progress`].
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// Watches an application's figures, handing `report` its [`Progress`] every
/// [`PROGRESS_EVERY`].
struct Watch<'a> {
    report: &'a mut dyn FnMut(Progress),
    last: MetricsSnapshot,
    at: Instant,
}

impl<'a> Watch<'a> {
    fn new(report: &'a mut dyn FnMut(Progress), streams: &Streams) -> Self {
        Self {
            report,
            last: streams.metrics(),
            at: Instant::now(),
        }
    }

    /// The figures now, reported when the time has come.
    fn figures(&mut self, streams: &Streams) -> MetricsSnapshot {
        let now = streams.metrics();
        if self.at.elapsed() >= PROGRESS_EVERY {
            (self.report)(Progress::between(&self.last, &now, self.at.elapsed()));
            self.last = now.clone();
            self.at = Instant::now();
        }
        now
    }
}

/// Starts `streams` and waits until it runs its tasks.
async fn start(streams: &mut Streams, deadline: Instant) -> Result<(), ClientError> {
    streams
        .start()
        .await
        .map_err(|e| ClientError::State(e.to_string()))?;
    while streams.state() != State::Running {
        if Instant::now() > deadline || streams.state() == State::Error {
            return Err(ClientError::State(format!(
                "the application is {:?}",
                streams.state()
            )));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// Writes the input, runs the application over it in `state_dir`, and measures; `report`
/// hears the application's progress every second.
pub async fn run(
    bootstrap: &str,
    load: &StreamsLoad,
    state_dir: &std::path::Path,
    report: &mut dyn FnMut(Progress),
) -> Result<StreamsThroughput, ClientError> {
    let run_id = format!("{:x}", crate::time::now_ms());
    let (input, output) = (format!("bench-in-{run_id}"), format!("bench-out-{run_id}"));
    let admin = Admin::connect(bootstrap).await?;
    for topic in [&input, &output] {
        admin
            .ensure_topic(&NewTopic::new(topic, load.partitions))
            .await?;
    }
    write_input(bootstrap, &input, load).await?;

    let mut config = StreamsConfig::new(format!("bench-{run_id}"));
    config.bootstrap = Bootstrap::Servers(vec![bootstrap.to_string()]);
    config.state_dir = state_dir.to_path_buf();
    config.processing_guarantee = load.guarantee;
    config.commit_interval_ms = load.commit_interval;
    config.num_stream_threads = load.threads;
    if let Some(interval) = load.checkpoint_interval {
        config.state_checkpoint_interval = interval;
    }
    for (key, value) in &load.properties {
        config.set(key, value)?;
    }
    let new_streams = || {
        Streams::new(topology(load.workload, &input, &output), config.clone())
            .map_err(ClientError::from)
    };
    let mut streams = new_streams()?;
    super::memory::reset_peak();
    let start_memory = super::memory::resident();
    let deadline = Instant::now() + Duration::from_secs(600);
    start(&mut streams, deadline).await?;
    let started = Instant::now();
    let before = streams.metrics();
    let mut watch = Watch::new(report, &streams);
    loop {
        let figures = watch.figures(&streams);
        let caught_up = figures.records_processed >= load.records
            && figures.commits > before.commits
            && !figures.lag.is_empty()
            && figures.lag.values().all(|&l| l == 0);
        if caught_up {
            break;
        }
        if Instant::now() > deadline || streams.state() == State::Error {
            return Err(ClientError::State(format!(
                "processed {} of {} records, the application {:?}",
                figures.records_processed,
                load.records,
                streams.state()
            )));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let elapsed = started.elapsed();
    let figures = streams.metrics();
    close(streams).await?;
    let peak_memory = super::memory::peak();
    let restore = if load.restore {
        Some(restore(new_streams()?, load, state_dir, watch.report).await?)
    } else {
        None
    };
    let _ = admin.delete_topics(&[&input, &output]).await;
    Ok(StreamsThroughput {
        records: figures.records_processed,
        elapsed,
        commits: figures.commits - before.commits,
        commit_latency_avg: figures.commit_latency_avg,
        commit_latency_max: figures.commit_latency_max,
        thread_time: figures.thread_time.since(&before.thread_time),
        restore,
        peak_memory,
        start_memory,
    })
}

async fn close(mut streams: Streams) -> Result<(), ClientError> {
    streams
        .close(Duration::from_secs(60))
        .await
        .map_err(|e| ClientError::State(e.to_string()))
}

/// Empties the state directory the application closed on, starts it again and times it
/// until its tasks have restored their stores and run, every input partition caught up.
async fn restore(
    mut streams: Streams,
    load: &StreamsLoad,
    state_dir: &std::path::Path,
    report: &mut dyn FnMut(Progress),
) -> Result<RestoreFigures, ClientError> {
    std::fs::remove_dir_all(state_dir).map_err(|e| {
        ClientError::State(format!("{} could not be emptied: {e}", state_dir.display()))
    })?;
    super::memory::reset_peak();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(600);
    start(&mut streams, deadline).await?;
    let partitions = usize::try_from(load.partitions).unwrap_or(0);
    let mut watch = Watch::new(report, &streams);
    loop {
        let figures = watch.figures(&streams);
        let running = figures.records_to_restore == 0
            && figures.lag.len() >= partitions
            && figures.lag.values().all(|&l| l == 0);
        if running && figures.records_restored > 0 {
            let elapsed = started.elapsed();
            close(streams).await?;
            return Ok(RestoreFigures {
                records: figures.records_restored,
                elapsed,
                peak_memory: super::memory::peak(),
            });
        }
        if Instant::now() > deadline || streams.state() == State::Error {
            return Err(ClientError::State(format!(
                "restored {} records, {} to go, the application {:?}",
                figures.records_restored,
                figures.records_to_restore,
                streams.state()
            )));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Writes `load.records` keyed records of `load.value_size` bytes to `topic`.
async fn write_input(bootstrap: &str, topic: &str, load: &StreamsLoad) -> Result<(), ClientError> {
    let config = ProducerConfig::new(bootstrap)
        .client_id("eddy-bench-streams-input")
        .batch_size(256 * 1024)
        .linger(Duration::from_millis(5));
    let producer = Producer::new(config)?;
    let topic = Topic::from(topic);
    let value: Bytes = (0..load.value_size)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    // Each key is made as it is sent: the writer holds no table of them, so that what it
    // leaves with the allocator does not count against the application's memory.
    let keys = load.keys.max(1);
    let mut last = None;
    for i in 0..load.records {
        let key = Bytes::from(format!("key-{}", i % keys));
        let record = ProducerRecord::new(topic.clone(), value.clone()).key(key);
        last = Some(producer.send(record).await?);
    }
    producer.flush().await?;
    if let Some(last) = last {
        last.await?;
    }
    producer.close().await
}
