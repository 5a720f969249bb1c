//! What a stream thread sends, and its transaction (Kafka Streams' `StreamsProducer` and
//! `RecordCollector` together): the thread's producer — transactional under exactly-once,
//! replaced when it is fenced — the sends not yet acknowledged, and the changelog offsets
//! they reached, which the stores record at each commit. Under exactly-once a transaction
//! commits in the background (its acknowledgements awaited, its offsets sent, EndTxn), while
//! the thread processes the next interval's records; nothing is sent until that commit is
//! done and the next transaction begins.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use eddy_core::log::TopicPartition;
use eddy_core::streams::internals::{SinkRecord, StreamTask};
use eddy_core::streams::store::ChangelogWrites;

use super::errors::{Decision, ErrorHandlers};
use super::ThreadError;
use crate::client::{
    ClientError, Delivery, GroupMetadata, Outgoing, Producer, ProducerRecord, RecordParts, SentAll,
    Topic,
};
use crate::time::{reported, Instant, REPORT_WAITS_AFTER};

/// What a commit in the background gives: where its changelog sends reached, and when its
/// transaction committed.
type Committed = Result<(BTreeMap<TopicPartition, i64>, Instant), ThreadError>;

/// A transaction committing in the background, and the step it is at (of [`STEPS`]).
struct Committing {
    task: JoinHandle<Committed>,
    step: Arc<AtomicU8>,
}

/// The steps of a commit in the background, in order.
const STEPS: [&str; 3] = [
    "the acknowledgements of its sends",
    "its offsets to join the transaction",
    "EndTxn",
];

/// Builds the thread's producer: again after it was fenced.
pub(super) type ProducerFactory = Box<dyn Fn() -> Result<Producer, ClientError> + Send + Sync>;

/// A stream thread's producer and what is in flight on it.
pub(super) struct StreamsProducer {
    producer: Producer,
    new_producer: ProducerFactory,
    /// Whether the producer is transactional (exactly-once), and its transaction open.
    exactly_once: bool,
    in_transaction: bool,
    /// Sends not yet known to have arrived; those of changelog records with their partition.
    deliveries: Vec<(Option<TopicPartition>, Delivery)>,
    /// The offset after the last acknowledged changelog record, by changelog partition.
    changelog_reached: BTreeMap<TopicPartition, i64>,
    /// The open transaction's commit, while it is in flight.
    committing: Option<Committing>,
    /// Notified when a commit in flight is done (the thread's consumer's waker, so that a
    /// poll waiting for records ends and the thread settles the commit).
    on_commit_done: Option<Arc<Notify>>,
}

impl StreamsProducer {
    /// Starts with a producer from `new_producer`, its transactions initialized under
    /// exactly-once.
    pub(super) async fn start(
        new_producer: ProducerFactory,
        exactly_once: bool,
    ) -> Result<Self, ThreadError> {
        let producer = new_producer()?;
        if exactly_once {
            producer.init_transactions().await?;
        }
        Ok(Self {
            producer,
            new_producer,
            exactly_once,
            in_transaction: false,
            deliveries: Vec::new(),
            changelog_reached: BTreeMap::new(),
            committing: None,
            on_commit_done: None,
        })
    }

    /// `done` is notified each time a commit in the background is done, committed or not.
    pub(super) fn notify_when_committed(&mut self, done: Arc<Notify>) {
        self.on_commit_done = Some(done);
    }

    /// Whether the thread runs exactly-once.
    pub(super) fn exactly_once(&self) -> bool {
        self.exactly_once
    }

    /// Where each changelog partition's acknowledged records end.
    pub(super) fn changelog_reached(&self) -> &BTreeMap<TopicPartition, i64> {
        &self.changelog_reached
    }

    /// Whether a transaction's commit is in flight: nothing can be sent until it is done.
    pub(super) fn is_committing(&self) -> bool {
        self.committing.is_some()
    }

    /// Whether the commit in flight is done, so that [`finish_commit`](Self::finish_commit)
    /// does not wait.
    pub(super) fn commit_done(&self) -> bool {
        self.committing
            .as_ref()
            .is_some_and(|c| c.task.is_finished())
    }

    /// Opens a transaction if exactly-once needs one and none is open.
    pub(super) fn begin(&mut self) -> Result<(), ThreadError> {
        debug_assert!(self.committing.is_none(), "a send during a commit");
        if self.exactly_once && !self.in_transaction {
            self.producer.begin_transaction()?;
            self.in_transaction = true;
        }
        Ok(())
    }

