//! The record accumulator: records wait here, in one open batch per partition, until the
//! batch is full (`batch.size`), has lingered long enough (`linger.ms`), or a flush asks for
//! it; closed batches queue per partition in sequence order for the sender. Memory is bounded
//! by `buffer.memory`, reserved when a record is sent and given back when its batch is
//! answered.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use eddy_core::log::{partition_for_key, StickyPartitioner, Timestamp};
use eddy_core::wire::batch::BatchBuilder;
use eddy_core::wire::compression::Compression;
use futures::future::{FutureExt, Shared};
use tokio::sync::oneshot;

use super::RecordParts;
use crate::client::ClientError;
use crate::time::Instant;

/// What a batch's records learn once the broker answered: the batch's base offset (-1 when
/// the producer does not wait for acknowledgements), or why it failed.
pub(crate) type BatchOutcome = Result<i64, ClientError>;

/// The shared future of a batch's outcome, cloned into every record's delivery.
pub(crate) type OutcomeFuture = Shared<oneshot::Receiver<BatchOutcome>>;

/// The records of a batch, as appended or as built for the wire.
#[derive(Debug)]
pub(crate) enum Body {
    /// Not built yet: producer fields and CRC are written when it is first sent.
    Records(BatchBuilder),
    /// Built, and sent at least once: retries resend these bytes.
    Built(Bytes),
}

/// A closed batch on its way to the broker.
#[derive(Debug)]
pub(crate) struct Batch {
    /// Increases with every batch of the producer; flushes wait for ids below a mark.
    pub(crate) id: u64,
    pub(crate) topic: Arc<str>,
    pub(crate) partition: i32,
    pub(crate) body: Body,
    pub(crate) records: i32,
    /// The first sequence number, once the batch was sent by an idempotent producer.
    pub(crate) sequence: Option<i32>,
    pub(crate) created: Instant,
    pub(crate) attempts: u32,
    /// The producer id, epoch and sequence the built bytes carry.
    pub(crate) stamped: Option<(i64, i16, i32)>,
    /// Bytes of `buffer.memory` the batch holds.
    pub(crate) reserved: usize,
    respond: oneshot::Sender<BatchOutcome>,
}

impl Batch {
    /// Hands the outcome to every record of the batch.
    pub(crate) fn complete(self, outcome: BatchOutcome) -> (u64, usize) {
        let _ = self.respond.send(outcome);
        (self.id, self.reserved)
    }
}

/// The open batch of a partition, still taking records.
#[derive(Debug)]
struct OpenBatch {
    id: u64,
    builder: BatchBuilder,
    created: Instant,
    reserved: usize,
    respond: oneshot::Sender<BatchOutcome>,
    outcome: OutcomeFuture,
}

impl OpenBatch {
    fn close(self, topic: &Arc<str>, partition: i32) -> Batch {
        Batch {
            id: self.id,
            topic: Arc::clone(topic),
            partition,
            records: self.builder.len() as i32,
            body: Body::Records(self.builder),
            sequence: None,
            created: self.created,
            attempts: 0,
            stamped: None,
            reserved: self.reserved,
            respond: self.respond,
        }
    }
}

/// One partition's batches.
#[derive(Debug, Default)]
pub(crate) struct PartitionQueue {
    open: Option<OpenBatch>,
    /// Closed batches not in flight, in sequence order (batches to retry come first).
    pub(crate) ready: VecDeque<Batch>,
    /// Batches sent and not yet answered.
    pub(crate) in_flight: usize,
    /// The sequence number of the next new batch (idempotence).
    pub(crate) next_sequence: i32,
    /// The sequence number after the last acknowledged batch.
    pub(crate) acked_sequence: i32,
    /// A batch was acknowledged under the current producer id. Until then one batch at a
    /// time is in flight: a broker takes any first sequence number from a producer it does
    /// not know yet, so a second batch must not arrive before a first that failed.
    pub(crate) acknowledged: bool,
    /// A batch failed and waits to be sent again: nothing more is sent until every batch in
    /// flight has been answered, so that batches reach the log in order.
    pub(crate) retrying: bool,
    /// No batch is sent before this instant (retry backoff).
    pub(crate) not_before: Option<Instant>,
    /// Whether the partition is part of the open transaction (transactional producers).
    pub(crate) membership: Membership,
    /// The bytes of records its last batch held when it closed: a new batch is given room
    /// for as much (up to `batch.size`), so that a partition that fills its batches does
    /// not grow each one from nothing, copying it at every doubling, while one that sends a
    /// record at a time takes no more room than it uses.
    last_batch_bytes: usize,
}

/// A partition's place in a transactional producer's open transaction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Membership {
    /// Not in the transaction.
    #[default]
    Outside,
    /// Has records; AddPartitionsToTxn not answered yet. Its batches wait.
    Registered,
    /// Added: its batches may go.
    Added,
}

impl PartitionQueue {
    /// Whether it holds records not in flight: an open batch or batches ready.
    pub(crate) fn holds_unsent(&self) -> bool {
        self.open.is_some() || !self.ready.is_empty()
    }

