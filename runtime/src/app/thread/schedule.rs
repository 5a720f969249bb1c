//! When a stream thread commits and when its commits checkpoint: a commit every
//! `commit.interval.ms`; a checkpoint — the stores' write buffers applied to sled — once
//! `state.checkpoint.interval.ms` has passed, when the thread is idle, or once the buffers
//! hold half the thread's share of `state.checkpoint.max.bytes` (so that one half lands in
//! sled while the other fills); and without fail, waiting, once they hold all of it.

use std::time::Duration;

use eddy_core::streams::store::Checkpoint;

use crate::time::Instant;

/// A thread's commit and checkpoint times, and the records processed since its last commit.
#[derive(Debug)]
pub(super) struct CommitSchedule {
    last_commit: Instant,
    /// When the stores' write buffers were last applied to sled.
    last_checkpoint: Instant,
    processed_since_commit: u64,
}

impl CommitSchedule {
    /// A schedule whose intervals start now.
    pub(super) fn new() -> Self {
        let now = Instant::now();
        Self {
            last_commit: now,
            last_checkpoint: now,
            processed_since_commit: 0,
        }
    }

    /// Counts `records` processed.
    pub(super) fn processed(&mut self, records: u64) {
        self.processed_since_commit += records;
    }

    /// Whether `interval` has passed since the last commit.
    pub(super) fn commit_due(&self, interval: Duration) -> bool {
        self.until_commit_due(interval).is_zero()
    }

    /// How long until `interval` has passed since the last commit: zero once it has.
    pub(super) fn until_commit_due(&self, interval: Duration) -> Duration {
        interval.saturating_sub(self.last_commit.elapsed())
    }

    /// Whether this commit applies the write buffers to sled: without fail, waiting for the
    /// last checkpoint to land, once they take `max_bytes` (`held`, the batches still
    /// landing counted); once they take half of it, once `interval` has passed, or when
    /// nothing was processed since the last commit (an idle thread has nothing to coalesce,
    /// and its state on disk catches up), unless a store's last checkpoint is still landing.
    pub(super) fn checkpoint_due(
        &self,
        held: usize,
        max_bytes: usize,
        interval: Duration,
    ) -> Option<Checkpoint> {
        if held >= max_bytes {
            Some(Checkpoint::Wait)
        } else if held >= max_bytes / 2
            || self.processed_since_commit == 0
            || self.last_checkpoint.elapsed() >= interval
        {
            Some(Checkpoint::IfLanded)
        } else {
            None
        }
    }

    /// A commit started: the next is due an interval from now.
    pub(super) fn committed(&mut self) {
        self.last_commit = Instant::now();
        self.processed_since_commit = 0;
    }

    /// A commit was settled, and checkpointed if `checkpointed`.
    pub(super) fn checkpointed(&mut self, checkpointed: bool) {
        if checkpointed {
            self.last_checkpoint = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn commits_and_checkpoints_fall_due_on_the_threads_clock() {
        let (max, interval) = (1_000, Duration::from_secs(5));
        let mut schedule = CommitSchedule::new();
        let commit_interval = Duration::from_millis(100);
        assert!(!schedule.commit_due(commit_interval));
        assert_eq!(schedule.until_commit_due(commit_interval), commit_interval);
        tokio::time::advance(Duration::from_millis(30)).await;
        assert_eq!(
            schedule.until_commit_due(commit_interval),
            Duration::from_millis(70)
        );
        // Idle: every commit checkpoints.
        assert_eq!(
            schedule.checkpoint_due(0, max, interval),
            Some(Checkpoint::IfLanded)
        );
        schedule.processed(10);
        assert_eq!(schedule.checkpoint_due(10, max, interval), None);
        assert_eq!(schedule.checkpoint_due(max / 2 - 1, max, interval), None);
        assert_eq!(
            schedule.checkpoint_due(max / 2, max, interval),
            Some(Checkpoint::IfLanded)
        );
        assert_eq!(
            schedule.checkpoint_due(max, max, interval),
            Some(Checkpoint::Wait)
        );

        tokio::time::advance(commit_interval).await;
        assert!(schedule.commit_due(commit_interval));
        assert_eq!(schedule.until_commit_due(commit_interval), Duration::ZERO);
        schedule.committed();
        schedule.checkpointed(false);
        assert!(!schedule.commit_due(commit_interval));
        schedule.processed(1);
        assert_eq!(schedule.checkpoint_due(1, max, interval), None);

        tokio::time::advance(interval).await;
        assert_eq!(
            schedule.checkpoint_due(1, max, interval),
            Some(Checkpoint::IfLanded)
        );
        schedule.committed();
        schedule.checkpointed(true);
        schedule.processed(1);
        assert_eq!(schedule.checkpoint_due(1, max, interval), None);
    }
}
