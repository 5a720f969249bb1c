//! Restoration and standbys (after Kafka Streams' state updater): the [`StateUpdater`] fills
//! the stores of active tasks being restored and keeps standby tasks' stores up to date,
//! reading their changelogs with the thread's restore consumer (outside any group,
//! `read_committed`) one poll at a time between the thread's own polls, so that running
//! tasks keep processing meanwhile. Each store resumes from the changelog offset its inner
//! store reached (nothing at all when it is up to date: after a clean close, or with state
//! kept on disk). A restoring task is handed back once each of its changelogs reaches the
//! end measured when it came; a standby follows its changelogs for as long as it is
//! assigned, and records how far it got at every commit. Progress is logged with the rate
//! and the records remaining.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use eddy_core::log::TopicPartition;
use eddy_core::streams::internals::StreamTask;
use eddy_core::streams::store::{ChangelogRecord, Checkpoint};
use eddy_core::streams::TaskId;

mod error;

pub use self::error::RestoreError;
use crate::client::{ClientError, Consumer, ConsumerRecord};
use crate::time::Instant;

/// How long restoration waits for a changelog's next records before it gives up, beyond
/// the transaction timeout (a transaction a crashed writer left open holds it back that
/// long).
const STALL: Duration = Duration::from_secs(30);

/// How often restoration progress is logged.
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// An active task being restored.
struct Restoring {
    task: StreamTask,
    /// Each changelog's end when the task came (its high watermark): nobody else writes to
    /// it meanwhile, and a transaction left open in it is decided before the end is reached.
    ends: BTreeMap<TopicPartition, i64>,
    /// Records to apply when it came, and applied since.
    total: u64,
    records: u64,
    started: Instant,
    /// The sum of the consumer's positions in its changelogs when they last moved.
    reached: i64,
    last_progress: Instant,
}

/// Restores active tasks and keeps standbys up to date, beside processing.
pub(crate) struct StateUpdater {
    consumer: Consumer,
    /// How long a changelog may stand still before restoration gives up.
    stall: Duration,
    restoring: BTreeMap<TaskId, Restoring>,
    standbys: BTreeMap<TaskId, StreamTask>,
    /// The task each changelog partition feeds.
    changelogs: BTreeMap<TopicPartition, TaskId>,
    /// For standbys, the offset each store last recorded.
    recorded: BTreeMap<TopicPartition, i64>,
    last_report: Instant,
    /// Records applied to restoring tasks since the progress was last taken.
    restored_since: u64,
    /// How many bytes of restored writes the stores may hold, together, before they are
    /// checkpointed (`state.checkpoint.max.bytes`).
    checkpoint_max_bytes: usize,
}

impl StateUpdater {
    /// An updater reading changelogs with `consumer`, in an application whose transactions
    /// time out after `transaction_timeout`, its stores holding up to `checkpoint_max_bytes`
    /// of restored writes before they go to sled.
    pub(crate) fn new(
        consumer: Consumer,
        transaction_timeout: Duration,
        checkpoint_max_bytes: usize,
    ) -> Self {
        Self {
            consumer,
            stall: STALL + transaction_timeout,
            restoring: BTreeMap::new(),
            standbys: BTreeMap::new(),
            changelogs: BTreeMap::new(),
            recorded: BTreeMap::new(),
            last_report: Instant::now(),
            restored_since: 0,
            checkpoint_max_bytes,
        }
    }

    /// The records restored since the last call, and those left to restore.
    pub(crate) fn take_progress(&mut self) -> (u64, u64) {
        let remaining = self
            .restoring
            .values()
            .map(|r| r.total.saturating_sub(r.records))
            .sum();
        (std::mem::take(&mut self.restored_since), remaining)
    }

    /// Whether active tasks are being restored.
    pub(crate) fn is_restoring(&self) -> bool {
        !self.restoring.is_empty()
    }

    /// Whether it holds `task` (restoring or standby).
    pub(crate) fn holds(&self, task: TaskId) -> bool {
        self.restoring.contains_key(&task) || self.standbys.contains_key(&task)
    }