    /// Puts a batch that failed back in sequence order, ahead of every later batch.
    pub(crate) fn requeue(&mut self, batch: Batch) {
        let at = match batch.sequence {
            Some(seq) => self
                .ready
                .iter()
                .position(|b| b.sequence.is_none_or(|s| s > seq))
                .unwrap_or(self.ready.len()),
            None => 0,
        };
        self.ready.insert(at, batch);
    }

    /// Closes the open batch, if there is one, and queues it.
    fn close_open(&mut self, topic: &Arc<str>, partition: i32) {
        if let Some(open) = self.open.take() {
            self.last_batch_bytes = open.builder.uncompressed_size();
            self.ready.push_back(open.close(topic, partition));
        }
    }

    /// Closes the open batch if it has lingered for `linger`, or at once with `force`;
    /// otherwise says when it will have lingered enough. `Ok(false)`: there is no open batch.
    pub(crate) fn close_open_batch(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        linger: std::time::Duration,
        now: Instant,
        force: bool,
    ) -> Result<bool, Instant> {
        match &self.open {
            Some(open) if force || open.created + linger <= now => {
                self.close_open(topic, partition);
                Ok(true)
            }
            Some(open) => Err(open.created + linger),
            None => Ok(false),
        }
    }

    /// Whether the partition holds nothing: no open, queued or unanswered batch.
    pub(crate) fn is_idle(&self) -> bool {
        !self.holds_unsent() && self.in_flight == 0
    }
}

/// One topic's partitions.
#[derive(Debug)]
pub(crate) struct TopicQueues {
    pub(crate) name: Arc<str>,
    pub(crate) partitions: Vec<PartitionQueue>,
    pub(crate) sticky: StickyPartitioner,
}

/// A record's place once appended: its batch (with the batch's future when the caller asked
/// for it) and its position in it.
pub(crate) struct Appended {
    pub(crate) partition: i32,
    /// The batch's id.
    pub(crate) batch: u64,
    pub(crate) outcome: Option<OutcomeFuture>,
    pub(crate) index: i32,
    /// The append closed a batch or opened one: the sender has something new to look at.
    pub(crate) wake_sender: bool,
}

/// Why a record was not appended.
#[derive(Debug)]
pub(crate) enum AppendError {
    /// The accumulator has not seen the topic: its metadata is needed first.
    UnknownTopic,
    /// The record cannot go (a partition the topic does not have).
    Refused(ClientError),
}

/// Every partition's batches, and what flushes wait for.
#[derive(Debug)]
pub(crate) struct Accumulator {
    /// By topic name, found for every record appended: hashed with FxHash, not SipHash (the
    /// names are the application's own, not an attacker's).
    pub(crate) topics: HashMap<String, TopicQueues, fxhash::FxBuildHasher>,
    next_batch_id: u64,
    /// Ids of batches not answered yet.
    pub(crate) incomplete: BTreeSet<u64>,
    /// A flush wants every batch sent now.
    pub(crate) flushing: usize,
    compression: Compression,
    batch_size: usize,
    /// Batches are transactional; partitions join the transaction before their batches go.
    transactional: bool,
    /// Partitions registered in the transaction and not yet added, in order.
    pub(crate) to_add: Vec<(Arc<str>, i32)>,
}

impl Accumulator {
    pub(crate) fn new(compression: Compression, batch_size: usize, transactional: bool) -> Self {
        Self {
            topics: HashMap::default(),
            next_batch_id: 0,
            incomplete: BTreeSet::new(),
            flushing: 0,
            compression,
            batch_size,
            transactional,
            to_add: Vec::new(),
        }
    }

    /// The queue of one partition.
    pub(crate) fn queue(&mut self, topic: &str, partition: i32) -> Option<&mut PartitionQueue> {
        self.topics
            .get_mut(topic)
            .and_then(|t| t.partitions.get_mut(usize::try_from(partition).ok()?))
    }

    /// Whether any batch waits, in any partition, or is in flight.
    pub(crate) fn is_idle(&self) -> bool {
        self.topics
            .values()
            .all(|t| t.partitions.iter().all(PartitionQueue::is_idle))
    }

    /// Makes room for `topic` with `partitions` partitions (more if it grew).
    pub(crate) fn add_topic(&mut self, topic: &str, partitions: i32, seed: u64) {
        let queues = self
            .topics
            .entry(topic.to_string())
            .or_insert_with(|| TopicQueues {
                name: Arc::from(topic),
                partitions: Vec::new(),
                sticky: StickyPartitioner::new(seed),
            });
        let wanted = partitions.max(0) as usize;
        if queues.partitions.len() < wanted {
            queues
                .partitions
                .resize_with(wanted, PartitionQueue::default);
        }
    }

    /// The id every batch closed so far is below: a flush waits for all of them.
    pub(crate) fn flush_mark(&self) -> u64 {
        self.next_batch_id
    }

