//! The state a stream thread holds beyond the tasks it runs — tasks' state left on disk, and
//! how far each held task's changelogs reach — from which it tells the group's leader where
//! its tasks' state is, so that tasks return to the instance that has them.

use std::collections::{BTreeMap, BTreeSet};

use eddy_core::streams::TaskId;

use crate::app::assignor::placement::RUNNING;

/// What a thread reports of the state it holds.
#[derive(Debug, Default)]
pub(super) struct HeldState {
    /// The offset sums of state on disk that no task here holds.
    on_disk: BTreeMap<TaskId, i64>,
    /// The sum of each held task's changelog ends, as last seen.
    ends: BTreeMap<TaskId, i64>,
}

impl HeldState {
    /// State found on disk at start: its tasks' offset sums.
    pub(super) fn new(on_disk: BTreeMap<TaskId, i64>) -> Self {
        Self {
            on_disk,
            ends: BTreeMap::new(),
        }
    }

    /// A task of this thread runs on its state.
    pub(super) fn taken(&mut self, task: TaskId) {
        self.on_disk.remove(&task);
    }

    /// A task went; its state stays on disk, where its stores reached `offset_sum`.
    pub(super) fn left(&mut self, task: TaskId, offset_sum: i64) {
        self.on_disk.insert(task, offset_sum);
    }

    /// Forgets the state on disk of the tasks `gone` says were cleaned away.
    pub(super) fn forget_on_disk(&mut self, gone: impl Fn(TaskId) -> bool) {
        self.on_disk.retain(|&id, _| !gone(id));
    }

    /// The changelogs of `task` end at `end` (summed).
    pub(super) fn saw_end(&mut self, task: TaskId, end: i64) {
        self.ends.insert(task, end);
    }

    /// The offset sums to report: the state on disk, that of tasks being restored and of
    /// standbys (`updating`), and [`RUNNING`] for the tasks that run.
    pub(super) fn offset_sums(
        &self,
        updating: BTreeMap<TaskId, i64>,
        running: &BTreeSet<TaskId>,
    ) -> BTreeMap<TaskId, i64> {
        let mut sums = self.on_disk.clone();
        sums.extend(updating);
        sums.extend(running.iter().map(|&id| (id, RUNNING)));
        sums
    }

    /// The changelog ends last seen of the tasks in `held`.
    pub(super) fn ends_of(&self, held: &BTreeMap<TaskId, i64>) -> BTreeMap<TaskId, i64> {
        self.ends
            .iter()
            .filter(|(id, _)| held.contains_key(id))
            .map(|(&id, &end)| (id, end))
            .collect()
    }
}
