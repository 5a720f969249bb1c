//! A stream thread's tasks (Kafka Streams' `TaskManager`): the running tasks get their
//! records, what they write is sent, and they commit — input offsets and output in one
//! transaction under exactly-once, offsets after acknowledged output at-least-once. Tasks
//! being restored and standbys are the [`StateUpdater`]'s, between polls. How assignments,
//! revocations and failed commits change the tasks is in `assignment`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use eddy_core::log::TopicPartition;
use eddy_core::streams::internals::{SinkRecord, StreamTask};
use eddy_core::streams::store::Checkpoint;
use eddy_core::streams::{TaskId, Topology};

use super::errors::{Decision, ErrorHandlers};
use super::idling::Idling;
use super::ThreadError;
use crate::app::assignor::StreamsAssignor;
use crate::app::metrics::ThreadMetrics;
use crate::app::query::Hosted;
use crate::app::restore::StateUpdater;
use crate::app::StreamsConfig;
use crate::client::{
    ClientError, Consumer, Delivery, Outgoing, PartitionRun, Producer, ProducerRecord, RecordParts,
    SentAll, Topic,
};
use crate::store::SledStores;
use crate::time::Instant;

/// Builds the thread's producer: again after it was fenced.
pub(super) type ProducerFactory = Box<dyn Fn() -> Result<Producer, ClientError> + Send + Sync>;

/// The tasks of one stream thread and what is in flight for them.
pub(super) struct TaskManager {
    pub(super) topology: Arc<Topology>,
    pub(super) config: StreamsConfig,
    pub(super) stores: Arc<SledStores>,
    pub(super) assignor: Arc<StreamsAssignor>,
    pub(super) producer: Producer,
    pub(super) new_producer: ProducerFactory,
    /// Exactly-once: whether the producer is transactional, and its transaction open.
    pub(super) exactly_once: bool,
    pub(super) in_transaction: bool,
    /// The active tasks that run.
    pub(super) tasks: BTreeMap<TaskId, StreamTask>,
    /// Active tasks being restored, and standbys.
    pub(super) updater: StateUpdater,
    /// Which active task (running or restoring) reads each input partition.
    pub(super) inputs: HashMap<TopicPartition, TaskId>,
    /// Sends not yet known to have arrived.
    pub(super) deliveries: Vec<(Option<TopicPartition>, Delivery)>,
    /// The next input offset of each partition, once processed.
    pub(super) processed: BTreeMap<TopicPartition, i64>,
    /// The offset after the last acknowledged changelog record, by changelog partition.
    pub(super) changelog_reached: BTreeMap<TopicPartition, i64>,
    pub(super) last_commit: Instant,
    /// When the stores' write buffers were last applied to sled.
    pub(super) last_checkpoint: Instant,
    /// Records processed since the last commit.
    pub(super) processed_since_commit: u64,
    /// What failed inside a rebalance callback, for the thread to act on after its poll.
    pub(super) failure: Option<ThreadError>,
    /// The offset sums of state on disk that no task here holds (reported for stickiness).
    pub(super) on_disk: BTreeMap<TaskId, i64>,
    /// The sum of each held task's changelog ends, as last seen.
    pub(super) ends: BTreeMap<TaskId, i64>,
    /// Probing rebalances: this member's warmups, and when to probe.
    pub(super) probing: super::assignment::Probing,
    /// What becomes of records that fail.
    pub(super) errors: ErrorHandlers,
    /// What the instance hosts, for interactive queries, and this thread's index in it.
    pub(super) hosted: Arc<Hosted>,
    pub(super) index: usize,
    /// What the thread reports of itself.
    pub(super) metrics: ThreadMetrics,
    /// The records each task had dropped as late at the last commit.
    pub(super) late_seen: BTreeMap<TaskId, u64>,
    /// When a task waits for an empty input (`max.task.idle.ms`).
    pub(super) idling: Idling,
}

impl TaskManager {
    /// Whether the commit interval has passed since the last commit.
    pub(super) fn commit_due(&self) -> bool {
        self.last_commit.elapsed() >= self.config.commit_interval()
    }