    /// Appends `record` (`reserved` bytes of buffer memory held for it) to its partition's
    /// open batch, opening one if needed, timestamped `now` if it has no timestamp of its
    /// own; a batch that cannot take the record is closed first. The topic must have been
    /// added. `wants_outcome(partition, batch)` says whether the caller needs the batch's
    /// future (a caller that already holds it for earlier records spares a clone).
    pub(crate) fn append(
        &mut self,
        record: &RecordParts<'_>,
        now: Timestamp,
        reserved: usize,
        wants_outcome: impl FnOnce(i32, u64) -> bool,
    ) -> Result<Appended, AppendError> {
        let RecordParts {
            topic,
            partition,
            key,
            value,
            headers,
            timestamp,
        } = *record;
        let timestamp = timestamp.unwrap_or(now);
        let queues = self
            .topics
            .get_mut(topic)
            .ok_or(AppendError::UnknownTopic)?;
        let count = queues.partitions.len() as i32;
        let keyless = partition.is_none() && key.is_none();
        let mut chosen = match (partition, key) {
            (Some(p), _) if (0..count).contains(&p) => p,
            (Some(p), _) => {
                return Err(AppendError::Refused(ClientError::State(format!(
                    "partition {p} of topic {topic}, which has {count} partitions"
                ))))
            }
            (None, Some(key)) => partition_for_key(key, count),
            (None, None) => queues.sticky.partition(count),
        };
        let mut wake_sender = false;
        let record_size = key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
        let queue = &mut queues.partitions[chosen as usize];
        if let Some(open) = &queue.open {
            if !open.builder.is_empty()
                && open.builder.uncompressed_size() + record_size > self.batch_size
            {
                queue.close_open(&queues.name, chosen);
                wake_sender = true;
                if keyless {
                    queues.sticky.batch_completed(count);
                    chosen = queues.sticky.partition(count);
                }
            }
        }
        let queue = &mut queues.partitions[chosen as usize];
        if self.transactional && queue.membership == Membership::Outside {
            queue.membership = Membership::Registered;
            self.to_add.push((Arc::clone(&queues.name), chosen));
            wake_sender = true;
        }
        let open = match &mut queue.open {
            Some(open) => open,
            None => {
                let (respond, outcome) = oneshot::channel();
                let id = self.next_batch_id;
                self.next_batch_id += 1;
                self.incomplete.insert(id);
                wake_sender = true;
                queue.open.insert(OpenBatch {
                    id,
                    builder: BatchBuilder::with_capacity(
                        self.compression,
                        queue.last_batch_bytes.min(self.batch_size),
                    ),
                    created: Instant::now(),
                    reserved: 0,
                    respond,
                    outcome: outcome.shared(),
                })
            }
        };
        let index = open.builder.len() as i32;
        open.builder.append_parts(key, value, headers, timestamp);
        open.reserved += reserved;
        let batch = open.id;
        let outcome = wants_outcome(chosen, batch).then(|| open.outcome.clone());
        if open.builder.uncompressed_size() >= self.batch_size {
            queue.close_open(&queues.name, chosen);
            wake_sender = true;
            if keyless {
                queues.sticky.batch_completed(count);
            }
        }
        Ok(Appended {
            partition: chosen,
            batch,
            outcome,
            index,
            wake_sender,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BATCH_SIZE: usize = 16 << 10;

    /// Appends a record of `value` to `partition` of topic `t`.
    fn append(accumulator: &mut Accumulator, partition: i32, value: &[u8]) {
        let record = RecordParts {
            topic: "t",
            partition: Some(partition),
            key: None,
            value: Some(value),
            headers: &[],
            timestamp: Some(0),
        };
        accumulator.append(&record, 0, 0, |_, _| false).unwrap();
    }

    /// The room of `partition`'s open batch.
    fn open_room(accumulator: &mut Accumulator, partition: i32) -> usize {
        let queue = accumulator.queue("t", partition).unwrap();
        queue.open.as_ref().unwrap().builder.capacity()
    }

    #[test]
    fn a_new_batch_has_room_for_what_the_partitions_last_batch_held() {
        let mut accumulator = Accumulator::new(Compression::None, BATCH_SIZE, false);
        accumulator.add_topic("t", 2, 0);
        let value = [7u8; 100];
        // Partition 0 fills batches; partition 1 sends a record at a time.
        while accumulator.queue("t", 0).unwrap().ready.is_empty() {
            append(&mut accumulator, 0, &value);
        }
        append(&mut accumulator, 1, &value);
        let now = Instant::now();
        let queue = accumulator.queue("t", 1).unwrap();
        let name: Arc<str> = Arc::from("t");
        assert_eq!(
            queue.close_open_batch(&name, 1, std::time::Duration::ZERO, now, true),
            Ok(true)
        );

        append(&mut accumulator, 0, &value);
        append(&mut accumulator, 1, &value);
        let full = open_room(&mut accumulator, 0);
        assert!(
            (BATCH_SIZE - 200..=BATCH_SIZE).contains(&full),
            "a full partition's new batch has room for {full} bytes"
        );
        let single = open_room(&mut accumulator, 1);
        assert!(
            single < 1024,
            "a one-record batch's successor has room for {single} bytes"
        );
    }
}