    /// Sends `record` (a dead letter) in the transaction.
    pub(super) async fn send(&mut self, record: ProducerRecord) -> Result<(), ThreadError> {
        self.begin()?;
        let delivery = self.producer.send(record).await?;
        self.deliveries.push((None, delivery));
        Ok(())
    }

    /// Sends what `task` wrote — its sinks' records, then its stores' changelog records —
    /// and empties its buffers. A record the producer refuses before sending (too large,
    /// say) goes to the production handler; a changelog record it refuses fails the task, as
    /// state it holds could not be restored.
    pub(super) async fn send_written(
        &mut self,
        task: &mut StreamTask,
        errors: &mut ErrorHandlers,
    ) -> Result<(), ThreadError> {
        if task.output().is_empty() && task.changelog().is_empty() {
            return Ok(());
        }
        self.begin()?;
        let (id, partition) = (task.id(), task.id().partition);
        // Read from the task's buffers: each key and value is copied once, into its batch.
        let SentAll {
            deliveries,
            refused,
        } = self.producer.send_all(task.output().iter()).await?;
        let refused: Vec<(ProducerRecord, ClientError)> =
            refused.into_iter().map(|(r, e)| (owned(&r), e)).collect();
        task.clear_output();
        self.deliveries
            .extend(deliveries.into_iter().map(|d| (None, d)));
        for (record, e) in refused {
            match errors.on_send_error(id, &e, Some(record)) {
                Decision::Fail(_) => return Err(e.into()),
                Decision::Skip(Some(letter)) => self.send(letter).await?,
                Decision::Skip(None) => {}
            }
        }
        for (topic, batch) in task.changelog() {
            let changes = Changes {
                topic,
                partition,
                writes: batch.iter(),
            };
            let sent = self.producer.send_all(changes).await?;
            if let Some((_, e)) = sent.refused.into_iter().next() {
                return Err(e.into());
            }
            let tp = TopicPartition::new(topic, partition);
            self.deliveries
                .extend(sent.deliveries.into_iter().map(|d| (Some(tp.clone()), d)));
        }
        task.clear_changelog();
        Ok(())
    }

    /// Waits for every send in flight, noting the changelog offsets they reached; gives
    /// whether there were any.
    pub(super) async fn await_deliveries(&mut self) -> Result<bool, ThreadError> {
        let deliveries = std::mem::take(&mut self.deliveries);
        let sent = !deliveries.is_empty();
        let reached = delivered(deliveries).await?;
        self.note_reached(reached);
        Ok(sent)
    }

    fn note_reached(&mut self, reached: BTreeMap<TopicPartition, i64>) {
        for (tp, next) in reached {
            let at = self.changelog_reached.entry(tp).or_insert(next);
            *at = (*at).max(next);
        }
    }

    /// Exactly-once: starts the open transaction's commit in the background — the sends
    /// arrive, the input `offsets` join the transaction with the group's metadata, and it
    /// commits — for [`finish_commit`](Self::finish_commit) to wait for. Nothing starts when
    /// there is nothing to commit; gives whether a commit started.
    pub(super) fn start_commit(
        &mut self,
        offsets: BTreeMap<TopicPartition, i64>,
        group: Option<GroupMetadata>,
    ) -> Result<bool, ThreadError> {
        if !offsets.is_empty() {
            self.begin()?;
        }
        if !self.in_transaction {
            return Ok(false);
        }
        let group = match offsets.is_empty() {
            true => None,
            false => Some(group.ok_or_else(|| {
                ThreadError::Client(ClientError::State("the consumer has no group".into()))
            })?),
        };
        let producer = self.producer.clone();
        let deliveries = std::mem::take(&mut self.deliveries);
        let step = Arc::new(AtomicU8::new(0));
        let at = Arc::clone(&step);
        let done = self.on_commit_done.clone();
        let task = tokio::spawn(async move {
            let committed: Committed = async {
                let reached = delivered(deliveries).await?;
                at.store(1, Ordering::Relaxed);
                if let Some(group) = group {
                    producer
                        .send_offsets_to_transaction(&offsets, &group)
                        .await?;
                }
                at.store(2, Ordering::Relaxed);
                producer.commit_transaction().await?;
                Ok((reached, Instant::now()))
            }
            .await;
            if let Some(done) = done {
                done.notify_one();
            }
            committed
        });
        self.committing = Some(Committing { task, step });
        Ok(true)
    }

