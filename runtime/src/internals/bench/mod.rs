//! Load generators behind `eddy bench`: produce and consume throughput against any broker
//! that speaks the Kafka protocol, so eddy's broker and Apache Kafka's are measured by the
//! same client in the same way.
//!
//! Two kinds of load: through eddy's client, as applications use it (`client`), and raw
//! (this module): requests of one batch per partition, `in_flight` at a time, building every
//! batch (records, CRC-32C) as a client does, and a consumer that keeps one fetch in flight
//! and counts records from batch headers — the least a client can do, to measure brokers.
//! The transactional producer is in `transactions`; a streams application's throughput in
//! `streams`, its end-to-end latency in `latency`.

pub mod client;
pub mod latency;
pub mod memory;
pub mod streams;
mod transactions;

pub use transactions::{produce_transactionally, TransactionalThroughput};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eddy_core::wire::batch::{BatchBuilder, Batches};
use eddy_core::wire::compression::Compression;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    FetchRequest, ProduceRequest, ProduceResponse, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use crate::client::{Admin, ClientError, Connection, NewTopic};
use crate::time::Instant;

/// What a produce run sends.
#[derive(Debug, Clone)]
pub struct ProduceLoad {
    /// The topic, created with `partitions` partitions if it does not exist.
    pub topic: String,
    /// Partitions of the topic.
    pub partitions: i32,
    /// Records to send in all.
    pub records: u64,
    /// Bytes of each record's value (records have no key).
    pub record_size: usize,
    /// Records per batch.
    pub batch_records: usize,
    /// Produce requests under way at once.
    pub in_flight: usize,
    /// -1 (all), 1.
    pub acks: i16,
    /// Compression of the batches.
    pub compression: Compression,
}

/// What a run measured.
#[derive(Debug, Clone, Copy)]
pub struct Throughput {
    /// Records moved.
    pub records: u64,
    /// Bytes of record values moved.
    pub value_bytes: u64,
    /// Wall-clock time.
    pub elapsed: Duration,
}

impl Throughput {
    /// Records per second.
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64()
    }

    /// Megabytes (10^6 bytes) of values per second.
    pub fn mb_per_sec(&self) -> f64 {
        self.value_bytes as f64 / 1e6 / self.elapsed.as_secs_f64()
    }
}

pub(crate) fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

pub(crate) fn failure(conn: &Connection, reason: String) -> ClientError {
    ClientError::Protocol {
        addr: conn.addr().to_string(),
        reason,
    }
}

/// Creates the topic unless it exists, and waits until every partition's leader answers.
pub(crate) async fn ensure_topic(bootstrap: &str, load: &ProduceLoad) -> Result<(), ClientError> {
    Admin::connect(bootstrap)
        .await?
        .ensure_topic(&NewTopic::new(&load.topic, load.partitions))
        .await
}

