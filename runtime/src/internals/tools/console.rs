//! `eddy produce` and `eddy consume`: records from standard input to a topic, and from a
//! topic to standard output, a line each — what Kafka's console producer and consumer do,
//! on eddy's own client.

use std::collections::BTreeMap;
use std::time::Duration;

use eddy_core::log::TopicPartition;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

use crate::client::{
    ClientError, Consumer, ConsumerConfig, IsolationLevel, OffsetReset, Producer, ProducerConfig,
    ProducerRecord,
};
use crate::time::Instant;

/// Sends one record per line of `input`: `key<separator>value` when the line holds the
/// separator, else a value without a key. Waits for every acknowledgement; returns the number
/// of records written, or the first delivery that failed.
pub async fn produce(
    config: ProducerConfig,
    topic: &str,
    key_separator: Option<char>,
    input: impl AsyncBufRead + Unpin,
) -> Result<u64, ClientError> {
    let producer = Producer::new(config)?;
    let mut lines = input.lines();
    let mut deliveries = std::collections::VecDeque::new();
    let mut written = 0;
    while let Some(line) = lines
        .next_line()
        .await
        .map_err(|e| ClientError::State(format!("reading standard input: {e}")))?
    {
        let (key, value) = match key_separator.and_then(|s| line.split_once(s)) {
            Some((k, v)) => (Some(k.to_string()), v.to_string()),
            None => (None, line),
        };
        let mut record = ProducerRecord::new(topic, value);
        if let Some(k) = key {
            record = record.key(k);
        }
        deliveries.push_back(producer.send(record).await?);
        // Settle acknowledged deliveries as we go: memory stays bounded by the producer's
        // buffer, not by the input's length.
        while deliveries.len() > 100_000 {
            deliveries.pop_front().expect("not empty").await?;
            written += 1;
        }
    }
    producer.flush().await?;
    for delivery in deliveries {
        delivery.await?;
        written += 1;
    }
    producer.close().await?;
    Ok(written)
}

/// What `eddy consume` reads and how it prints it.
#[derive(Debug, Clone)]
pub struct ConsumeOptions {
    /// The topic.
    pub topic: String,
    /// Read as a member of this group (committing what was printed); without one, every
    /// partition is read.
    pub group: Option<String>,
    /// Start at the beginning of partitions without a committed offset (else at the end).
    pub from_beginning: bool,
    /// Stop after this many records.
    pub max_messages: Option<u64>,
    /// Stop when no record came for this long.
    pub idle_timeout: Option<Duration>,
    /// Which records to read.
    pub isolation: IsolationLevel,
    /// Print `partition<TAB>offset<TAB>` before each record.
    pub print_position: bool,
    /// Print `key<TAB>` before each value.
    pub print_key: bool,
}

/// Prints records of `options.topic` to `output`, a line each, until `max_messages` were
/// printed or nothing came for `idle_timeout`. Returns the number printed.
pub async fn consume(
    config: ConsumerConfig,
    options: &ConsumeOptions,
    mut output: impl AsyncWrite + Unpin,
) -> Result<u64, ClientError> {
    let mut config =
        config
            .isolation_level(options.isolation)
            .auto_offset_reset(if options.from_beginning {
                OffsetReset::Earliest
            } else {
                OffsetReset::Latest
            });
    if let Some(group) = &options.group {
        config = config.group_id(group);
    }
    let mut consumer = Consumer::new(config)?;
    match &options.group {
        Some(_) => consumer.subscribe(&[&options.topic])?,
        None => {
            let count = consumer.partition_count(&options.topic).await?;
            let all: Vec<TopicPartition> = (0..count)
                .map(|p| TopicPartition::new(options.topic.as_str(), p))
                .collect();
            consumer.assign(&all)?;
        }
    }
    let io = |e: std::io::Error| ClientError::State(format!("writing standard output: {e}"));
    let mut printed = 0u64;
    let mut last_record = Instant::now();
    let mut line = Vec::new();
    loop {
        if options.max_messages.is_some_and(|max| printed >= max) {
            break;
        }
        if options
            .idle_timeout
            .is_some_and(|idle| last_record.elapsed() >= idle)
        {
            break;
        }
        let records = consumer.poll(Duration::from_millis(200)).await?;
        if records.is_empty() {
            continue;
        }
        last_record = Instant::now();
        let mut positions = BTreeMap::new();
        for r in records {
            if options.max_messages.is_some_and(|max| printed >= max) {
                break;
            }
            line.clear();
            if options.print_position {
                line.extend_from_slice(format!("{}\t{}\t", r.partition, r.offset).as_bytes());
            }
            if options.print_key {
                line.extend_from_slice(r.key.as_deref().unwrap_or(b"null"));
                line.push(b'\t');
            }
            line.extend_from_slice(r.value.as_deref().unwrap_or(b"null"));
            line.push(b'\n');
            output.write_all(&line).await.map_err(io)?;
            positions.insert(TopicPartition::new(&*r.topic, r.partition), r.offset + 1);
            printed += 1;
        }
        output.flush().await.map_err(io)?;
        if options.group.is_some() {
            consumer.commit(&positions).await?;
        }
    }
    consumer.close().await?;
    Ok(printed)
}
