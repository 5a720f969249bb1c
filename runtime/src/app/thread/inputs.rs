//! A stream thread's input partitions: which active task (running or being restored) reads
//! each, and the next offset of each once its records were processed — what the thread
//! commits.

use std::collections::{BTreeMap, HashMap};

use eddy_core::log::TopicPartition;
use eddy_core::streams::TaskId;

/// The input partitions of a thread's active tasks.
#[derive(Debug, Default)]
pub(super) struct Inputs {
    /// Which task reads each partition.
    readers: HashMap<TopicPartition, TaskId>,
    /// The next input offset of each partition, once processed.
    processed: BTreeMap<TopicPartition, i64>,
}

impl Inputs {
    /// `task` reads `partitions`.
    pub(super) fn add(&mut self, task: TaskId, partitions: &[TopicPartition]) {
        for tp in partitions {
            self.readers.insert(tp.clone(), task);
        }
    }

    /// The task that reads `tp`.
    pub(super) fn reader(&self, tp: &TopicPartition) -> Option<TaskId> {
        self.readers.get(tp).copied()
    }

    /// Every partition read, with its task.
    pub(super) fn readers(&self) -> impl Iterator<Item = (&TopicPartition, TaskId)> {
        self.readers.iter().map(|(tp, &id)| (tp, id))
    }

    /// `tp`'s records were processed up to `next`.
    pub(super) fn processed(&mut self, tp: TopicPartition, next: i64) {
        self.processed.insert(tp, next);
    }

    /// The next offset to process of `tp`, if any of its records were.
    pub(super) fn processed_to(&self, tp: &TopicPartition) -> Option<i64> {
        self.processed.get(tp).copied()
    }

    /// `task` no longer reads here: its partitions' offsets are another member's to commit.
    pub(super) fn remove(&mut self, task: TaskId) {
        self.readers.retain(|_, id| *id != task);
        let readers = &self.readers;
        self.processed.retain(|tp, _| readers.contains_key(tp));
    }

    /// Forgets every partition, and returns them.
    pub(super) fn clear(&mut self) -> Vec<TopicPartition> {
        self.processed.clear();
        self.readers.drain().map(|(tp, _)| tp).collect()
    }
}