    /// Queues polled records on their tasks: each run of one partition's records finds its
    /// task once.
    pub(super) fn route(&mut self, runs: Vec<PartitionRun>) -> Result<(), ThreadError> {
        for PartitionRun {
            topic,
            partition,
            records: run,
        } in runs
        {
            let tp = TopicPartition::new(&*topic, partition);
            // A partition without a task was revoked: its new owner reads it again. One of
            // a task being restored was polled before it was paused: queued meanwhile.
            let Some(&id) = self.inputs.get(&tp) else {
                continue;
            };
            let task = match self.tasks.get_mut(&id) {
                Some(task) => task,
                None => match self.updater.restoring_task(id) {
                    Some(task) => task,
                    None => continue,
                },
            };
            let id = task.id();
            let next = run.last().map(|(offset, _)| offset + 1);
            task.add_records(&topic, run)
                .map_err(|source| ThreadError::Task { task: id, source })?;
            if let Some(next) = next {
                self.processed.insert(tp, next);
            }
        }
        Ok(())
    }

    /// Runs the queued records through their tasks — a task reading several partitions
    /// only while the next record by timestamp is known, see [`Idling`] — and sends what the
    /// tasks wrote.
    pub(super) async fn process(&mut self, consumer: &Consumer) -> Result<(), ThreadError> {
        let now = crate::time::now_ms();
        let started = Instant::now();
        let mut processed = 0;
        let mut dead_letters = Vec::new();
        let lag = |tp: &TopicPartition| consumer.lag(tp);
        for (id, task) in &mut self.tasks {
            let _span = tracing::trace_span!("task", task = %id).entered();
            let failed = |source| ThreadError::Task { task: *id, source };
            task.set_wall_clock(now).map_err(failed)?;
            let mut verdicts = Vec::new();
            loop {
                if !self.idling.ready(task, &lag, started, &mut verdicts) {
                    break;
                }
                match task.process() {
                    Ok(true) => processed += 1,
                    Ok(false) => break,
                    Err(e) => {
                        let record = task.take_failed_record();
                        match self.errors.on_record_error(*id, &e, record) {
                            Decision::Fail(None) => return Err(failed(e)),
                            Decision::Fail(Some(record)) => {
                                return Err(ThreadError::Record {
                                    task: *id,
                                    topic: record.topic.to_string(),
                                    partition: record.partition,
                                    offset: record.offset,
                                    origin: record.origin,
                                    processor: record.processor,
                                    source: e,
                                })
                            }
                            Decision::Skip(letter) => dead_letters.extend(letter),
                        }
                    }
                }
            }
            task.check_stores().map_err(failed)?;
        }
        self.processed_since_commit += processed;
        self.metrics.processed(processed, started.elapsed());
        for (kind, n) in std::mem::take(&mut self.errors.dropped) {
            self.metrics.dropped(kind, n);
        }
        if !dead_letters.is_empty() {
            self.begin()?;
            for letter in dead_letters {
                self.deliveries
                    .push((None, self.producer.send(letter).await?));
            }
        }
        self.send_written().await
    }

    /// Gives the state updater a poll (waiting up to `wait` for changelog records) and runs
    /// the tasks whose restoration finished.
    pub(super) async fn update_state(
        &mut self,
        consumer: &mut Consumer,
        wait: Duration,
    ) -> Result<(), ThreadError> {
        for task in self.updater.poll(wait).await? {
            self.run_task(consumer, task)?;
        }
        let (restored, remaining) = self.updater.take_progress();
        if restored > 0 || remaining > 0 {
            self.metrics.restoring(restored, remaining);
        }
        Ok(())
    }

    /// Opens a transaction if exactly-once needs one and none is open.
    fn begin(&mut self) -> Result<(), ThreadError> {
        if self.exactly_once && !self.in_transaction {
            self.producer.begin_transaction()?;
            self.in_transaction = true;
        }
        Ok(())
    }

