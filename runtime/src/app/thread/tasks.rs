//! A stream thread's tasks (Kafka Streams' `TaskManager`): the running tasks get their
//! records, what they write is sent, and they commit — input offsets and output in one
//! transaction under exactly-once, offsets after acknowledged output at-least-once. The
//! manager's state is split by concern, each part with its own methods: the producer and its
//! transaction (`output`), the input partitions (`inputs`), the commit and checkpoint times
//! (`schedule`), the state held for the assignor (`held`) and probing rebalances
//! (`assignment`). Tasks being restored and standbys are the [`StateUpdater`]'s, between
//! polls. How assignments, revocations and failed commits change the tasks is in
//! `assignment`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use eddy_core::log::TopicPartition;
use eddy_core::streams::internals::StreamTask;
use eddy_core::streams::store::{CacheBudget, Checkpoint};
use eddy_core::streams::{TaskId, Topology};

use super::assignment::Probing;
use super::errors::{Decision, ErrorHandlers};
use super::held::HeldState;
use super::idling::Idling;
use super::inputs::Inputs;
use super::output::StreamsProducer;
use super::schedule::CommitSchedule;
use super::ThreadError;
use crate::app::assignor::StreamsAssignor;
use crate::app::metrics::ThreadMetrics;
use crate::app::query::Hosted;
use crate::app::restore::StateUpdater;
use crate::app::StreamsConfig;
use crate::client::{Consumer, PartitionRun};
use crate::store::SledStores;
use crate::time::Instant;

/// The tasks of one stream thread and what is in flight for them.
pub(super) struct TaskManager {
    pub(super) topology: Arc<Topology>,
    pub(super) config: StreamsConfig,
    pub(super) stores: Arc<SledStores>,
    /// What the record caches of all the thread's tasks draw from
    /// (`statestore.cache.max.bytes` over the threads).
    pub(super) cache: Option<CacheBudget>,
    /// What the write buffers of all the thread's tasks may take (`state.checkpoint.max.bytes`
    /// over the threads).
    pub(super) checkpoint_max_bytes: usize,
    pub(super) assignor: Arc<StreamsAssignor>,
    /// The thread's producer, its transaction and the sends in flight.
    pub(super) output: StreamsProducer,
    /// The active tasks that run.
    pub(super) tasks: BTreeMap<TaskId, StreamTask>,
    /// Active tasks being restored, and standbys.
    pub(super) updater: StateUpdater,
    /// The active tasks' input partitions, and how far they were processed.
    pub(super) inputs: Inputs,
    /// When the next commit and checkpoint are due.
    pub(super) schedule: CommitSchedule,
    /// The state this thread holds beyond its running tasks, reported for stickiness.
    pub(super) held: HeldState,
    /// When this thread last looked for state to clean (`state.cleanup.delay.ms`).
    pub(super) last_cleaning: Instant,
    /// Probing rebalances: this member's warmups, and when to probe.
    pub(super) probing: Probing,
    /// What failed inside a rebalance callback, for the thread to act on after its poll.
    pub(super) failure: Option<ThreadError>,
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
        self.schedule.commit_due(self.config.commit_interval())
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
            let Some(id) = self.inputs.reader(&tp) else {
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
                self.inputs.processed(tp, next);
            }
        }
        Ok(())
    }

    /// Runs the queued records through their tasks — a task reading several partitions
    /// only while the next record by timestamp is known, see [`Idling`] — and sends what each
    /// task wrote once it has run.
    pub(super) async fn process(&mut self, consumer: &Consumer) -> Result<(), ThreadError> {
        let now = crate::time::now_ms();
        let started = Instant::now();
        let mut processed = 0;
        let mut dead_letters = Vec::new();
        let lag = |tp: &TopicPartition| consumer.lag(tp);
        for (id, task) in &mut self.tasks {
            let span = tracing::trace_span!("task", task = %id).entered();
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
            drop(span);
            // What the task wrote goes to the producer before the next task runs, so that
            // the records written wait in one task's buffers at a time, not every task's.
            self.output.send_written(task, &mut self.errors).await?;
        }
        self.schedule.processed(processed);
        self.metrics.processed(processed, started.elapsed());
        for (kind, n) in std::mem::take(&mut self.errors.dropped) {
            self.metrics.dropped(kind, n);
        }
        for letter in dead_letters {
            self.output.send(letter).await?;
        }
        Ok(())
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

    /// Sends the tasks' output and changelog records, and forgets them.
    async fn send_written(&mut self) -> Result<(), ThreadError> {
        for task in self.tasks.values_mut() {
            self.output.send_written(task, &mut self.errors).await?;
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
        if self.output.exactly_once() {
            let group = consumer.group_metadata();
            if let Err(e) = self.output.commit_transaction(&offsets, group).await {
                self.abort().await;
                return Err(e);
            }
        } else {
            self.output.await_deliveries().await?;
            if !offsets.is_empty() {
                consumer.commit(&offsets).await?;
            }
        }
        let checkpoint = self.checkpoint_due();
        for (id, task) in &mut self.tasks {
            let partition = task.id().partition;
            let reached = self.output.changelog_reached();
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
            self.held.saw_end(*id, end);
        }
        self.updater.commit(checkpoint.is_some()).await?;
        self.report_owned().await;
        self.schedule.committed(checkpoint.is_some());
        self.metrics.committed(started.elapsed());
        self.report_figures(consumer);
        Ok(())
    }

    /// Whether this commit applies the write buffers to sled (see [`CommitSchedule`]; a
    /// second is the interval while interactive queries come, as they read sled).
    fn checkpoint_due(&mut self) -> Option<Checkpoint> {
        let held: usize = self.tasks.values_mut().map(|t| t.held_bytes()).sum();
        let interval = self
            .hosted
            .checkpoint_interval(self.config.state_checkpoint_interval);
        self.schedule
            .checkpoint_due(held, self.checkpoint_max_bytes, interval)
    }

    /// Reports the input partitions' lag and the records the tasks dropped as late.
    fn report_figures(&mut self, consumer: &Consumer) {
        let lags = self
            .inputs
            .readers()
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
        self.output.abort().await;
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
        for (tp, id) in self.inputs.readers() {
            let Some(task) = self.tasks.get(&id) else {
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
            let processed = self.inputs.processed_to(&tp);
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
}
