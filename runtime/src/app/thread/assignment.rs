//! How the group changes a thread's tasks. An assignment's active tasks are created and
//! run at once when their stores are up to date, or restored by the state updater first
//! (their input partitions paused meanwhile); its standbys follow their changelogs. Tasks
//! that move to another member are committed and closed in the consumer's revocation
//! callback, before the member rejoins, so that their new owner starts after the last
//! record processed here. When the group went on without this member, or its commit was
//! refused because it did (`CommitFailed`, a fenced producer), every active task is closed
//! dirty: its uncommitted work is thrown away and its partitions are read again from the
//! committed offsets. Warmups ask for the probing rebalance that moves their task as soon
//! as they are caught up, and at `probing.rebalance.interval.ms` otherwise.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use eddy_core::log::TopicPartition;
use eddy_core::streams::internals::{StreamTask, TaskConfig};
use eddy_core::streams::store::Checkpoint;
use eddy_core::streams::{StreamsError, TaskId};

use super::tasks::TaskManager;
use super::ThreadError;
use crate::app::assignor::protocol::TaskAssignment;
use crate::client::{ClientError, Consumer};
use crate::time::{reported, Instant, REPORT_WAITS_AFTER};
use kafka_protocol::error::ResponseError::{
    FencedInstanceId, IllegalGeneration, RebalanceInProgress, UnknownMemberId,
};

/// Whether `error` says that this member's tasks may belong to another member now (Kafka
/// Streams' `TaskMigratedException`): closing them dirty and rejoining recovers.
pub(super) fn tasks_migrated(error: &ThreadError) -> bool {
    let ThreadError::Client(e) = error else {
        return false;
    };
    matches!(
        e,
        ClientError::Fenced { .. }
            | ClientError::FencedInstanceId { .. }
            | ClientError::CommitFailed { .. }
    ) || matches!(
        e.error(),
        Some(IllegalGeneration | UnknownMemberId | RebalanceInProgress | FencedInstanceId)
    )
}

/// How often a member with warmups measures how far behind they are.
const WARMUP_CHECK_EVERY: Duration = Duration::from_secs(1);

/// The least time between an assignment and the probing rebalance its warmups ask for.
const EARLIEST_PROBE: Duration = Duration::from_secs(1);

/// The least time between two looks for state to clean, whatever `state.cleanup.delay.ms`.
const CLEANING_AT_MOST_EVERY: Duration = Duration::from_millis(100);

/// The most time between two looks for state to clean, whatever `state.cleanup.delay.ms`.
const CLEANING_AT_LEAST_EVERY: Duration = Duration::from_secs(60);

/// Probing rebalances of one thread.
#[derive(Debug)]
pub(super) struct Probing {
    /// This member's warmups in the current assignment.
    warmups: BTreeSet<TaskId>,
    /// When the current assignment came.
    assigned_at: Instant,
    /// When the next probing rebalance is due, if the leader asked for one.
    due: Option<Instant>,
    last_check: Instant,
}

impl Default for Probing {
    fn default() -> Self {
        Self {
            warmups: BTreeSet::new(),
            assigned_at: Instant::now(),
            due: None,
            last_check: Instant::now(),
        }
    }
}

impl TaskManager {
    /// Creates task `id`, its stores' database opened first on a blocking thread.
    async fn new_task(&mut self, id: TaskId) -> Result<StreamTask, ThreadError> {
        let stores = self.stores.clone();
        let name = id.to_string();
        let dir = self.stores.database_dir();
        crate::blocking::unblocked(move || stores.open_task(&name))
            .await
            .map_err(|e| ThreadError::Task {
                task: id,
                source: StreamsError::Store {
                    store: format!("the database of task {id}"),
                    reason: format!("could not be opened under {}: {e}", dir.display()),
                },
            })?;
        let mut task_config = TaskConfig::new(self.config.application_id.clone());
        task_config.stores = self.stores.clone();
        task_config.cache = self.cache.clone();
        // Under either guarantee: sled takes a key once per checkpoint, however often it
        // changes; under exactly-once, sled holds committed state only.
        task_config.write_buffer = true;
        task_config.emit_intervals = self.config.emit_intervals;
        StreamTask::new(&self.topology, id, &task_config).map_err(|e| ThreadError::Task {
            task: id,
            source: StreamsError::processor(format!("task {id}"), e),
        })
    }

