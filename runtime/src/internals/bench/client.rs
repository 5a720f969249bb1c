//! The same loads through eddy's client ([`Producer`] and [`Consumer`]) as an application
//! would send and read them: what `eddy bench produce|consume` measures by default, beside
//! librdkafka in `tests/reference/bench-client`.

use std::time::Duration;

use bytes::Bytes;
use eddy_core::log::TopicPartition;

use super::{ProduceLoad, Throughput};
use crate::client::{
    ClientError, Consumer, ConsumerConfig, OffsetReset, Producer, ProducerConfig, ProducerRecord,
    Topic,
};
use crate::time::Instant;

/// Sends `load.records` values of `load.record_size` bytes without keys, acks=all with
/// idempotence, and waits until every one is acknowledged. Batches are up to
/// `load.batch_records` records (`batch.size`), as librdkafka's defaults allow.
pub async fn produce(bootstrap: &str, load: &ProduceLoad) -> Result<Throughput, ClientError> {
    super::ensure_topic(bootstrap, load).await?;
    let batch_bytes = (load.batch_records * (load.record_size + 8)).max(16 * 1024);
    let config = ProducerConfig::new(bootstrap)
        .client_id("eddy-bench-producer")
        .compression(load.compression)
        .batch_size(batch_bytes)
        .buffer_memory((64 << 20).max(4 * batch_bytes * load.partitions.max(1) as usize))
        .linger(Duration::from_millis(5));
    let producer = Producer::new(config)?;
    let topic = Topic::from(load.topic.as_str());
    let payload: Bytes = (0..load.record_size)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let started = Instant::now();
    let mut last = None;
    for _ in 0..load.records {
        let record = ProducerRecord::new(topic.clone(), payload.clone());
        last = Some(producer.send(record).await?);
    }
    producer.flush().await?;
    if let Some(last) = last {
        last.await?;
    }
    let elapsed = started.elapsed();
    producer.close().await?;
    Ok(Throughput {
        records: load.records,
        value_bytes: load.records * load.record_size as u64,
        elapsed,
    })
}

/// Reads every partition of `topic` from its start until `records` records arrived.
pub async fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    records: u64,
    record_size: usize,
) -> Result<Throughput, ClientError> {
    let config = ConsumerConfig::new(bootstrap)
        .client_id("eddy-bench-consumer")
        .auto_offset_reset(OffsetReset::Earliest)
        .max_poll_records(10_000);
    let mut consumer = Consumer::new(config)?;
    let all: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    consumer.assign(&all)?;
    let started = Instant::now();
    let (mut seen, mut bytes) = (0u64, 0u64);
    while seen < records {
        for record in consumer.poll(Duration::from_millis(500)).await? {
            bytes += record.value.as_ref().map_or(0, |v| v.len() as u64);
            seen += 1;
        }
    }
    let elapsed = started.elapsed();
    std::hint::black_box(bytes);
    Ok(Throughput {
        records: seen,
        value_bytes: seen * record_size as u64,
        elapsed,
    })
}
