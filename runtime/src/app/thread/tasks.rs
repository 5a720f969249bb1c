//! A stream thread's tasks (Kafka Streams' `TaskManager`): the running tasks get their
//! records, what they write is sent, and they commit — input offsets and output in one
//! transaction under exactly-once, offsets after acknowledged output at-least-once. The
//! manager's state is split by concern, each part with its own methods: the producer and its
//! transaction (`output`), commits (`commit`), the input partitions (`inputs`), the commit
//! and checkpoint times (`schedule`), the state held for the assignor (`held`) and probing
//! rebalances (`assignment`). Tasks being restored and standbys are the [`StateUpdater`]'s, between
//! polls. How assignments, revocations and failed commits change the tasks is in
//! `assignment`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use eddy_core::log::TopicPartition;
use eddy_core::streams::internals::StreamTask;
use eddy_core::streams::store::CacheBudget;
use eddy_core::streams::{TaskId, Topology};

use super::assignment::Probing;
use super::commit::{CommitWaits, Sealed, HELD_BACK_MAX_BYTES};
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
    /// The commit whose transaction is in flight, exactly-once.
    pub(super) sealed: Option<Sealed>,
    /// The input offsets this thread's commits committed, since its tasks last changed.
    pub(super) committed: BTreeMap<TopicPartition, i64>,
    /// How long the thread waited for commits in flight.
    pub(super) commit_waits: CommitWaits,
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

    /// How long until the commit interval has passed since the last commit.
    pub(super) fn until_commit_due(&self) -> Duration {
        self.schedule
            .until_commit_due(self.config.commit_interval())
    }

    /// Queues polled records on their tasks: each run of one partition's records finds its
    /// task once. A run that finds no task is dropped; if its partition is still assigned,
    /// the consumer is sent back to the run's first record and the partition paused, so that
    /// the records are read again once a task takes the partition (a task run resumes its
    /// partitions) and the position never passes a record no task processed.
    pub(super) fn route(
        &mut self,
        consumer: &mut Consumer,
        runs: Vec<PartitionRun>,
    ) -> Result<(), ThreadError> {
        let mut unread: Vec<(TopicPartition, i64)> = Vec::new();
        for PartitionRun {
            topic,
            partition,
            records: run,
        } in runs
        {
            let tp = TopicPartition::new(&*topic, partition);
            // A partition without a task was revoked: its new owner reads it again. One of
            // a task being restored was polled before it was paused: queued meanwhile.
            let first = run.first().map(|(offset, _)| *offset);
            let task = match self.inputs.reader(&tp) {
                Some(id) => match self.tasks.get_mut(&id) {
                    Some(task) => Some(task),
                    None => self.updater.restoring_task(id),
                },
                None => None,
            };
            let Some(task) = task else {
                unread.extend(first.map(|offset| (tp, offset)));
                continue;
            };
            let id = task.id();
            let next = run.last().map(|(offset, _)| offset + 1);
            task.add_records(&topic, run)
                .map_err(|source| ThreadError::Task { task: id, source })?;
            if let Some(next) = next {
                self.inputs.processed(tp, next);
            }
        }
        if !unread.is_empty() {
            let assigned: BTreeSet<TopicPartition> = consumer.assignment().into_iter().collect();
            for (tp, offset) in unread {
                if assigned.contains(&tp) {
                    tracing::debug!(%tp, offset, "records polled without a task: read again later");
                    consumer.seek(&tp, offset)?;
                    consumer.pause(std::slice::from_ref(&tp))?;
                }
            }
        }
        Ok(())
    }

    /// Runs the queued records through their tasks — a task reading several partitions
    /// only while the next record by timestamp is known, see [`Idling`] — and sends what each
    /// task wrote once it has run. While the last interval's transaction commits, what the
    /// tasks write waits in their buffers, up to [`HELD_BACK_MAX_BYTES`]; past that the
    /// thread waits for the commit.
    pub(super) async fn process(&mut self, consumer: &mut Consumer) -> Result<(), ThreadError> {
        if self.output.commit_done() {
            self.settle(consumer).await?;
        }
        let now = crate::time::now_ms();
        let started = Instant::now();
        let mut processed = 0;
        let mut dead_letters = Vec::new();
        let mut held_back: usize = match self.output.is_committing() {
            true => self.tasks.values().map(StreamTask::written_bytes).sum(),
            false => 0,
        };
        let ids: Vec<TaskId> = self.tasks.keys().copied().collect();
        for id in ids {
            if held_back > HELD_BACK_MAX_BYTES {
                self.settle(consumer).await?;
                held_back = 0;
            }
            let lag = |tp: &TopicPartition| consumer.lag(tp);
            let Some(task) = self.tasks.get_mut(&id) else {
                continue;
            };
            let committing = self.output.is_committing();
            let before = if committing { task.written_bytes() } else { 0 };
            let span = tracing::trace_span!("task", task = %id).entered();
            let failed = |source| ThreadError::Task { task: id, source };
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
                        match self.errors.on_record_error(id, &e, record) {
                            Decision::Fail(None) => return Err(failed(e)),
                            Decision::Fail(Some(record)) => {
                                return Err(ThreadError::Record {
                                    task: id,
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
            if committing {
                held_back += task.written_bytes().saturating_sub(before);
            } else {
                // What the task wrote goes to the producer before the next task runs, so
                // that the records written wait in one task's buffers at a time, not every
                // task's.
                self.output.send_written(task, &mut self.errors).await?;
            }
        }
        self.schedule.processed(processed);
        self.metrics.processed(processed, started.elapsed());
        for (kind, n) in std::mem::take(&mut self.errors.dropped) {
            self.metrics.dropped(kind, n);
        }
        if !dead_letters.is_empty() {
            self.settle(consumer).await?;
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
}