    /// Runs a task whose stores are up to date: it processes from the next loop on.
    pub(super) fn run_task(
        &mut self,
        consumer: &mut Consumer,
        mut task: StreamTask,
    ) -> Result<(), ThreadError> {
        let id = task.id();
        task.init()
            .map_err(|source| ThreadError::Task { task: id, source })?;
        let inputs = input_partitions(&task);
        self.inputs.add(id, &inputs);
        let assigned: BTreeSet<TopicPartition> = consumer.assignment().into_iter().collect();
        let owned: Vec<TopicPartition> = inputs
            .into_iter()
            .filter(|tp| assigned.contains(tp))
            .collect();
        tracing::debug!(task = %id, inputs = ?owned, "task runs");
        consumer.resume(&owned)?;
        self.held.taken(id);
        self.tasks.insert(id, task);
        // Another member may have committed its inputs since this thread last did.
        self.committed.clear();
        Ok(())
    }

    /// Takes up a new assignment: active tasks not in it are committed and closed (with
    /// the cooperative protocol the revocation callback did that already); new ones run,
    /// or are restored first; standbys come and go, a standby that becomes active is
    /// restored from where its copy got to.
    pub(super) async fn assign(
        &mut self,
        consumer: &mut Consumer,
        assignment: &TaskAssignment,
    ) -> Result<(), ThreadError> {
        // Tasks change: the commit in flight is settled first.
        self.settle(consumer).await?;
        self.metrics.rebalanced();
        self.hosted.set_hosts(
            &assignment.partitions_by_host,
            &assignment.standby_partitions_by_host,
        );
        let active: BTreeSet<TaskId> = assignment.active.iter().map(|&t| t.into()).collect();
        let standby: BTreeSet<TaskId> = assignment.standby.iter().map(|&t| t.into()).collect();
        tracing::debug!(?active, ?standby, "assigned");
        let going: Vec<TaskId> = self
            .tasks
            .keys()
            .copied()
            .chain(self.updater.restoring())
            .filter(|id| !active.contains(id))
            .collect();
        self.close_clean(consumer, &going).await?;
        let standbys_going: Vec<TaskId> = self
            .updater
            .standbys()
            .filter(|id| !standby.contains(id))
            .collect();
        for id in standbys_going {
            self.release(id).await?;
        }
        for &id in &active {
            if self.tasks.contains_key(&id) || self.updater.holds(id) {
                continue;
            }
            let task = self.new_task(id).await?;
            match self.updater.add_active(task).await? {
                Some(task) => self.run_task(consumer, task)?,
                None => {
                    // Its records wait until its stores are restored.
                    let owned: BTreeSet<TopicPartition> =
                        consumer.assignment().into_iter().collect();
                    let task = self.updater.restoring_task(id).expect("just added");
                    let inputs = input_partitions(task);
                    self.inputs.add(id, &inputs);
                    let paused: Vec<TopicPartition> =
                        inputs.into_iter().filter(|tp| owned.contains(tp)).collect();
                    consumer.pause(&paused)?;
                }
            }
        }
        for &id in &standby {
            if active.contains(&id) || self.updater.holds(id) {
                continue;
            }
            let task = self.new_task(id).await?;
            self.updater.add_standby(task).await?;
        }
        let warmups = assignment.warmup.iter().map(|&t| t.into()).collect();
        self.probing = Probing {
            warmups,
            assigned_at: Instant::now(),
            due: assignment
                .probing_rebalance
                .then(|| Instant::now() + self.config.probing_rebalance_interval),
            last_check: Instant::now(),
        };
        self.report_owned().await;
        Ok(())
    }

    /// Gives up a standby or restoring task: its state stays on disk, reported from now on
    /// by its offset sum.
    async fn release(&mut self, id: TaskId) -> Result<(), ThreadError> {
        if let Some(mut task) = self.updater.remove(id).await? {
            let sum = offset_sum(&mut task);
            self.held.left(id, sum);
        }
        Ok(())
    }

    /// What this thread reports at the next rebalance: the tasks it runs (caught up), the
    /// offset sums of the state it holds and of what lies on disk, and the ends it saw.
    pub(super) async fn report_owned(&mut self) {
        let stores = &self.stores;
        self.held
            .forget_on_disk(|id| stores.is_cleaned(&id.to_string()));
        let running: BTreeSet<TaskId> = self.tasks.keys().copied().collect();
        let owned: BTreeSet<TaskId> = running
            .iter()
            .copied()
            .chain(self.updater.restoring())
            .collect();
        let sums = self
            .held
            .offset_sums(self.updater.offset_sums().await, &running);
        let ends = self.held.ends_of(&sums);
        self.hosted.set_running(self.index, running);
        self.assignor.set_owned(owned, sums, ends);
    }