    /// Sends the tasks' output and changelog records, and forgets them.
    async fn send_written(&mut self) -> Result<(), ThreadError> {
        let written = self
            .tasks
            .values()
            .any(|t| !t.output().is_empty() || !t.changelog().is_empty());
        if written {
            self.begin()?;
        }
        for task in self.tasks.values_mut() {
            let (id, partition) = (task.id(), task.id().partition);
            // Read from the task's buffers: each key and value is copied once, into its batch.
            // (Collected first: an iterator's closure held across the send would tie the
            // thread's future to one lifetime.)
            let outputs: Vec<Output<'_>> = task.output().iter().map(Output).collect();
            let SentAll {
                deliveries,
                refused,
            } = self.producer.send_all(outputs).await?;
            // Refused before they were sent (too large, say): the handler decides.
            let refused: Vec<(ProducerRecord, ClientError)> = refused
                .into_iter()
                .map(|(r, e)| (r.to_producer_record(), e))
                .collect();
            task.clear_output();
            self.deliveries
                .extend(deliveries.into_iter().map(|d| (None, d)));
            for (record, e) in refused {
                match self.errors.on_send_error(id, &e, Some(record)) {
                    Decision::Fail(_) => return Err(e.into()),
                    Decision::Skip(Some(letter)) => self
                        .deliveries
                        .push((None, self.producer.send(letter).await?)),
                    Decision::Skip(None) => {}
                }
            }
            for (topic, batch) in task.changelog() {
                let tp = TopicPartition::new(topic, partition);
                let changes: Vec<Change<'_>> = batch
                    .iter()
                    .map(|(key, value)| Change {
                        topic,
                        partition,
                        key,
                        value,
                    })
                    .collect();
                let sent = self.producer.send_all(changes).await?;
                if let Some((_, e)) = sent.refused.into_iter().next() {
                    // A change the changelog cannot take is state that could not be restored.
                    return Err(e.into());
                }
                self.deliveries
                    .extend(sent.deliveries.into_iter().map(|d| (Some(tp.clone()), d)));
            }
            task.clear_changelog();
        }
        Ok(())
    }

    /// Waits for every send, then commits the input offsets processed (in the transaction,
    /// exactly-once) and records in each store the changelog offset it reached (applying its
    /// write buffer, exactly-once).
    pub(super) async fn commit(&mut self, consumer: &mut Consumer) -> Result<(), ThreadError> {
        let started = Instant::now();
        for task in self.tasks.values_mut() {
            let id = task.id();
            task.flush_stores()
                .map_err(|source| ThreadError::Task { task: id, source })?;
        }
        self.send_written().await?;
        let offsets = self.committable(consumer).await;
        if self.exactly_once {
            if !offsets.is_empty() {
                self.begin()?;
            }
            if self.in_transaction {
                if let Err(e) = self.commit_transaction(consumer, &offsets).await {
                    self.abort().await;
                    return Err(e);
                }
                self.in_transaction = false;
            }
        } else {
            self.await_deliveries().await?;
            if !offsets.is_empty() {
                consumer.commit(&offsets).await?;
            }
        }
        let checkpoint = self.checkpoint_due();
        for (id, task) in &mut self.tasks {
            let partition = task.id().partition;
            let reached = &self.changelog_reached;
            task.commit_stores(|topic| {
                reached.get(&TopicPartition::new(topic, partition)).copied()
            });
            if let Some(when) = checkpoint {
                task.checkpoint_stores(when);
            }
            let end: i64 = task
                .logged_stores()
                .filter_map(|(_, store)| store.changelog_offset())
                .sum();
            self.ends.insert(*id, end);
        }
        self.updater.commit(checkpoint.is_some()).await?;
        self.report_owned().await;
        self.last_commit = Instant::now();
        if checkpoint.is_some() {
            self.last_checkpoint = self.last_commit;
        }
        self.processed_since_commit = 0;
        self.metrics.committed(started.elapsed());
        self.report_figures(consumer);
        Ok(())
    }

    /// Whether this commit applies the write buffers to sled: once
    /// `state.checkpoint.interval.ms` has passed (a second while interactive queries come,
    /// as they read sled), or when nothing was processed since the last commit (an idle
    /// thread has nothing to coalesce, and its state on disk catches up), unless a store's
    /// last checkpoint is still landing; and without fail, waiting for the last, once they
    /// hold `state.checkpoint.max.bytes`.
    fn checkpoint_due(&mut self) -> Option<Checkpoint> {
        let held: usize = self.tasks.values_mut().map(|t| t.held_bytes()).sum();
        let interval = self
            .hosted
            .checkpoint_interval(self.config.state_checkpoint_interval);
        if held >= self.config.state_checkpoint_max_bytes {
            Some(Checkpoint::Wait)
        } else if self.processed_since_commit == 0 || self.last_checkpoint.elapsed() >= interval {
            Some(Checkpoint::IfLanded)
        } else {
            None
        }
    }