/// Sends `load.records` records and waits for every acknowledgement.
pub async fn produce(bootstrap: &str, load: &ProduceLoad) -> Result<Throughput, ClientError> {
    let conn = Connection::connect(bootstrap, "eddy-bench-producer").await?;
    ensure_topic(bootstrap, load).await?;
    let per_request = load.batch_records as u64 * load.partitions as u64;
    let claimed = Arc::new(AtomicU64::new(0));
    let payload: Bytes = (0..load.record_size)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..load.in_flight.max(1) {
        let (conn, load, claimed, payload) = (
            conn.clone(),
            load.clone(),
            Arc::clone(&claimed),
            payload.clone(),
        );
        workers.push(tokio::spawn(async move {
            loop {
                let first = claimed.fetch_add(per_request, Ordering::Relaxed);
                if first >= load.records {
                    return Ok::<_, ClientError>(());
                }
                let count = per_request.min(load.records - first);
                let mut request = produce_request(&load, &payload, count, None)?;
                // Retriable errors (a partition whose leader is still starting, say) are
                // retried for the partitions that got them, as clients do.
                for attempt in 0.. {
                    let failed = failed_partitions(&conn.send(9, &request).await?);
                    if failed.is_empty() {
                        break;
                    }
                    let retriable = failed.iter().all(|&(_, code)| {
                        ResponseError::try_from_code(code).is_some_and(|e| e.is_retriable())
                    });
                    if !retriable || attempt == 50 {
                        return Err(failure(
                            &conn,
                            format!("produce failed: (partition, error) {failed:?}"),
                        ));
                    }
                    for topic in &mut request.topic_data {
                        topic
                            .partition_data
                            .retain(|d| failed.iter().any(|&(p, _)| p == d.index));
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }));
    }
    for worker in workers {
        worker
            .await
            .map_err(|e| failure(&conn, format!("a producer task failed: {e}")))??;
    }
    Ok(Throughput {
        records: load.records,
        value_bytes: load.records * load.record_size as u64,
        elapsed: started.elapsed(),
    })
}

/// The (partition, error code) of every partition a produce failed in.
pub(crate) fn failed_partitions(response: &ProduceResponse) -> Vec<(i32, i16)> {
    response
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .filter(|p| p.error_code != 0)
        .map(|p| (p.index, p.error_code))
        .collect()
}

/// The transactional producer a request's batches come from, and the request's number: every
/// request before it was full, which gives each partition's sequence numbers.
pub(crate) struct Transactional<'a> {
    pub(crate) id: &'a TransactionalId,
    pub(crate) producer: (i64, i16),
    pub(crate) request: u64,
}

/// One request of `count` records spread over the partitions, one batch each.
fn produce_request(
    load: &ProduceLoad,
    payload: &[u8],
    count: u64,
    transactional: Option<Transactional<'_>>,
) -> Result<ProduceRequest, ClientError> {
    let partitions = load.partitions as u64;
    let full = load.batch_records as u64 * partitions;
    let now = crate::time::now_ms();
    let mut data = Vec::with_capacity(load.partitions as usize);
    for p in 0..partitions {
        let n = count / partitions + u64::from(p < count % partitions);
        if n == 0 {
            continue;
        }
        let mut batch = BatchBuilder::new(load.compression);
        if let Some(t) = &transactional {
            let per_full_request = full / partitions + u64::from(p < full % partitions);
            let sequence = ((t.request * per_full_request) % (1 << 31)) as i32;
            batch = batch
                .producer(t.producer.0, t.producer.1, sequence)
                .transactional();
        }
        for _ in 0..n {
            batch.append_parts(None, Some(payload), &[], now);
        }
        let bytes = batch.build(0).map_err(|e| ClientError::Protocol {
            addr: String::new(),
            reason: e.to_string(),
        })?;
        data.push(
            PartitionProduceData::default()
                .with_index(p as i32)
                .with_records(Some(Bytes::from(bytes))),
        );
    }
    Ok(ProduceRequest::default()
        .with_transactional_id(transactional.map(|t| t.id.clone()))
        .with_acks(load.acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(&load.topic))
            .with_partition_data(data)]))
}

/// Reads every partition of `topic` from offset 0 until `records` records have arrived.
pub async fn consume(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    records: u64,
    record_size: usize,
) -> Result<Throughput, ClientError> {
    let conn = Connection::connect(bootstrap, "eddy-bench-consumer").await?;
    let mut offsets = vec![0i64; partitions as usize];
    let mut seen = 0u64;
    let started = Instant::now();
    while seen < records {
        let request = FetchRequest::default()
            .with_max_wait_ms(500)
            .with_min_bytes(1)
            // The Java consumer's defaults: fetch.max.bytes and max.partition.fetch.bytes.
            .with_max_bytes(52_428_800)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(
                    (0..partitions)
                        .map(|p| {
                            FetchPartition::default()
                                .with_partition(p)
                                .with_fetch_offset(offsets[p as usize])
                                .with_partition_max_bytes(1 << 20)
                        })
                        .collect(),
                )]);
        let response = conn.send(12, &request).await?;
        for t in &response.responses {
            for p in &t.partitions {
                if p.error_code != 0 {
                    return Err(failure(
                        &conn,
                        format!(
                            "fetch from partition {} failed with error {}",
                            p.partition_index, p.error_code
                        ),
                    ));
                }
                let Some(bytes) = &p.records else { continue };
                for batch in Batches::new(bytes) {
                    let (header, _) = batch.map_err(|e| failure(&conn, e.to_string()))?;
                    let offset = &mut offsets[p.partition_index as usize];
                    if header.next_offset() <= *offset {
                        continue;
                    }
                    seen += (header.next_offset() - header.base_offset.max(*offset)) as u64;
                    *offset = header.next_offset();
                }
            }
        }
    }
    Ok(Throughput {
        records: seen,
        value_bytes: seen * record_size as u64,
        elapsed: started.elapsed(),
    })
}