    /// Drops the state of tasks not run here for `state.cleanup.delay.ms`, as Kafka
    /// Streams' state directory cleaner: the first thread does it for the instance, looking
    /// every `state.cleanup.delay.ms` and at least once a minute.
    pub(super) async fn clean_state_if_due(&mut self) {
        let delay = self.config.state_cleanup_delay;
        let every = delay.clamp(CLEANING_AT_MOST_EVERY, CLEANING_AT_LEAST_EVERY);
        if self.index != 0 || self.last_cleaning.elapsed() < every {
            return;
        }
        self.last_cleaning = Instant::now();
        let stores = self.stores.clone();
        match crate::blocking::unblocked(move || stores.clean_released(delay)).await {
            Ok(cleaned) if !cleaned.is_empty() => self.report_owned().await,
            Ok(_) => {}
            Err(e) => tracing::warn!("dropping the state of tasks that moved away: {e}"),
        }
    }

    /// Asks for a probing rebalance when one is due: at once when this member's warmups
    /// are caught up (within `acceptable.recovery.lag`), at the interval otherwise.
    pub(super) async fn probe_if_due(&mut self, consumer: &Consumer) {
        let Some(due) = self.probing.due else {
            return;
        };
        if Instant::now() >= due {
            tracing::info!("probing rebalance");
            self.probing.due = None;
            consumer.enforce_rebalance();
            return;
        }
        if self.probing.warmups.is_empty()
            || self.probing.assigned_at.elapsed() < EARLIEST_PROBE
            || self.probing.last_check.elapsed() < WARMUP_CHECK_EVERY
        {
            return;
        }
        self.probing.last_check = Instant::now();
        let ends = match self.updater.standby_end_sums().await {
            Ok(ends) => ends,
            Err(e) => {
                tracing::debug!("measuring the warmups' lag: {e}");
                return;
            }
        };
        let sums = self.updater.offset_sums().await;
        for (&id, &end) in &ends {
            self.held.saw_end(id, end);
        }
        let lag = |id: &TaskId| {
            let end = ends.get(id).copied().unwrap_or(0);
            u64::try_from(end.saturating_sub(sums.get(id).copied().unwrap_or(0))).unwrap_or(0)
        };
        let acceptable = self.config.acceptable_recovery_lag;
        if self.probing.warmups.iter().all(|id| lag(id) <= acceptable) {
            tracing::info!(warmups = ?self.probing.warmups, "warmups caught up: probing rebalance");
            self.probing.due = None;
            self.report_owned().await;
            consumer.enforce_rebalance();
        }
    }

    /// The revocation callback: the tasks reading `partitions` go to another member. Every
    /// running task commits (one transaction holds them all), then those close.
    pub(super) async fn revoke(&mut self, consumer: &mut Consumer, partitions: &[TopicPartition]) {
        let going: BTreeSet<TaskId> = partitions
            .iter()
            .filter_map(|tp| self.inputs.reader(tp))
            .collect();
        let going: Vec<TaskId> = going.into_iter().collect();
        tracing::debug!(?partitions, ?going, "partitions revoked");
        if let Err(e) = self.close_clean(consumer, &going).await {
            self.fail_or_recover(consumer, e).await;
        }
    }

    /// The loss callback: the group went on without this member; its tasks may run
    /// elsewhere already. They close dirty.
    pub(super) async fn lose_all(&mut self, consumer: &mut Consumer) {
        tracing::debug!("partitions lost");
        if let Err(e) = self.close_dirty(consumer).await {
            self.failure.get_or_insert(e);
        }
    }

    /// Commits every running task and closes the active tasks `going` (running or being
    /// restored). With none going, the commit in flight is settled: it carries the group's
    /// generation, which the rebalance about to happen ends.
    async fn close_clean(
        &mut self,
        consumer: &mut Consumer,
        going: &[TaskId],
    ) -> Result<(), ThreadError> {
        if going.is_empty() {
            return self.settle(consumer).await;
        }
        self.commit(consumer).await?;
        for &id in going {
            if let Some(mut task) = self.tasks.remove(&id) {
                // Its last checkpoint lands and its stores close off the async workers.
                let closing = crate::blocking::unblocked(move || {
                    task.checkpoint_stores(Checkpoint::Wait);
                    (offset_sum(&mut task), task.close())
                });
                let (sum, closed) = reported(closing, REPORT_WAITS_AFTER, |waited| {
                    tracing::warn!(task = %id, ?waited, "task still closing");
                })
                .await;
                self.held.left(id, sum);
                closed.map_err(|source| ThreadError::Task { task: id, source })?;
            } else {
                self.release(id).await?;
            }
            self.inputs.remove(id);
        }
        self.committed.clear();
        self.report_owned().await;
        Ok(())
    }

    /// Recovers from `error` if it says the tasks migrated (closing them dirty and
    /// rejoining); otherwise keeps it for the thread, which stops.
    pub(super) async fn fail_or_recover(&mut self, consumer: &mut Consumer, error: ThreadError) {
        if !tasks_migrated(&error) {
            self.failure.get_or_insert(error);
            return;
        }
        tracing::warn!("tasks migrated ({error}): closing them dirty and rejoining the group");
        if let Err(e) = self.close_dirty(consumer).await {
            self.failure.get_or_insert(e);
            return;
        }
        consumer.enforce_rebalance();
    }