    /// Waits for the commit in flight, if there is one, and notes where its changelog sends
    /// reached; gives when its transaction committed (`None` without a commit in flight). A
    /// transaction that fails to commit stays open for the caller to abort, with the stores'
    /// writes.
    pub(super) async fn finish_commit(&mut self) -> Result<Option<Instant>, ThreadError> {
        let Some(mut committing) = self.committing.take() else {
            return Ok(None);
        };
        let step = &committing.step;
        let joined = reported(&mut committing.task, REPORT_WAITS_AFTER, |waited| {
            let step = STEPS[usize::from(step.load(Ordering::Relaxed))];
            tracing::warn!(?waited, "the commit in flight is still waiting for {step}");
        })
        .await;
        let (reached, committed_at) = joined.map_err(|e| {
            ThreadError::Client(ClientError::State(format!("the commit stopped: {e}")))
        })??;
        self.note_reached(reached);
        self.in_transaction = false;
        Ok(Some(committed_at))
    }

    /// Throws away what is in flight and, exactly-once, the open transaction (once a commit
    /// in flight is done: one that succeeded leaves nothing to abort).
    pub(super) async fn abort(&mut self) {
        if let Err(e) = self.finish_commit().await {
            tracing::debug!("the commit in flight failed: {e}");
        }
        self.deliveries.clear();
        if self.in_transaction {
            if let Err(abort) = self.producer.abort_transaction().await {
                tracing::warn!("aborting the transaction: {abort}");
            }
            self.in_transaction = false;
        }
    }

    /// Whether the producer was fenced: another producer took its transactional id.
    pub(super) fn is_fenced(&self) -> bool {
        self.exactly_once && self.producer.is_fenced()
    }

    /// Replaces a fenced producer with a new one, its transactions initialized.
    pub(super) async fn replace(&mut self) -> Result<(), ThreadError> {
        let old = std::mem::replace(&mut self.producer, (self.new_producer)()?);
        if let Err(e) = old.close().await {
            tracing::debug!("closing the fenced producer: {e}");
        }
        self.producer.init_transactions().await?;
        Ok(())
    }

    /// Closes the producer.
    pub(super) async fn close(&self) -> Result<(), ClientError> {
        self.producer.close().await
    }
}

/// Waits for `deliveries`: the offset after the last changelog record each changelog
/// partition's sends reached.
async fn delivered(
    deliveries: Vec<(Option<TopicPartition>, Delivery)>,
) -> Result<BTreeMap<TopicPartition, i64>, ThreadError> {
    let mut reached = BTreeMap::new();
    for (changelog, delivery) in deliveries {
        let metadata = delivery.await?;
        if let Some(tp) = changelog {
            let next = metadata.offset + 1;
            let at = reached.entry(tp).or_insert(next);
            *at = (*at).max(next);
        }
    }
    Ok(reached)
}

/// A record a task's sink wrote, read from the task's output buffer.
impl Outgoing for SinkRecord<'_> {
    fn parts(&self) -> RecordParts<'_> {
        RecordParts {
            topic: self.topic,
            partition: self.partition,
            key: self.key,
            value: self.value,
            headers: self.headers,
            timestamp: Some(self.timestamp),
        }
    }
}

/// A sink's record as one that owns its bytes: for the production handler.
fn owned(r: &SinkRecord<'_>) -> ProducerRecord {
    ProducerRecord {
        topic: Topic::from(r.topic),
        partition: r.partition,
        key: r.key.map(bytes::Bytes::copy_from_slice),
        value: r.value.map(bytes::Bytes::copy_from_slice),
        headers: r.headers.to_vec(),
        timestamp: Some(r.timestamp),
    }
}

/// A store's writes as records of its changelog partition (an iterator of a type of its
/// own, so that the thread's future may hold it across the send).
struct Changes<'a> {
    topic: &'a str,
    partition: i32,
    writes: ChangelogWrites<'a>,
}

impl<'a> Iterator for Changes<'a> {
    type Item = Change<'a>;

    fn next(&mut self) -> Option<Change<'a>> {
        let (key, value) = self.writes.next()?;
        Some(Change {
            topic: self.topic,
            partition: self.partition,
            key,
            value,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.writes.size_hint()
    }
}

/// A store write for a changelog partition, read from the store's changelog buffer.
struct Change<'a> {
    topic: &'a str,
    partition: i32,
    key: &'a [u8],
    value: Option<&'a [u8]>,
}

impl Outgoing for Change<'_> {
    fn parts(&self) -> RecordParts<'_> {
        RecordParts {
            topic: self.topic,
            partition: Some(self.partition),
            key: Some(self.key),
            value: self.value,
            headers: &[],
            timestamp: None,
        }
    }
}