    /// Reports the input partitions' lag and the records the tasks dropped as late.
    fn report_figures(&mut self, consumer: &Consumer) {
        let lags = self
            .inputs
            .iter()
            .filter(|(_, id)| self.tasks.contains_key(id))
            .filter_map(|(tp, _)| Some((tp.clone(), consumer.lag(tp)?)))
            .collect();
        self.metrics.lags(lags);
        let mut late = 0;
        for (id, task) in &self.tasks {
            let total: u64 = task.dropped_records().iter().map(|(_, n)| n).sum();
            let seen = self.late_seen.insert(*id, total).unwrap_or(0);
            late += total.saturating_sub(seen);
        }
        self.late_seen.retain(|id, _| self.tasks.contains_key(id));
        self.metrics.dropped("late", late);
    }

    /// Exactly-once: throws the open transaction away, with the stores' write buffers.
    pub(super) async fn abort(&mut self) {
        for task in self.tasks.values_mut() {
            task.abort_stores();
        }
        self.deliveries.clear();
        if self.in_transaction {
            if let Err(abort) = self.producer.abort_transaction().await {
                tracing::warn!("aborting the transaction: {abort}");
            }
            self.in_transaction = false;
        }
    }

    /// The offset to commit for each input partition: the first record its task still has
    /// queued (a task waiting for another input leaves records unprocessed), or else the
    /// consumer's position, as Kafka Streams commits it (every record polled is processed,
    /// and the position is past the transaction markers that follow the last one, so a
    /// caught-up application shows no lag), or after the last record polled where the
    /// position is not known.
    async fn committable(&mut self, consumer: &mut Consumer) -> BTreeMap<TopicPartition, i64> {
        let mut offsets = BTreeMap::new();
        let mut inputs = Vec::new();
        for (tp, id) in &self.inputs {
            let Some(task) = self.tasks.get(id) else {
                continue;
            };
            match task.next_queued_offset(&tp.topic) {
                Some(waiting) => {
                    offsets.insert(tp.clone(), waiting);
                }
                None => inputs.push(tp.clone()),
            }
        }
        for tp in inputs {
            let processed = self.processed.get(&tp).copied();
            let position = match processed {
                // Nothing read from it yet: its committed offset stands.
                None => None,
                Some(_) => consumer.position(&tp).await.ok(),
            };
            if let Some(offset) = processed.max(position) {
                offsets.insert(tp, offset);
            }
        }
        offsets
    }

    /// Exactly-once: the sends arrived, the offsets join the transaction, it commits.
    async fn commit_transaction(
        &mut self,
        consumer: &Consumer,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), ThreadError> {
        self.await_deliveries().await?;
        if !offsets.is_empty() {
            let group = consumer.group_metadata().ok_or_else(|| {
                ThreadError::Client(ClientError::State("the consumer has no group".into()))
            })?;
            self.producer
                .send_offsets_to_transaction(offsets, &group)
                .await?;
        }
        self.producer.commit_transaction().await?;
        Ok(())
    }

    /// Waits for every send, noting the changelog offsets they reached.
    async fn await_deliveries(&mut self) -> Result<(), ThreadError> {
        for (changelog, delivery) in self.deliveries.drain(..) {
            let metadata = delivery.await?;
            if let Some(tp) = changelog {
                let next = metadata.offset + 1;
                let reached = self.changelog_reached.entry(tp).or_insert(next);
                *reached = (*reached).max(next);
            }
        }
        Ok(())
    }
}

/// A record a task's sink wrote, read from the task's output buffer.
struct Output<'a>(SinkRecord<'a>);

impl Outgoing for Output<'_> {
    fn parts(&self) -> RecordParts<'_> {
        let r = &self.0;
        RecordParts {
            topic: r.topic,
            partition: r.partition,
            key: r.key,
            value: r.value,
            headers: r.headers,
            timestamp: Some(r.timestamp),
        }
    }
}

impl Output<'_> {
    /// The record as one that owns its bytes: for the production handler.
    fn to_producer_record(&self) -> ProducerRecord {
        let r = &self.0;
        ProducerRecord {
            topic: Topic::from(r.topic),
            partition: r.partition,
            key: r.key.map(bytes::Bytes::copy_from_slice),
            value: r.value.map(bytes::Bytes::copy_from_slice),
            headers: r.headers.to_vec(),
            timestamp: Some(r.timestamp),
        }
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
