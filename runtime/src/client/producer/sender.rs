//! The sender task: takes ready batches from the accumulator, groups them by partition
//! leader into produce requests (one batch per partition per request), pipelines them on each
//! broker's connection, and settles each batch from the answer — acknowledged, sent again in
//! order after a retriable failure, or failed.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use eddy_core::wire::batch::set_producer;
use futures::stream::FuturesUnordered;
use futures::{Future, FutureExt, StreamExt};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{InitProducerIdRequest, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::accumulator::{Accumulator, Batch, Body, Membership};
use super::{ProducerId, Shared};
use crate::client::config::Acks;
use crate::client::ClientError;
use crate::time::Instant;
use kafka_protocol::error::ResponseError::{
    self, DuplicateSequenceNumber, InvalidProducerEpoch, LeaderNotAvailable, NotLeaderOrFollower,
    OutOfOrderSequenceNumber, ProducerFenced, UnknownTopicOrPartition,
};

type Answer = (Vec<Batch>, Result<ProduceResponse, ClientError>);
type InFlight = FuturesUnordered<Pin<Box<dyn Future<Output = Answer> + Send>>>;

/// Runs until the producer is closed and holds no batch.
pub(super) async fn run(shared: Arc<Shared>) {
    let mut in_flight: InFlight = FuturesUnordered::new();
    loop {
        if let Err(e) = prepare(&shared, in_flight.is_empty()).await {
            tracing::debug!("producer not ready to send: {e}");
        }
        let (requests, next_wake) = drain(&shared, Instant::now());
        let more = !requests.is_empty();
        for (node, batches) in requests {
            dispatch(&shared, node, batches, &mut in_flight).await;
        }
        while let Some(Some(answer)) = in_flight.next().now_or_never() {
            settle(&shared, answer);
        }
        if shared.closing.load(Ordering::Acquire) && in_flight.is_empty() && is_idle(&shared) {
            break;
        }
        if more {
            continue;
        }
        let sleep = tokio::time::sleep_until(
            next_wake.unwrap_or_else(|| Instant::now() + shared.config.client.retry_backoff * 10),
        );
        tokio::select! {
            Some(answer) = in_flight.next(), if !in_flight.is_empty() => settle(&shared, answer),
            () = shared.wake.notified() => {}
            () = sleep => {}
        }
    }
    shared.sender_done.store(true, Ordering::Release);
    shared.stopped.notify_waiters();
    shared.answered.notify_waiters();
}

fn is_idle(shared: &Shared) -> bool {
    shared.accumulator().is_idle()
}

/// What must happen before batches can go: a producer id for an idempotent producer (a new
/// one after an unrecoverable sequence gap, once nothing is in flight), fresh metadata, and
/// for a transactional producer the partitions added to the transaction.
async fn prepare(shared: &Shared, nothing_in_flight: bool) -> Result<(), ClientError> {
    let config = &shared.config;
    if config.idempotence && shared.transaction.is_none() {
        let reset = shared.reset_producer_id.load(Ordering::Acquire);
        if shared.producer_id() == ProducerId::NONE || (reset && nothing_in_flight) {
            let id = init_idempotent_producer_id(shared).await?;
            shared.set_producer_id(id);
            shared.reset_producer_id.store(false, Ordering::Release);
            restart_sequences(&mut shared.accumulator());
        }
    }
    shared.cluster.refresh_in_background();
    if shared.transaction.is_some() {
        super::transaction::add_registered_partitions(shared).await?;
    }
    Ok(())
}

async fn init_idempotent_producer_id(shared: &Shared) -> Result<ProducerId, ClientError> {
    let broker = shared.cluster.any_broker().await?;
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(i32::MAX)
        .with_producer_id((-1).into())
        .with_producer_epoch(-1);
    let response = shared.cluster.send(&broker, &request).await?;
    if response.error_code != 0 {
        return Err(ClientError::Refused {
            addr: broker.conn.addr().to_string(),
            what: "InitProducerId".into(),
            code: response.error_code,
        });
    }
    tracing::debug!(
        producer_id = response.producer_id.0,
        epoch = response.producer_epoch,
        "idempotent producer id"
    );
    Ok(ProducerId {
        id: response.producer_id.0,
        epoch: response.producer_epoch,
    })
}

/// Under a new producer id every partition's sequence numbers start again at 0, and batches
/// not yet acknowledged are numbered again when sent.
pub(super) fn restart_sequences(accumulator: &mut Accumulator) {
    for topic in accumulator.topics.values_mut() {
        for partition in &mut topic.partitions {
            partition.next_sequence = 0;
            partition.acked_sequence = 0;
            partition.acknowledged = false;
            for batch in &mut partition.ready {
                batch.sequence = None;
            }
        }
    }
}

/// Takes every batch that may go now, grouped by leader; says when to look again.
fn drain(shared: &Shared, now: Instant) -> (Vec<(i32, Vec<Batch>)>, Option<Instant>) {
    super::transaction::fail_unsent_if_doomed(shared);
    let config = &shared.config;
    let producer = shared.producer_id();
    let mut accumulator = shared.accumulator();
    let accumulator = &mut *accumulator;
    // Batches that waited too long fail, whatever holds them back (no producer id, no
    // metadata, no leader), unless in flight (the answer settles them).
    expire(shared, accumulator, now);
    if config.idempotence
        && (producer == ProducerId::NONE || shared.reset_producer_id.load(Ordering::Acquire))
    {
        return (Vec::new(), Some(now + config.client.retry_backoff));
    }
    let force = accumulator.flushing > 0 || shared.closing.load(Ordering::Acquire);
    let mut next_wake: Option<Instant> = None;
    let mut wake_at = |at: Instant| next_wake = Some(next_wake.map_or(at, |w| w.min(at)));
    let mut by_node: HashMap<i32, (usize, Vec<Batch>)> = HashMap::new();
    let accumulator_transactional = shared.transaction.is_some();
    for topic in accumulator.topics.values_mut() {
        let leaders = match shared.cluster.topic(&topic.name) {
            Some(Ok(meta)) => meta,
            _ => {
                shared.cluster.mark_stale();
                continue;
            }
        };
        let sticky = topic.sticky.current();
        let count = topic.partitions.len() as i32;
        for (p, queue) in topic.partitions.iter_mut().enumerate() {
            let p = p as i32;
            match queue.close_open_batch(&topic.name, p, config.linger, now, force) {
                Ok(true) if sticky == Some(p) => topic.sticky.batch_completed(count),
                Ok(_) => {}
                Err(at) => wake_at(at),
            }
            if queue.ready.is_empty() {
                continue;
            }
            if let Some(at) = queue.not_before {
                if at > now {
                    wake_at(at);
                    continue;
                }
                queue.not_before = None;
            }
            if queue.retrying && queue.in_flight > 0 {
                continue;
            }
            if accumulator_transactional && queue.membership != Membership::Added {
                continue;
            }
            let leader = leaders.leaders.get(p as usize).copied().unwrap_or(-1);
            if leader < 0 {
                shared.cluster.mark_stale();
                wake_at(now + config.client.retry_backoff);
                continue;
            }
            let (bytes, batches) = by_node.entry(leader).or_default();
            let max_in_flight = if config.idempotence && !queue.acknowledged {
                1
            } else {
                config.max_in_flight
            };
            while queue.in_flight < max_in_flight {
                let Some(front) = queue.ready.front() else {
                    break;
                };
                let size = match &front.body {
                    Body::Records(b) => b.uncompressed_size(),
                    Body::Built(b) => b.len(),
                };
                // One batch per partition per request; requests stay under max.request.size.
                if batches
                    .iter()
                    .any(|b| b.topic == topic.name && b.partition == p)
                    || (*bytes > 0 && *bytes + size > config.max_request_size)
                {
                    wake_at(now);
                    break;
                }
                let mut batch = queue.ready.pop_front().expect("checked above");
                if config.idempotence && batch.sequence.is_none() {
                    batch.sequence = Some(queue.next_sequence);
                    queue.next_sequence =
                        queue.next_sequence.wrapping_add(batch.records) & i32::MAX;
                }
                queue.retrying = false;
                queue.in_flight += 1;
                *bytes += size;
                batches.push(batch);
            }
        }
    }
    let requests = by_node
        .into_iter()
        .filter(|(_, (_, batches))| !batches.is_empty())
        .map(|(node, (_, batches))| (node, batches))
        .collect();
    (requests, next_wake)
}

/// Fails every batch not in flight that was made `delivery.timeout.ms` ago or longer (an
/// open one too). One that was sent before leaves a gap in its partition's sequence numbers:
/// an idempotent producer takes a new producer id, a transactional one bumps its epoch when
/// the transaction, which the failure dooms, is aborted.
fn expire(shared: &Shared, accumulator: &mut Accumulator, now: Instant) {
    let timeout = shared.config.delivery_timeout;
    let mut expired = Vec::new();
    for topic in accumulator.topics.values_mut() {
        for (p, queue) in topic.partitions.iter_mut().enumerate() {
            let p = i32::try_from(p).unwrap_or(i32::MAX);
            // An open batch as old as that is closed, to fail with the rest.
            let _ = queue.close_open_batch(&topic.name, p, timeout, now, false);
            while queue
                .ready
                .front()
                .is_some_and(|b| b.created + timeout <= now)
            {
                let batch = queue.ready.pop_front().expect("checked above");
                if batch.sequence.is_some() {
                    shared.reset_producer_id.store(true, Ordering::Release);
                }
                expired.push(batch);
            }
        }
    }
    if expired.is_empty() {
        return;
    }
    for batch in expired {
        tracing::warn!(
            topic = %batch.topic,
            partition = batch.partition,
            sequence = ?batch.sequence,
            attempts = batch.attempts,
            "delivery timed out"
        );
        let what = format!("delivery to {}-{}", batch.topic, batch.partition);
        complete(shared, accumulator, batch, Err(ClientError::TimedOut(what)));
    }
    shared.answered.notify_waiters();
}

/// Gives a batch's outcome to its records and its memory back to the buffer.
fn complete(
    shared: &Shared,
    accumulator: &mut Accumulator,
    batch: Batch,
    outcome: Result<i64, ClientError>,
) {
    if let (Err(e), Some(mut txn)) = (&outcome, shared.transaction()) {
        txn.batch_failed(e);
    }
    let (id, reserved) = batch.complete(outcome);
    accumulator.incomplete.remove(&id);
    shared.memory.add_permits(reserved);
}

/// Builds the request for `node`'s batches and starts it on the node's connection.
async fn dispatch(
    shared: &Arc<Shared>,
    node: i32,
    mut batches: Vec<Batch>,
    in_flight: &mut InFlight,
) {
    let producer = shared.producer_id();
    let config = &shared.config;
    let built: Result<(), ClientError> = batches.iter_mut().try_for_each(|batch| {
        let sequence = batch.sequence.unwrap_or(-1);
        let body = std::mem::replace(&mut batch.body, Body::Built(Bytes::new()));
        batch.body = Body::Built(match body {
            Body::Records(mut builder) => {
                if config.idempotence {
                    builder = builder.producer(producer.id, producer.epoch, sequence);
                }
                if shared.transaction.is_some() {
                    builder = builder.transactional();
                }
                Bytes::from(builder.build(0).map_err(|e| ClientError::Protocol {
                    addr: String::new(),
                    reason: e.to_string(),
                })?)
            }
            Body::Built(bytes)
                if config.idempotence
                    && batch.stamped != Some((producer.id, producer.epoch, sequence)) =>
            {
                // Built under an earlier producer id: stamp the new one.
                let mut copy = BytesMut::from(&bytes[..]);
                set_producer(&mut copy, producer.id, producer.epoch, sequence);
                copy.freeze()
            }
            Body::Built(bytes) => bytes,
        });
        batch.stamped = Some((producer.id, producer.epoch, sequence));
        batch.attempts += 1;
        Ok(())
    });
    if let Err(e) = built {
        in_flight.push(Box::pin(async move { (batches, Err(e)) }));
        return;
    }
    let request = produce_request(shared, &batches);
    // Never wait for a connection here: that would hold up every other broker's batches.
    let Some(broker) = shared.cluster.connected(node) else {
        let e = ClientError::NotConnected { node };
        in_flight.push(Box::pin(async move { (batches, Err(e)) }));
        return;
    };
    if config.acks == Acks::None {
        let sent = match broker.version::<ProduceRequest>() {
            Ok(version) => broker.conn.send_unanswered(version, &request).await,
            Err(e) => Err(e),
        };
        // Nothing will answer: the batches are done once written.
        let answer = sent.map(|()| ProduceResponse::default());
        in_flight.push(Box::pin(async move { (batches, answer) }));
        return;
    }
    let timeout = config.client.request_timeout;
    // A connection whose writes do not drain (the broker stopped reading) must not hold up
    // the sender either: it is closed like one that does not answer.
    let started = match broker.version::<ProduceRequest>() {
        Ok(version) => {
            match tokio::time::timeout(timeout, broker.conn.start(version, &request)).await {
                Ok(started) => started,
                Err(_) => {
                    broker.conn.close();
                    Err(ClientError::TimedOut(format!(
                        "writing to {}",
                        broker.conn.addr()
                    )))
                }
            }
        }
        Err(e) => Err(e),
    };
    match started {
        Ok(response) => in_flight.push(Box::pin(async move {
            let answer = match tokio::time::timeout(timeout, response).await {
                Ok(answer) => answer,
                Err(_) => {
                    broker.conn.close();
                    Err(ClientError::TimedOut(format!(
                        "Produce to {}",
                        broker.conn.addr()
                    )))
                }
            };
            (batches, answer)
        })),
        Err(e) => in_flight.push(Box::pin(async move { (batches, Err(e)) })),
    }
}

fn produce_request(shared: &Shared, batches: &[Batch]) -> ProduceRequest {
    let mut topics: Vec<TopicProduceData> = Vec::new();
    for batch in batches {
        let Body::Built(bytes) = &batch.body else {
            continue;
        };
        let data = PartitionProduceData::default()
            .with_index(batch.partition)
            .with_records(Some(bytes.clone()));
        match topics.iter_mut().find(|t| *t.name.0 == *batch.topic) {
            Some(topic) => topic.partition_data.push(data),
            None => topics.push(
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_string(batch.topic.to_string())))
                    .with_partition_data(vec![data]),
            ),
        }
    }
    let transactional_id = shared.transaction().map(|t| t.id().clone());
    ProduceRequest::default()
        .with_transactional_id(transactional_id)
        .with_acks(shared.config.acks.code())
        .with_timeout_ms(shared.config.client.request_timeout.as_millis() as i32)
        .with_topic_data(topics)
}

