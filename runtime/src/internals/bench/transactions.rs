//! The transactional producer load behind `eddy bench transactions`: the same records as a
//! plain acks=all run, sent by one transactional producer in transactions of a fixed length
//! (AddPartitionsToTxn, pipelined produce requests with sequence numbers, EndTxn), so the two
//! throughputs compare in one run, and the time each EndTxn takes is measured.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
    ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::{
    ensure_topic, failed_partitions, failure, produce_request, topic_name, ProduceLoad, Throughput,
    Transactional,
};
use crate::client::{ClientError, Connection};
use crate::time::Instant;

/// What a transactional run measured.
#[derive(Debug, Clone)]
pub struct TransactionalThroughput {
    /// Records, bytes and time of the whole run.
    pub throughput: Throughput,
    /// How long each EndTxn took, in the order sent.
    pub end_txn: Vec<Duration>,
}

/// Retries `call` for up to a minute while the broker answers with a retriable error (a
/// coordinator still loading its topic, or a transaction still completing); `call` gives the
/// error code and the answer.
async fn retrying<F, Fut, T>(conn: &Connection, what: &str, mut call: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(i16, T), ClientError>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        match call().await? {
            (0, answer) => return Ok(answer),
            // CONCURRENT_TRANSACTIONS: the last transaction is still completing (Kafka writes
            // its markers after answering EndTxn), so clients retry it.
            (code, _)
                if code == ResponseError::ConcurrentTransactions.code()
                    || ResponseError::try_from_code(code).is_some_and(|e| e.is_retriable()) =>
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (code, _) => return Err(failure(conn, format!("{what} failed with error {code}"))),
        }
    }
    Err(failure(conn, format!("{what} kept failing")))
}

/// Sends `load.records` records in transactions of `transaction` each, committing each one.
pub async fn produce_transactionally(
    bootstrap: &str,
    load: &ProduceLoad,
    transactional_id: &str,
    transaction: Duration,
) -> Result<TransactionalThroughput, ClientError> {
    let conn = Connection::connect(bootstrap, "eddy-bench-transactional").await?;
    ensure_topic(bootstrap, load).await?;
    let id = TransactionalId(StrBytes::from_string(transactional_id.to_string()));
    // Kafka creates `__transaction_state` when a coordinator is first looked for.
    let find = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_string(transactional_id.to_string()))
        .with_key_type(1);
    retrying(&conn, "FindCoordinator", || async {
        Ok((conn.send(3, &find).await?.error_code, ()))
    })
    .await?;
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(id.clone()))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let producer = retrying(&conn, "InitProducerId", || async {
        let response = conn.send(3, &init).await?;
        Ok((
            response.error_code,
            (response.producer_id.0, response.producer_epoch),
        ))
    })
    .await?;
    let add_partitions = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(id.clone())
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(topic_name(&load.topic))
            .with_partitions((0..load.partitions).collect())]);
    let end_txn = EndTxnRequest::default()
        .with_transactional_id(id.clone())
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(true);
    let payload: Bytes = (0..load.record_size)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let per_request = load.batch_records as u64 * load.partitions as u64;
    let requests = load.records.div_ceil(per_request);
    // Requests are built on every core, in order, `in_flight` ahead of the sender, as the
    // plain producer's workers build theirs.
    let mut built = futures::stream::iter(0..requests)
        .map(|k| {
            let (load, payload, id, conn) =
                (load.clone(), payload.clone(), id.clone(), conn.clone());
            tokio::spawn(async move {
                let count = per_request.min(load.records - k * per_request);
                let transactional = Transactional {
                    id: &id,
                    producer,
                    request: k,
                };
                conn.encode(
                    9,
                    &produce_request(&load, &payload, count, Some(transactional))?,
                )
            })
        })
        .buffered(load.in_flight.max(1));
    let mut end_times = Vec::new();
    let mut remaining = requests;
    let started = Instant::now();
    while remaining > 0 {
        let began = Instant::now();
        retrying(&conn, "AddPartitionsToTxn", || async {
            let response = conn.send(3, &add_partitions).await?;
            let code = response
                .results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| t.results_by_partition.iter())
                .map(|p| p.partition_error_code)
                .find(|&c| c != 0)
                .unwrap_or(0);
            Ok((code, ()))
        })
        .await?;
        let mut in_flight = VecDeque::new();
        while remaining > 0 && began.elapsed() < transaction {
            let request = built
                .next()
                .await
                .ok_or_else(|| failure(&conn, "the request builder stopped".into()))?
                .map_err(|e| failure(&conn, format!("a request builder failed: {e}")))??;
            in_flight.push_back(conn.start_encoded(request).await?);
            remaining -= 1;
            if in_flight.len() >= load.in_flight.max(1) {
                check_produced(&conn, in_flight.pop_front().expect("not empty").await?)?;
            }
        }
        for response in in_flight {
            check_produced(&conn, response.await?)?;
        }
        let ending = Instant::now();
        retrying(&conn, "EndTxn", || async {
            Ok((conn.send(3, &end_txn).await?.error_code, ()))
        })
        .await?;
        end_times.push(ending.elapsed());
    }
    Ok(TransactionalThroughput {
        throughput: Throughput {
            records: load.records,
            value_bytes: load.records * load.record_size as u64,
            elapsed: started.elapsed(),
        },
        end_txn: end_times,
    })
}

fn check_produced(
    conn: &Connection,
    response: kafka_protocol::messages::ProduceResponse,
) -> Result<(), ClientError> {
    let failed = failed_partitions(&response);
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failure(
            conn,
            format!("produce failed: (partition, error) {failed:?}"),
        ))
    }
}
