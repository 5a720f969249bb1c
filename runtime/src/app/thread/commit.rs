//! A stream thread's commits. A commit flushes the tasks' record caches, sends what they
//! wrote and takes the input offsets they reached. At-least-once it then waits for every
//! send and commits the offsets. Exactly-once the stores' writes so far are sealed and the
//! transaction commits in the background (the acknowledgements awaited, the offsets sent,
//! EndTxn) while the thread processes the next interval's records into the tasks' buffers;
//! the commit is settled — the sealed writes committed in the stores, checkpointed when due,
//! the held-back records sent in the next transaction — once it is done, at the latest
//! before the next commit, before tasks change, or when the held-back records reach
//! [`HELD_BACK_MAX_BYTES`]. A commit that fails abandons both intervals: the transaction is
//! aborted and the tasks close dirty, their inputs read again from the last commit.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use eddy_core::log::TopicPartition;
use eddy_core::streams::store::Checkpoint;
use eddy_core::streams::TaskId;

use super::tasks::TaskManager;
use super::ThreadError;
use crate::client::Consumer;
use crate::time::Instant;

/// How many bytes of records a stream thread's tasks may write while the last interval's
/// transaction commits; past it the thread waits for the commit before it processes more.
pub(super) const HELD_BACK_MAX_BYTES: usize = 4 << 20;

/// A commit whose transaction is in flight.
#[derive(Debug)]
pub(super) struct Sealed {
    /// When the commit started.
    started: Instant,
    /// The tasks whose stores' writes it commits (tasks that start running meanwhile have
    /// none in it).
    tasks: BTreeSet<TaskId>,
    /// The input offsets it commits: those that moved since the last commit.
    offsets: BTreeMap<TopicPartition, i64>,
    /// Whether it commits anything — input offsets or records sent — as Kafka Streams
    /// commits only the tasks that need it: a commit of nothing is not counted.
    needed: bool,
}

/// The time a stream thread spent waiting for commits in flight, since it was last taken.
#[derive(Debug, Default)]
pub(super) struct CommitWaits(Duration);

impl CommitWaits {
    /// The time waited since the last call.
    pub(super) fn take(&mut self) -> Duration {
        std::mem::take(&mut self.0)
    }
}

impl TaskManager {
    /// Commits and waits for the commit to be done: what a revocation or a close needs.
    pub(super) async fn commit(&mut self, consumer: &mut Consumer) -> Result<(), ThreadError> {
        self.start_commit(consumer).await?;
        self.settle(consumer).await
    }

    /// Starts a commit once the last one is settled: the tasks' caches flushed, what they
    /// wrote sent, the input offsets taken. At-least-once the commit is done when this
    /// returns; exactly-once its transaction commits in the background.
    pub(super) async fn start_commit(
        &mut self,
        consumer: &mut Consumer,
    ) -> Result<(), ThreadError> {
        self.settle(consumer).await?;
        let started = Instant::now();
        for task in self.tasks.values_mut() {
            let id = task.id();
            task.flush_stores()
                .map_err(|source| ThreadError::Task { task: id, source })?;
        }
        self.send_written().await?;
        let mut offsets = self.committable(consumer).await;
        // An offset committed already is not committed again: an idle thread runs no
        // transaction at each interval.
        offsets.retain(|tp, offset| self.committed.get(tp) != Some(offset));
        let tasks = self.tasks.keys().copied().collect();
        if self.output.exactly_once() {
            for task in self.tasks.values_mut() {
                task.seal_stores();
            }
            let group = consumer.group_metadata();
            tracing::debug!(
                generation = group.as_ref().map(|g| g.generation_id),
                offsets = %Offsets(&offsets),
                "committing"
            );
            let needed = match self.output.start_commit(offsets.clone(), group) {
                Ok(started) => started,
                Err(e) => {
                    self.abort().await;
                    return Err(e);
                }
            };
            self.sealed = Some(Sealed {
                started,
                tasks,
                offsets,
                needed,
            });
            self.schedule.committed();
        } else {
            let waiting = Instant::now();
            let sent = self.output.await_deliveries().await?;
            if !offsets.is_empty() {
                consumer.commit(&offsets).await?;
            }
            self.commit_waits.0 += waiting.elapsed();
            let needed = sent || !offsets.is_empty();
            self.sealed = Some(Sealed {
                started,
                tasks,
                offsets,
                needed,
            });
            self.schedule.committed();
            self.settle(consumer).await?;
        }
        Ok(())
    }