    /// The active tasks being restored.
    pub(crate) fn restoring(&self) -> impl Iterator<Item = TaskId> + '_ {
        self.restoring.keys().copied()
    }

    /// The standby tasks.
    pub(crate) fn standbys(&self) -> impl Iterator<Item = TaskId> + '_ {
        self.standbys.keys().copied()
    }

    /// The restoring task `id`, to queue records on it meanwhile.
    pub(crate) fn restoring_task(&mut self, id: TaskId) -> Option<&mut StreamTask> {
        self.restoring.get_mut(&id).map(|r| &mut r.task)
    }

    /// Takes up an active task: handed straight back when its stores are up to date,
    /// restored from the next polls otherwise.
    pub(crate) async fn add_active(
        &mut self,
        mut task: StreamTask,
    ) -> Result<Option<StreamTask>, RestoreError> {
        let started = Instant::now();
        let (ends, starts) = self.positions(&mut task).await?;
        let behind: Vec<(TopicPartition, Option<i64>)> = starts
            .into_iter()
            .filter(|(tp, start)| start.unwrap_or(0) < ends[tp])
            .collect();
        if behind.is_empty() {
            return Ok(Some(task));
        }
        let id = task.id();
        self.follow(id, &behind).await?;
        let mut total = 0;
        for (tp, _) in &behind {
            let at = self.position(tp).await?;
            total += u64::try_from(ends[tp].saturating_sub(at)).unwrap_or(0);
        }
        tracing::info!(task = %id, offsets_behind = total, "restoring");
        if self.restoring.is_empty() {
            self.last_report = Instant::now();
        }
        self.restoring.insert(
            id,
            Restoring {
                task,
                ends: behind
                    .iter()
                    .map(|(tp, _)| (tp.clone(), ends[tp]))
                    .collect(),
                total,
                records: 0,
                started,
                reached: i64::MIN,
                last_progress: Instant::now(),
            },
        );
        Ok(None)
    }

    /// Takes up a standby task: its stores follow their changelogs from now on.
    pub(crate) async fn add_standby(&mut self, mut task: StreamTask) -> Result<(), RestoreError> {
        let (_, starts) = self.positions(&mut task).await?;
        let id = task.id();
        for (tp, start) in &starts {
            if let Some(offset) = start {
                self.recorded.insert(tp.clone(), *offset);
            }
        }
        self.follow(id, &starts).await?;
        self.standbys.insert(id, task);
        Ok(())
    }

    /// The ends of `task`'s changelogs (high watermarks), and where each store resumes; a
    /// store past its changelog's end is refused.
    async fn positions(
        &mut self,
        task: &mut StreamTask,
    ) -> Result<ChangelogPositions, RestoreError> {
        let partition = task.id().partition;
        let tps: Vec<TopicPartition> = task
            .logged_stores()
            .map(|(topic, _)| TopicPartition::new(topic, partition))
            .collect();
        // The log's end, open transactions included: a transaction a crashed owner left
        // open may still commit, so restoration reads until it is decided.
        let ends = self
            .consumer
            .high_watermarks(&tps)
            .await
            .map_err(|source| RestoreError::Client {
                changelog: first(&tps),
                source,
            })?;
        let mut starts = Vec::new();
        for (topic, store) in task.logged_stores() {
            let tp = TopicPartition::new(topic, partition);
            let end = ends.get(&tp).copied().unwrap_or(0);
            match store.changelog_offset() {
                Some(offset) if offset > end => {
                    return Err(RestoreError::AheadOfChangelog {
                        changelog: tp,
                        offset,
                        end,
                    });
                }
                start => starts.push((tp, start)),
            }
        }
        Ok((ends, starts))
    }

    /// Adds `partitions` to what the consumer reads, each from its start (the beginning
    /// where the store has no offset).
    async fn follow(
        &mut self,
        id: TaskId,
        partitions: &[(TopicPartition, Option<i64>)],
    ) -> Result<(), RestoreError> {
        for (tp, _) in partitions {
            self.changelogs.insert(tp.clone(), id);
        }
        self.reassign()?;
        let mut from_beginning = Vec::new();
        for (tp, start) in partitions {
            let failed = |source| RestoreError::Client {
                changelog: tp.clone(),
                source,
            };
            match start {
                Some(offset) => self.consumer.seek(tp, *offset).map_err(failed)?,
                None => from_beginning.push(tp.clone()),
            }
        }
        self.consumer
            .seek_to_beginning(&from_beginning)
            .await
            .map_err(|source| RestoreError::Client {
                changelog: first(&from_beginning),
                source,
            })
    }

    fn reassign(&mut self) -> Result<(), RestoreError> {
        let all: Vec<TopicPartition> = self.changelogs.keys().cloned().collect();
        self.consumer
            .assign(&all)
            .map_err(|source| RestoreError::Client {
                changelog: first(&all),
                source,
            })
    }

    async fn position(&mut self, tp: &TopicPartition) -> Result<i64, RestoreError> {
        self.consumer
            .position(tp)
            .await
            .map_err(|source| RestoreError::Client {
                changelog: tp.clone(),
                source,
            })
    }

    /// Reads what the changelogs have (waiting up to `timeout` for it), applies it, and
    /// hands back the active tasks whose restoration finished.
    pub(crate) async fn poll(
        &mut self,
        timeout: Duration,
    ) -> Result<Vec<StreamTask>, RestoreError> {
        if self.changelogs.is_empty() {
            return Ok(Vec::new());
        }
        let records = self
            .consumer
            .poll(timeout)
            .await
            .map_err(|source| RestoreError::Client {
                changelog: self
                    .changelogs
                    .keys()
                    .next()
                    .cloned()
                    .unwrap_or_else(|| first(&[])),
                source,
            })?;
        let touched = self.apply(records)?;
        self.checkpoint_if_full();
        let mut done = Vec::new();
        let ids: Vec<TaskId> = self.restoring.keys().copied().collect();
        for id in ids {
            if let Some(restored) = self.finish_if_done(id).await? {
                done.push(restored);
            } else if touched.contains(&id) {
                // What a poll restored lands in one batch with the offsets it reaches: a
                // restoration cut short resumes from there.
                let at = self.positions_of(id).await?;
                let restoring = self.restoring.get_mut(&id).expect("still restoring");
                record_offsets(&mut restoring.task, &at)?;
            }
        }
        if self.last_report.elapsed() >= REPORT_EVERY && !self.restoring.is_empty() {
            self.last_report = Instant::now();
            for (id, r) in &self.restoring {
                let secs = r.started.elapsed().as_secs_f64().max(1e-3);
                tracing::info!(
                    task = %id,
                    restored = r.records,
                    remaining = r.total.saturating_sub(r.records),
                    records_per_second = (r.records as f64 / secs).round(),
                    "restoring"
                );
            }
        }
        Ok(done)
    }

    /// Restored writes wait in the stores' write buffers, where reads see them, for a
    /// checkpoint to take them to sled on its own thread: restoring goes at the speed of
    /// reading the changelog, not of sled's inserts. Once the stores hold
    /// `state.checkpoint.max.bytes` together, they are checkpointed, each waiting for its
    /// last batch to land, so memory stays bounded and a long restoration goes at sled's
    /// pace from there.
    fn checkpoint_if_full(&mut self) {
        let mut tasks: Vec<&mut StreamTask> = self
            .restoring
            .values_mut()
            .map(|r| &mut r.task)
            .chain(self.standbys.values_mut())
            .collect();
        let held: usize = tasks.iter_mut().map(|t| t.held_bytes()).sum();
        if held >= self.checkpoint_max_bytes {
            for task in tasks {
                task.checkpoint_stores(Checkpoint::Wait);
            }
        }
    }

    /// Applies polled changelog records, a partition's run at a time; says which restoring
    /// tasks got some.
    fn apply(&mut self, records: Vec<ConsumerRecord>) -> Result<BTreeSet<TaskId>, RestoreError> {
        let mut touched = BTreeSet::new();
        let mut records = records.into_iter().peekable();
        while let Some(first) = records.peek() {
            let tp = TopicPartition::new(&*first.topic, first.partition);
            let run = std::iter::from_fn(|| {
                records.next_if(|r| r.partition == tp.partition && *r.topic == *tp.topic)
            });
            let Some(&id) = self.changelogs.get(&tp) else {
                run.for_each(drop);
                continue;
            };
            let (task, counter) = match self.restoring.get_mut(&id) {
                Some(r) => (&mut r.task, Some(&mut r.records)),
                None => match self.standbys.get_mut(&id) {
                    Some(task) => (task, None),
                    None => {
                        run.for_each(drop);
                        continue;
                    }
                },
            };
            let Some((_, store)) = task.logged_stores().find(|(t, _)| **t == *tp.topic) else {
                run.for_each(drop);
                continue;
            };
            let mut applied = 0;
            for record in run {
                let offset = record.offset;
                let change = ChangelogRecord {
                    key: record.key.unwrap_or_default(),
                    value: record.value,
                };
                store.restore(change).map_err(|e| RestoreError::Record {
                    changelog: tp.clone(),
                    offset,
                    reason: e.to_string(),
                })?;
                applied += 1;
            }
            if let Some(counter) = counter {
                *counter += applied;
                self.restored_since += applied;
                touched.insert(id);
            }
        }
        Ok(touched)
    }

    /// Hands task `id` back if each of its changelogs reached its end, its stores recording
    /// the offsets they reach.
    async fn finish_if_done(&mut self, id: TaskId) -> Result<Option<StreamTask>, RestoreError> {
        let Some(restoring) = self.restoring.get(&id) else {
            return Ok(None);
        };
        let ends = restoring.ends.clone();
        let mut at = BTreeMap::new();
        let mut done = true;
        for (tp, &end) in &ends {
            let position = self.position(tp).await?;
            done &= position >= end;
            at.insert(tp.clone(), position);
        }
        let restoring = self.restoring.get_mut(&id).expect("checked above");
        if !done {
            let reached = at.values().sum();
            if reached > restoring.reached {
                restoring.reached = reached;
                restoring.last_progress = Instant::now();
            } else if restoring.last_progress.elapsed() > self.stall {
                let (tp, end) = ends
                    .into_iter()
                    .find(|(tp, end)| at[tp] < *end)
                    .expect("a changelog short of its end");
                return Err(RestoreError::TimedOut {
                    at: at[&tp],
                    changelog: tp,
                    end,
                    waited: self.stall,
                });
            }
            return Ok(None);
        }
        let mut restoring = self.restoring.remove(&id).expect("checked above");
        record_offsets(&mut restoring.task, &at)?;
        for tp in ends.keys() {
            self.changelogs.remove(tp);
        }
        self.reassign()?;
        let elapsed = restoring.started.elapsed();
        let secs = elapsed.as_secs_f64().max(1e-3);
        tracing::info!(
            task = %id,
            records = restoring.records,
            elapsed = ?elapsed,
            records_per_second = (restoring.records as f64 / secs).round(),
            "task restored"
        );
        Ok(Some(restoring.task))
    }

    /// Records in each standby store the changelog offset it reached, where it moved, and
    /// when `checkpoint`, applies what they hold to sled unless their last checkpoint is
    /// still landing.
    pub(crate) async fn commit(&mut self, checkpoint: bool) -> Result<(), RestoreError> {
        let ids: Vec<TaskId> = self.standbys.keys().copied().collect();
        for id in ids {
            let at = self.positions_of(id).await?;
            let moved: BTreeMap<TopicPartition, i64> = at
                .into_iter()
                .filter(|(tp, offset)| self.recorded.get(tp) != Some(offset))
                .collect();
            if moved.is_empty() {
                continue;
            }
            let task = self.standbys.get_mut(&id).expect("listed");
            record_offsets(task, &moved)?;
            self.recorded.extend(moved);
        }
        if checkpoint {
            for task in self.standbys.values_mut() {
                task.checkpoint_stores(Checkpoint::IfLanded);
            }
        }
        Ok(())
    }

    /// Where the consumer is in each changelog partition of `id`.
    async fn positions_of(
        &mut self,
        id: TaskId,
    ) -> Result<BTreeMap<TopicPartition, i64>, RestoreError> {
        let tps: Vec<TopicPartition> = self
            .changelogs
            .iter()
            .filter(|(_, t)| **t == id)
            .map(|(tp, _)| tp.clone())
            .collect();
        let mut at = BTreeMap::new();
        for tp in tps {
            let position = self.position(&tp).await?;
            at.insert(tp, position);
        }
        Ok(at)
    }

    /// Gives up task `id` (restoring or standby), its stores recording how far they got and
    /// taking what they restored to sled.
    pub(crate) async fn remove(&mut self, id: TaskId) -> Result<Option<StreamTask>, RestoreError> {
        if !self.holds(id) {
            return Ok(None);
        }
        let at = self.positions_of(id).await?;
        let mut task = match self.restoring.remove(&id) {
            Some(r) => r.task,
            None => self.standbys.remove(&id).expect("held"),
        };
        record_offsets(&mut task, &at)?;
        task.checkpoint_stores(Checkpoint::Wait);
        for tp in at.keys() {
            self.changelogs.remove(tp);
            self.recorded.remove(tp);
        }
        self.reassign()?;
        Ok(Some(task))
    }

    /// For each task held, the sum of the changelog offsets its stores reached.
    pub(crate) async fn offset_sums(&mut self) -> BTreeMap<TaskId, i64> {
        let mut sums = BTreeMap::new();
        let held: BTreeSet<(TopicPartition, TaskId)> = self
            .changelogs
            .iter()
            .map(|(tp, id)| (tp.clone(), *id))
            .collect();
        for (tp, id) in held {
            if let Ok(position) = self.consumer.position(&tp).await {
                *sums.entry(id).or_insert(0) += position;
            }
        }
        sums
    }

    /// The sum of each standby's changelog ends, measured now.
    pub(crate) async fn standby_end_sums(&mut self) -> Result<BTreeMap<TaskId, i64>, ClientError> {
        let tps: Vec<TopicPartition> = self
            .changelogs
            .iter()
            .filter(|(_, id)| self.standbys.contains_key(id))
            .map(|(tp, _)| tp.clone())
            .collect();
        let ends = self.consumer.end_offsets(&tps).await?;
        let mut sums = BTreeMap::new();
        for (tp, end) in ends {
            if let Some(id) = self.changelogs.get(&tp) {
                *sums.entry(*id).or_insert(0) += end;
            }
        }
        Ok(sums)
    }

    /// Gives up every task, each recording how far it got, and hands them back to close.
    pub(crate) async fn remove_all(&mut self) -> Vec<(TaskId, Result<StreamTask, RestoreError>)> {
        let ids: Vec<TaskId> = self
            .restoring
            .keys()
            .chain(self.standbys.keys())
            .copied()
            .collect();
        let mut out = Vec::new();
        for id in ids {
            match self.remove(id).await {
                Ok(Some(task)) => out.push((id, Ok(task))),
                Ok(None) => {}
                Err(e) => out.push((id, Err(e))),
            }
        }
        out
    }
}

/// The ends of a task's changelogs, and where each of its stores resumes.
type ChangelogPositions = (
    BTreeMap<TopicPartition, i64>,
    Vec<(TopicPartition, Option<i64>)>,
);

/// The partition an error names: the first of those it concerns.
fn first(partitions: &[TopicPartition]) -> TopicPartition {
    partitions
        .first()
        .cloned()
        .unwrap_or_else(|| TopicPartition::new("", 0))
}

/// Commits `task`'s restored stores at the changelog offsets `at` gives.
fn record_offsets(
    task: &mut StreamTask,
    at: &BTreeMap<TopicPartition, i64>,
) -> Result<(), RestoreError> {
    let partition = task.id().partition;
    for (topic, store) in task.logged_stores() {
        let tp = TopicPartition::new(topic, partition);
        let Some(&offset) = at.get(&tp) else {
            continue;
        };
        store.commit(Some(offset));
        if let Some(reason) = store.failure() {
            return Err(RestoreError::Record {
                changelog: tp,
                offset,
                reason,
            });
        }
    }
    Ok(())
}
