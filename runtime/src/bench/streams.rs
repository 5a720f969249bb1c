//! Streams application throughput, what `eddy bench streams` measures: the input written
//! first (keyed, fixed-size values), then an application started over it, timed from the
//! moment it runs its tasks until it has processed and committed every record. Three
//! topologies: stateless (filter, then map_values), a count by key, and a tumbling-window
//! count by key; at-least-once or exactly-once.

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::app::{Bootstrap, ProcessingGuarantee, State, Streams, StreamsConfig};
use crate::client::{
    Admin, ClientError, NewTopic, Producer, ProducerConfig, ProducerRecord, Topic,
};
use crate::serde::{BytesSerde, I64Serde, Nullable, StringSerde};
use crate::streams::windows::TimeWindows;
use crate::streams::{
    Consumed, Grouped, Materialized, Produced, StreamsBuilder, TimeWindowedSerde, Topology,
};

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

/// Writes the input, runs the application over it in `state_dir`, and measures.
pub async fn run(
    bootstrap: &str,
    load: &StreamsLoad,
    state_dir: &std::path::Path,
) -> Result<StreamsThroughput, ClientError> {
    let run_id = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros())
    );
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
    let mut streams = Streams::new(topology(load.workload, &input, &output), config)
        .map_err(|e| ClientError::Config(e.to_string()))?;
    streams
        .start()
        .await
        .map_err(|e| ClientError::State(e.to_string()))?;
    let deadline = Instant::now() + Duration::from_secs(600);
    while streams.state() != State::Running {
        if Instant::now() > deadline || streams.state() == State::Error {
            return Err(ClientError::State(format!(
                "the application is {:?}",
                streams.state()
            )));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = Instant::now();
    let before = streams.metrics();
    loop {
        let figures = streams.metrics();
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
    streams
        .close(Duration::from_secs(60))
        .await
        .map_err(|e| ClientError::State(e.to_string()))?;
    let _ = admin.delete_topics(&[&input, &output]).await;
    Ok(StreamsThroughput {
        records: figures.records_processed,
        elapsed,
        commits: figures.commits - before.commits,
    })
}

/// Writes `load.records` keyed records of `load.value_size` bytes to `topic`.
async fn write_input(bootstrap: &str, topic: &str, load: &StreamsLoad) -> Result<(), ClientError> {
    let config = ProducerConfig::new(bootstrap)
        .client_id("eddy-bench-streams-input")
        .batch_size(256 * 1024)
        .buffer_memory(128 << 20)
        .linger(Duration::from_millis(5));
    let producer = Producer::new(config)?;
    let topic = Topic::from(topic);
    let value: Bytes = (0..load.value_size)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let keys: Vec<Bytes> = (0..load.keys.max(1))
        .map(|k| Bytes::from(format!("key-{k}")))
        .collect();
    let mut last = None;
    for i in 0..load.records {
        let key = keys[(i % keys.len() as u64) as usize].clone();
        let record = ProducerRecord::new(topic.clone(), value.clone()).key(key);
        last = Some(producer.send(record).await?);
    }
    producer.flush().await?;
    if let Some(last) = last {
        last.await?;
    }
    producer.close().await
}