    /// Closes every active task without committing: what it processed since its last
    /// commit is thrown away (the open transaction aborted, the write buffers dropped), and
    /// its partitions are read again from their committed offsets, paused until a task
    /// reads them again (run or restored). Standbys stay. A fenced producer is replaced.
    async fn close_dirty(&mut self, consumer: &mut Consumer) -> Result<(), ThreadError> {
        self.abort().await;
        let fenced = self.output.is_fenced();
        close_all(std::mem::take(&mut self.tasks), false).await;
        let restoring: Vec<TaskId> = self.updater.restoring().collect();
        for id in restoring {
            self.release(id).await?;
        }
        // Every partition the consumer holds is read again from its last commit: those of
        // the tasks closed, and those of tasks not made yet (an assignment that failed to
        // be taken up), whose records a poll may have handed out already, moving the
        // position past records no task will process.
        let read: BTreeSet<TopicPartition> = self.inputs.clear().into_iter().collect();
        let inputs = consumer.assignment();
        let untasked: Vec<&TopicPartition> =
            inputs.iter().filter(|tp| !read.contains(*tp)).collect();
        tracing::debug!(
            ?inputs,
            ?untasked,
            "tasks closed dirty: their inputs read again from the last commit"
        );
        consumer.reset_to_committed(&inputs)?;
        // Until the rebalance gives them tasks again, nothing may be read from them: a
        // record polled meanwhile would find no task, and the position would pass it.
        consumer.pause(&inputs)?;
        self.report_owned().await;
        if fenced {
            self.output.replace().await?;
        }
        Ok(())
    }

    /// Commits (on a clean stop), closes the tasks and the producer. A last commit that
    /// finds the tasks migrated (the producer fenced: another instance has them) closes them
    /// dirty, as Kafka Streams does, without failing the close.
    pub(super) async fn close(
        &mut self,
        consumer: &mut Consumer,
        clean: bool,
    ) -> Result<(), ThreadError> {
        let committed = if clean {
            self.commit(consumer).await
        } else {
            self.abort().await;
            Ok(())
        };
        // A clean close leaves sled holding all it committed: no restore on restart.
        let checkpoint = committed.is_ok();
        let committed = match committed {
            Err(e) if tasks_migrated(&e) => {
                tracing::warn!("closing: tasks migrated ({e}): closing them dirty");
                Ok(())
            }
            other => other,
        };
        close_all(std::mem::take(&mut self.tasks), checkpoint).await;
        for (id, released) in self.updater.remove_all().await {
            if let Err(e) = released {
                tracing::warn!(task = %id, "closing: {e}");
            }
        }
        let producer = self.output.close().await;
        committed?;
        producer?;
        Ok(())
    }
}

/// Closes `tasks` on a blocking thread (their stores wait there for their last checkpoints
/// to land), each checkpointed first if `checkpoint`; a task that fails to close is logged.
async fn close_all(tasks: BTreeMap<TaskId, StreamTask>, checkpoint: bool) {
    if tasks.is_empty() {
        return;
    }
    let closing = crate::blocking::unblocked(move || {
        for (id, mut task) in tasks {
            if checkpoint {
                task.checkpoint_stores(Checkpoint::Wait);
            }
            if let Err(e) = task.close() {
                tracing::warn!(task = %id, "closing: {e}");
            }
        }
    });
    reported(closing, REPORT_WAITS_AFTER, |waited| {
        tracing::warn!(?waited, "tasks still closing");
    })
    .await;
}

/// The partitions `task` reads.
fn input_partitions(task: &StreamTask) -> Vec<TopicPartition> {
    let partition = task.id().partition;
    task.input_topics()
        .iter()
        .map(|topic| TopicPartition::new(&**topic, partition))
        .collect()
}

/// The sum of the changelog offsets `task`'s stores reached.
fn offset_sum(task: &mut StreamTask) -> i64 {
    task.logged_stores()
        .filter_map(|(_, store)| store.changelog_offset())
        .sum()
}

/// The offset sums of the tasks whose state lies on disk (`tasks`: task names with the
/// changelog offsets of their stores), for the tasks' names that parse.
pub(crate) fn on_disk_sums(tasks: Vec<(String, Vec<i64>)>) -> BTreeMap<TaskId, i64> {
    tasks
        .into_iter()
        .filter_map(|(name, offsets)| {
            let (subtopology, partition) = name.split_once('_')?;
            let id = TaskId {
                subtopology: subtopology.parse().ok()?,
                partition: partition.parse().ok()?,
            };
            Some((id, offsets.iter().sum()))
        })
        .collect()
}