/// Settles every batch of an answered (or failed) request.
fn settle(shared: &Shared, (batches, answer): Answer) {
    let acks_none = shared.config.acks == Acks::None;
    let mut results: HashMap<(&str, i32), (i16, i64)> = HashMap::new();
    if let Ok(response) = &answer {
        for topic in &response.responses {
            for p in &topic.partition_responses {
                results.insert(
                    (topic.name.0.as_str(), p.index),
                    (p.error_code, p.base_offset),
                );
            }
        }
    }
    let mut accumulator = shared.accumulator();
    let now = Instant::now();
    for mut batch in batches {
        let outcome = match &answer {
            Err(e) => Err(e.clone()),
            Ok(_) if acks_none => Ok(-1),
            Ok(_) => match results.get(&(&*batch.topic, batch.partition)) {
                Some(&(code, base))
                    if matches!(
                        ResponseError::try_from_code(code),
                        None | Some(DuplicateSequenceNumber)
                    ) =>
                {
                    Ok(base)
                }
                Some(&(code, _)) => Err(ClientError::Refused {
                    addr: String::new(),
                    what: format!("Produce to {}-{}", batch.topic, batch.partition),
                    code,
                }),
                None => Err(ClientError::Protocol {
                    addr: String::new(),
                    reason: format!("no answer for {}-{}", batch.topic, batch.partition),
                }),
            },
        };
        let Some(queue) = accumulator.queue(&batch.topic, batch.partition) else {
            continue;
        };
        queue.in_flight = queue.in_flight.saturating_sub(1);
        let error = match outcome {
            Ok(base) => {
                if let Some(seq) = batch.sequence {
                    queue.acked_sequence = seq.wrapping_add(batch.records) & i32::MAX;
                    queue.acknowledged = true;
                }
                complete(shared, &mut accumulator, batch, Ok(base));
                continue;
            }
            Err(error) => error,
        };
        let refusal = error.error();
        if !matches!(error, ClientError::Refused { .. })
            || matches!(
                refusal,
                Some(NotLeaderOrFollower | LeaderNotAvailable | UnknownTopicOrPartition)
            )
        {
            shared.cluster.mark_stale();
        }
        // A batch behind a failed one fails out of order: it is retried after it. (One before
        // the last acknowledged can never be written: that is no gap to wait out.)
        let gap_before = refusal == Some(OutOfOrderSequenceNumber)
            && batch
                .sequence
                .is_some_and(|s| sequence_after(s, queue.acked_sequence));
        let in_time = batch.created + shared.config.delivery_timeout > now;
        if (error.is_retriable() || gap_before) && in_time && !acks_none {
            tracing::debug!(
                topic = %batch.topic,
                partition = batch.partition,
                sequence = ?batch.sequence,
                attempts = batch.attempts,
                "sending again after: {error}"
            );
            queue.retrying = true;
            queue.not_before = Some(now + shared.config.client.retry_backoff);
            queue.requeue(batch);
            continue;
        }
        let fenced = matches!(refusal, Some(ProducerFenced | InvalidProducerEpoch));
        let error = match (&shared.transaction, fenced) {
            (Some(_), true) => ClientError::Fenced {
                source: Box::new(error),
            },
            _ => error,
        };
        if batch.sequence.is_some() {
            // The sequence has a gap no retry can fill (or the broker forgot the producer,
            // UNKNOWN_PRODUCER_ID): start again under a new producer id (idempotent) or
            // epoch (transactional, once the transaction is aborted).
            shared.reset_producer_id.store(true, Ordering::Release);
        }
        batch.sequence = None;
        complete(shared, &mut accumulator, batch, Err(error));
    }
    drop(accumulator);
    shared.answered.notify_waiters();
    shared.wake.notify_one();
}

/// Whether sequence number `a` comes after `b`, sequence numbers wrapping at `i32::MAX`.
fn sequence_after(a: i32, b: i32) -> bool {
    let distance = (i64::from(a) - i64::from(b)).rem_euclid(1 << 31);
    distance != 0 && distance < 1 << 30
}

#[cfg(test)]
mod tests {
    use super::sequence_after;

    #[test]
    fn sequence_numbers_compare_across_the_wrap() {
        assert!(sequence_after(10, 5));
        assert!(!sequence_after(5, 10));
        assert!(!sequence_after(7, 7));
        assert!(sequence_after(3, i32::MAX - 2));
        assert!(!sequence_after(i32::MAX - 2, 3));
    }
}