    /// Waits for the commit in flight, if there is one, and settles it: its writes
    /// committed in the stores (and checkpointed when due) and the records held back
    /// meanwhile sent, in the next transaction. A commit that failed aborts the writes of
    /// both intervals.
    pub(super) async fn settle(&mut self, consumer: &mut Consumer) -> Result<(), ThreadError> {
        let Some(sealed) = self.sealed.take() else {
            return Ok(());
        };
        let waiting = Instant::now();
        let finished = self.output.finish_commit().await;
        self.commit_waits.0 += waiting.elapsed();
        // From the commit's start to its transaction's end (at-least-once, to now: it is
        // done when it is settled), not to whenever the thread came to settle it.
        let took = match finished {
            Ok(committed_at) => committed_at
                .unwrap_or_else(Instant::now)
                .saturating_duration_since(sealed.started),
            Err(e) => {
                tracing::debug!("the commit failed: {e}");
                self.abort().await;
                return Err(e);
            }
        };
        let checkpoint = self.checkpoint_due();
        self.commit_sealed(&sealed);
        for id in &sealed.tasks {
            let Some(task) = self.tasks.get_mut(id) else {
                continue;
            };
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
        self.schedule.checkpointed(checkpoint.is_some());
        if sealed.needed {
            self.metrics.committed(took);
        }
        self.report_figures(consumer);
        self.send_written().await
    }

    /// The sealed writes of `sealed`'s tasks are committed, each store's changelog reaching
    /// where the commit's sends did, and its input offsets are the ones committed.
    fn commit_sealed(&mut self, sealed: &Sealed) {
        self.committed.extend(
            sealed
                .offsets
                .iter()
                .map(|(tp, offset)| (tp.clone(), *offset)),
        );
        let reached = self.output.changelog_reached();
        for id in &sealed.tasks {
            if let Some(task) = self.tasks.get_mut(id) {
                let partition = id.partition;
                task.commit_stores(|topic| {
                    reached.get(&TopicPartition::new(topic, partition)).copied()
                });
            }
        }
    }

    /// Sends the tasks' output and changelog records, and forgets them.
    async fn send_written(&mut self) -> Result<(), ThreadError> {
        for task in self.tasks.values_mut() {
            self.output.send_written(task, &mut self.errors).await?;
        }
        Ok(())
    }

    /// Whether this commit applies the write buffers to sled (see [`CommitSchedule`]; a
    /// second is the interval while interactive queries come, as they read sled).
    ///
    /// [`CommitSchedule`]: super::schedule::CommitSchedule
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

    /// Exactly-once: throws the open transaction away, with the stores' writes and what the
    /// tasks hold to send. A commit in flight is waited for first: if it succeeded, its
    /// writes stay committed and only what came after is thrown away.
    pub(super) async fn abort(&mut self) {
        if let Some(sealed) = self.sealed.take() {
            if self.output.finish_commit().await.is_ok() {
                self.commit_sealed(&sealed);
            }
        }
        for task in self.tasks.values_mut() {
            task.abort_stores();
            task.clear_output();
            task.clear_changelog();
        }
        self.output.abort().await;
        // The tasks close dirty, their inputs read again from the group's commits: the
        // next commit sends every offset.
        self.committed.clear();
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

/// Input offsets as a log shows them: `topic-partition@offset`, comma-separated.
struct Offsets<'a>(&'a BTreeMap<TopicPartition, i64>);

impl std::fmt::Display for Offsets<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (tp, offset)) in self.0.iter().enumerate() {
            let comma = if i == 0 { "" } else { ", " };
            write!(f, "{comma}{tp}@{offset}")?;
        }
        Ok(())
    }
}
