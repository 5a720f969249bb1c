//! What the examples do on a broker: create their topics, write their input, run a topology
//! as an application until its input is done, and read a topic back as a `read_committed`
//! consumer sees it — so that each example is a few lines of its own story.

use std::path::Path;
use std::time::{Duration, Instant};

use eddy::app::{
    Bootstrap, CloseError, ConfigError, ProcessingGuarantee, StartError, State, Streams,
    StreamsConfig,
};
use eddy::client::{
    Admin, ClientError, Consumer, ConsumerConfig, ConsumerRecord, IsolationLevel, NewTopic,
    OffsetSpec, Producer, ProducerConfig, ProducerRecord, Topic,
};
use eddy::internals::tools::groups::GroupsError;
use eddy::log::TopicPartition;
use eddy::streams::windows::WindowError;
use eddy::streams::{Topology, TopologyError};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// What can stop an example.
#[derive(Debug, thiserror::Error)]
pub enum ExampleError {
    /// The broker could not be used.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The topology could not be built.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// The application's settings were refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The application could not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The application did not close cleanly.
    #[error(transparent)]
    Close(Box<CloseError>),
    /// The application stopped by itself.
    #[error("the application stopped: {0:?}")]
    Stopped(State),
    /// A consumer-group command failed.
    #[error(transparent)]
    Groups(#[from] GroupsError),
    /// A window was refused.
    #[error(transparent)]
    Window(#[from] WindowError),
    /// A record could not be written or read.
    #[error("{0}")]
    Serde(String),
}

/// Creates each `(topic, partitions)` unless it exists.
pub async fn create_topics(bootstrap: &str, topics: &[(&str, i32)]) -> Result<(), ClientError> {
    let admin = Admin::connect(bootstrap).await?;
    for &(name, partitions) in topics {
        admin.ensure_topic(&NewTopic::new(name, partitions)).await?;
    }
    Ok(())
}

/// Writes `(key, value, timestamp)` records to `topic`, acknowledged by the broker; how many.
pub async fn write<V: Into<Vec<u8>>>(
    bootstrap: &str,
    topic: &str,
    records: impl IntoIterator<Item = (String, V, i64)>,
) -> Result<u64, ClientError> {
    let producer = Producer::new(
        ProducerConfig::new(bootstrap)
            .client_id("eddy-examples")
            .linger(Duration::from_millis(5)),
    )?;
    let topic = Topic::from(topic);
    let mut last = None;
    let mut written = 0;
    for (key, value, at) in records {
        let record = ProducerRecord::new(topic.clone(), value.into())
            .key(key)
            .timestamp(at);
        last = Some(producer.send(record).await?);
        written += 1;
    }
    producer.flush().await?;
    if let Some(last) = last {
        last.await?;
    }
    producer.close().await?;
    Ok(written)
}

/// Writes `(key, value, timestamp)` records with values in JSON; how many.
pub async fn write_json<'a, T: Serialize + 'a>(
    bootstrap: &str,
    topic: &str,
    records: impl IntoIterator<Item = (String, &'a T, i64)>,
) -> Result<u64, ExampleError> {
    let mut encoded = Vec::new();
    for (key, value, at) in records {
        let json = serde_json::to_vec(value).map_err(|e| ExampleError::Serde(e.to_string()))?;
        encoded.push((key, json, at));
    }
    Ok(write(bootstrap, topic, encoded).await?)
}

/// The committed values of `topic` read as JSON, partition by partition.
pub async fn read_json<T: DeserializeOwned>(
    bootstrap: &str,
    topic: &str,
) -> Result<Vec<T>, ExampleError> {
    let mut values = Vec::new();
    for record in read_committed(bootstrap, topic).await? {
        let value = record.value.unwrap_or_default();
        values.push(serde_json::from_slice(&value).map_err(|e| {
            ExampleError::Serde(format!(
                "{topic} partition {} offset {}: {e}",
                record.partition, record.offset
            ))
        })?);
    }
    Ok(values)
}

/// Whether `application_id` has committed the end of every partition of `inputs`.
pub async fn caught_up(
    admin: &Admin,
    application_id: &str,
    inputs: &[TopicPartition],
) -> Result<bool, ClientError> {
    let ends = admin.list_offsets(inputs, OffsetSpec::Latest).await?;
    let committed = admin.committed_offsets(application_id).await?;
    Ok(ends
        .iter()
        .all(|(tp, &end)| end == 0 || committed.get(tp).is_some_and(|&c| c >= end)))
}

/// Every partition of `topic`.
pub async fn partitions(admin: &Admin, topic: &str) -> Result<Vec<TopicPartition>, ClientError> {
    let count = admin.partition_count(topic).await?;
    Ok((0..count).map(|p| TopicPartition::new(topic, p)).collect())
}

/// Runs `topology` as `application_id`, exactly once with its state under `state_dir` and
/// any other `settings`, until its input is done: every partition of `inputs` committed to
/// its end, no lag on the partitions it reads (its repartition topics too), and nothing
/// processed for `idle`. The input records processed.
pub async fn run_until_idle(
    topology: Topology,
    application_id: &str,
    bootstrap: &str,
    inputs: &[&str],
    state_dir: &Path,
    settings: &[(&str, &str)],
) -> Result<u64, ExampleError> {
    let idle = Duration::from_secs(1);
    let admin = Admin::connect(bootstrap).await?;
    let mut input = Vec::new();
    for topic in inputs {
        input.extend(partitions(&admin, topic).await?);
    }
    let mut config = StreamsConfig::new(application_id);
    config.bootstrap = Bootstrap::Servers(vec![bootstrap.to_string()]);
    config.processing_guarantee = ProcessingGuarantee::ExactlyOnceV2;
    config.state_dir = state_dir.to_path_buf();
    for (key, value) in settings {
        config.set(key, value)?;
    }
    let mut streams = Streams::new(topology, config)?;
    streams.start().await?;
    let mut processed = 0;
    let mut changed = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if matches!(
            streams.state(),
            State::Error | State::PendingError | State::NotRunning
        ) {
            return Err(ExampleError::Stopped(streams.state()));
        }
        let figures = streams.metrics();
        if figures.records_processed != processed {
            processed = figures.records_processed;
            changed = Instant::now();
        }
        let settled = streams.state() == State::Running && figures.lag.values().all(|&l| l == 0);
        if settled && changed.elapsed() >= idle && caught_up(&admin, application_id, &input).await?
        {
            break;
        }
    }
    streams
        .close(Duration::from_secs(30))
        .await
        .map_err(|e| ExampleError::Close(Box::new(e)))?;
    Ok(processed)
}

/// Every committed record of `topic`, partition by partition, from the beginning to the last
/// stable offset.
pub async fn read_committed(
    bootstrap: &str,
    topic: &str,
) -> Result<Vec<ConsumerRecord>, ClientError> {
    let admin = Admin::connect(bootstrap).await?;
    let partitions = partitions(&admin, topic).await?;
    let mut consumer = Consumer::new(
        ConsumerConfig::new(bootstrap)
            .client_id("eddy-examples-reader")
            .isolation_level(IsolationLevel::ReadCommitted),
    )?;
    consumer.assign(&partitions)?;
    consumer.seek_to_beginning(&partitions).await?;
    let ends = consumer.end_offsets(&partitions).await?;
    let mut records = Vec::new();
    for (tp, end) in ends {
        while consumer.position(&tp).await? < end {
            records.extend(consumer.poll(Duration::from_millis(100)).await?);
        }
    }
    records.sort_by_key(|r| (r.partition, r.offset));
    Ok(records)
}
