//! [`Producer::send_all`]: many records appended under one lock and one reservation of
//! buffer memory per chunk, with one clock reading and one [`Delivery`] per batch they went
//! into, so that what a stream thread sends at each round costs little beyond encoding.

use eddy_core::log::Timestamp;

use super::accumulator::{AppendError, Appended};
use super::{ClientError, Delivery, Outgoing, Producer, ProducerRecord, Topic};
use crate::time::Instant;

/// Records appended under one lock and one reservation of buffer memory.
const CHUNK: usize = 1024;

/// What [`Producer::send_all`] did with its records.
#[derive(Debug)]
pub struct SentAll<R = ProducerRecord> {
    /// One delivery per batch the records went into, in the order the batches were first
    /// used: each resolves once its batch is answered, to the metadata of the last of these
    /// records in it (so the greatest offset they reached in each partition is that of the
    /// last delivery of the partition).
    pub deliveries: Vec<Delivery>,
    /// Records refused before they were sent (each larger than `max.request.size`), with
    /// why; the others were sent.
    pub refused: Vec<(R, ClientError)>,
}

impl<R> Default for SentAll<R> {
    fn default() -> Self {
        Self {
            deliveries: Vec::new(),
            refused: Vec::new(),
        }
    }
}

/// The delivery a partition's records go to now, by topic and partition, and its batch.
struct Slot {
    topic: Topic,
    partition: i32,
    batch: u64,
    delivery: usize,
}

/// Whether a record of `topic` appended to `batch` of `partition` starts a delivery: whether
/// the batch's future is needed.
fn starts_delivery(slots: &[Slot], topic: &str, partition: i32, batch: u64) -> bool {
    !slots
        .iter()
        .any(|s| s.partition == partition && s.batch == batch && *s.topic == *topic)
}

impl<R> SentAll<R> {
    /// Notes where a record went: the delivery of its batch now ends with it. The batch's
    /// future comes with the first record of the batch (see [`starts_delivery`]).
    fn note(&mut self, slots: &mut Vec<Slot>, topic: &str, appended: Appended) {
        let slot = slots
            .iter_mut()
            .find(|s| s.partition == appended.partition && *s.topic == *topic);
        let Some(outcome) = appended.outcome else {
            if let Some(slot) = slot {
                self.deliveries[slot.delivery].index = appended.index;
            }
            return;
        };
        let delivery = self.deliveries.len();
        match slot {
            Some(slot) => {
                slot.batch = appended.batch;
                slot.delivery = delivery;
            }
            None => slots.push(Slot {
                topic: Topic::from(topic),
                partition: appended.partition,
                batch: appended.batch,
                delivery,
            }),
        }
        self.deliveries.push(Delivery {
            partition: appended.partition,
            index: appended.index,
            outcome,
        });
    }
}

impl Producer {
    /// Appends every record to its partition's batch, as [`Producer::send`] does one at a
    /// time and in the same order, and returns one delivery per batch used instead of one
    /// per record. Returns once every record is in a batch, waiting as `send` does for
    /// buffer memory or a topic's metadata. A record larger than `max.request.size` is
    /// given back in [`SentAll::refused`]; an error that stops the producer from sending at
    /// all (closed, no transaction begun on a transactional producer, a transaction in a
    /// failed state, an unknown partition) is returned, and records before it may have been
    /// sent. No records, no checks: nothing is sent.
    ///
    /// The records may be [`ProducerRecord`]s or views of records the caller keeps in its
    /// own buffers (see [`Outgoing`]).
    pub async fn send_all<R: Outgoing>(
        &self,
        records: impl IntoIterator<Item = R>,
    ) -> Result<SentAll<R>, ClientError> {
        let mut sent = SentAll::default();
        let mut records = records.into_iter().peekable();
        if records.peek().is_none() {
            return Ok(sent);
        }
        let shared = self.shared();
        if shared.closing.load(std::sync::atomic::Ordering::Acquire) {
            return Err(ClientError::Closed);
        }
        if let Some(txn) = shared.transaction() {
            txn.check_can_send()?;
        }
        let now = crate::time::now_ms();
        let deadline = Instant::now() + shared.config.max_block;
        let mut slots = Vec::new();
        // As large as a chunk gets, or as the records are when fewer.
        let mut chunk: Vec<(R, usize)> = Vec::with_capacity(records.size_hint().0.clamp(1, CHUNK));
        while records.peek().is_some() {
            chunk.clear();
            let mut reserved = 0;
            // A chunk of many records takes at most half the buffer's memory, so that it
            // can always be had; a chunk of one takes what the record needs.
            let budget = shared.config.buffer_memory / 2;
            while let Some(size) = records.peek().map(|r| r.parts().size()) {
                if !chunk.is_empty() && reserved + size > budget {
                    break;
                }
                let Some(record) = records.next() else {
                    break;
                };
                if size > shared.config.max_request_size {
                    let refusal = ClientError::RecordTooLarge {
                        size,
                        max: shared.config.max_request_size,
                    };
                    sent.refused.push((record, refusal));
                    continue;
                }
                chunk.push((record, size));
                reserved += size;
                if chunk.len() == CHUNK {
                    break;
                }
            }
            if chunk.is_empty() {
                break;
            }
            self.append_chunk(&mut chunk, reserved, now, deadline, &mut sent, &mut slots)
                .await?;
        }
        Ok(sent)
    }

