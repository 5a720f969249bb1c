//! End-to-end latency of a running streams application, as a user feels it: records written
//! at a steady rate to its input topic, each value the time it was sent (microseconds since
//! the epoch, an 8-byte big-endian long, as the exactly-once soak application reads and
//! echoes its input), and a `read_committed` consumer on an output topic that carries the
//! input's values unchanged (the soak application's `echo`). A record's latency is the time
//! from its send until the consumer has it: what the application takes, its commit interval
//! and transaction included. Whichever application runs the topology — eddy's or Kafka
//! Streams' — is measured the same way.

use std::time::Duration;

use crate::client::{
    ClientError, Consumer, ConsumerConfig, IsolationLevel, OffsetReset, Producer, ProducerConfig,
    ProducerRecord,
};
use crate::time::Instant;
use eddy_core::log::TopicPartition;

/// What a latency run writes and reads.
#[derive(Debug, Clone)]
pub struct LatencyLoad {
    /// The application's input topic.
    pub input: String,
    /// Its output topic that echoes each input value.
    pub output: String,
    /// Records per second.
    pub rate: u64,
    /// How long records are written.
    pub duration: Duration,
    /// Records written first and not measured, while the application warms up.
    pub warmup: Duration,
    /// Distinct keys, written in turn.
    pub keys: u64,
    /// How long to wait, after the last send, for the last echoes.
    pub drain: Duration,
    /// Read the output uncommitted: what the application's transactions add is left out.
    pub read_uncommitted: bool,
}

/// What a latency run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Latencies {
    /// Records written after the warmup.
    pub sent: u64,
    /// Of those, the echoes read.
    pub received: u64,
    /// The rate reached, in records per second.
    pub rate: f64,
    /// Latencies at the 50th, 99th and 99.9th percentiles, and the largest.
    pub p50: Duration,
    pub p99: Duration,
    pub p999: Duration,
    pub max: Duration,
}

/// The time since the epoch in microseconds: what each record carries.
fn now_micros() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

/// How often the writer sends a slice of the rate.
const TICK: Duration = Duration::from_millis(5);

/// Writes `load` to the application behind `bootstrap` and measures each record's time to
/// its echo. Records sent before the warmup ends are read and not counted.
pub async fn run(bootstrap: &str, load: &LatencyLoad) -> Result<Latencies, ClientError> {
    let mut consumer = Consumer::new(
        ConsumerConfig::new(bootstrap)
            .auto_offset_reset(OffsetReset::Latest)
            .isolation_level(match load.read_uncommitted {
                true => IsolationLevel::ReadUncommitted,
                false => IsolationLevel::ReadCommitted,
            }),
    )?;
    let partitions = consumer.partition_count(&load.output).await?;
    let all: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(&*load.output, p))
        .collect();
    consumer.assign(&all)?;
    consumer.seek_to_end(&all).await?;
    for tp in &all {
        consumer.position(tp).await?;
    }
    let producer = Producer::new(ProducerConfig::new(bootstrap))?;
    let measured_from = now_micros() + micros(load.warmup);
    let writer = {
        let (producer, load) = (producer.clone(), load.clone());
        tokio::spawn(async move { write_steadily(&producer, &load, measured_from).await })
    };
    let mut latencies: Vec<u32> = Vec::new();
    let mut last_echo = Instant::now();
    loop {
        for record in consumer.poll(Duration::from_millis(50)).await? {
            let Some(value) = record.value.as_deref() else {
                continue;
            };
            let Ok(bytes) = <[u8; 8]>::try_from(value) else {
                continue;
            };
            let sent = i64::from_be_bytes(bytes);
            if sent >= measured_from {
                let took = (now_micros() - sent).max(0);
                latencies.push(u32::try_from(took).unwrap_or(u32::MAX));
            }
            last_echo = Instant::now();
        }
        if writer.is_finished() && last_echo.elapsed() >= load.drain {
            break;
        }
    }
    let (sent, rate) = writer
        .await
        .map_err(|e| ClientError::State(format!("the writer stopped: {e}")))??;
    producer.close().await?;
    latencies.sort_unstable();
    let at = |share: f64| -> Duration {
        let Some(last) = latencies.len().checked_sub(1) else {
            return Duration::ZERO;
        };
        let index = ((last as f64) * share).round() as usize;
        Duration::from_micros(u64::from(latencies[index.min(last)]))
    };
    Ok(Latencies {
        sent,
        received: latencies.len() as u64,
        rate,
        p50: at(0.5),
        p99: at(0.99),
        p999: at(0.999),
        max: at(1.0),
    })
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Sends `load.rate` records a second for the warmup and `load.duration`, a slice every
/// [`TICK`], without waiting for each acknowledgement; returns the records sent from
/// `measured_from` (microseconds since the epoch) on and the rate reached.
async fn write_steadily(
    producer: &Producer,
    load: &LatencyLoad,
    measured_from: i64,
) -> Result<(u64, f64), ClientError> {
    let started = Instant::now();
    let ends = started + load.warmup + load.duration;
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let (mut written, mut measured) = (0u64, 0u64);
    let mut key = 0u64;
    while Instant::now() < ends {
        ticks.tick().await;
        // As many as the rate asks for by now: a slow tick is caught up on the next.
        let due = (started.elapsed().as_secs_f64() * load.rate as f64) as u64;
        while written < due {
            let sent = now_micros();
            let record = ProducerRecord::new(&*load.input, sent.to_be_bytes().to_vec())
                .key(format!("k{key}"));
            producer.send(record).await?;
            key = (key + 1) % load.keys.max(1);
            written += 1;
            if sent >= measured_from {
                measured += 1;
            }
        }
    }
    producer.flush().await?;
    let seconds = started.elapsed().as_secs_f64();
    Ok((measured, written as f64 / seconds.max(f64::EPSILON)))
}