    /// Reserves `reserved` bytes of buffer memory and appends the chunk's records.
    async fn append_chunk<R: Outgoing>(
        &self,
        chunk: &mut Vec<(R, usize)>,
        reserved: usize,
        now: Timestamp,
        deadline: Instant,
        sent: &mut SentAll<R>,
        slots: &mut Vec<Slot>,
    ) -> Result<(), ClientError> {
        let shared = self.shared();
        let wanted = u32::try_from(reserved).map_err(|_| ClientError::RecordTooLarge {
            size: reserved,
            max: shared.config.max_request_size,
        })?;
        let permits = match shared.memory.try_acquire_many(wanted) {
            Ok(permits) => permits,
            Err(_) => tokio::time::timeout_at(deadline, shared.memory.acquire_many(wanted))
                .await
                .map_err(|_| ClientError::TimedOut("waiting for buffer memory".into()))?
                .map_err(|_| ClientError::Closed)?,
        };
        permits.forget();
        let mut appended_bytes = 0;
        let mut wake = false;
        let mut noted = |sent: &mut SentAll<R>,
                         slots: &mut Vec<Slot>,
                         topic: &str,
                         appended: Appended,
                         size: usize| {
            appended_bytes += size;
            wake |= appended.wake_sender;
            sent.note(slots, topic, appended);
        };
        let mut pending = chunk.drain(..);
        let outcome = 'chunk: loop {
            // Appended under one lock, up to a record of a topic not known yet.
            let unknown = {
                let mut accumulator = shared.accumulator();
                let mut unknown = None;
                for (record, size) in pending.by_ref() {
                    let parts = record.parts();
                    let wanted = |p, batch| starts_delivery(slots, parts.topic, p, batch);
                    match accumulator.append(&parts, now, size, wanted) {
                        Ok(appended) => noted(sent, slots, parts.topic, appended, size),
                        Err(AppendError::UnknownTopic) => {
                            unknown = Some((record, size));
                            break;
                        }
                        Err(AppendError::Refused(e)) => break 'chunk Err(e),
                    }
                }
                unknown
            };
            let Some((record, size)) = unknown else {
                break Ok(());
            };
            // The first record of a topic waits for its metadata outside the lock.
            let parts = record.parts();
            if let Err(e) = self.learn_topic(&Topic::from(parts.topic), deadline).await {
                break Err(e);
            }
            let wanted = |p, batch| starts_delivery(slots, parts.topic, p, batch);
            match shared.accumulator().append(&parts, now, size, wanted) {
                Ok(appended) => noted(sent, slots, parts.topic, appended, size),
                Err(AppendError::UnknownTopic) => {
                    break Err(ClientError::State(format!(
                        "topic {} has no metadata",
                        parts.topic
                    )))
                }
                Err(AppendError::Refused(e)) => break Err(e),
            }
        };
        drop(pending);
        // Each batch gives back what its records reserved when it is answered; what was
        // not appended is given back now.
        shared.memory.add_permits(reserved - appended_bytes);
        if wake {
            shared.wake.notify_one();
        }
        outcome
    }
}
