//! The thread that applies checkpoints to sled: a task's write buffer hands over each
//! checkpoint's committed writes as one batch and keeps serving reads of them, while this
//! thread builds the sled batch and applies it, in the order handed over, so that the stream
//! thread goes on processing. A batch lands whole or not at all, its changelog offset with it.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, OnceLock};

use eddy_core::streams::store::{BatchDone, SharedWrites};

use super::sled_store::{checkpoint_writes, record_offset, Pages};

/// A batch to apply to a store's pages.
pub(crate) struct Job {
    pub(crate) pages: Pages,
    pub(crate) writes: SharedWrites,
    pub(crate) changelog_offset: Option<i64>,
    /// The store's first failure: what a batch that cannot be applied sets.
    pub(crate) failure: Arc<OnceLock<String>>,
    pub(crate) done: BatchDone,
}

impl Job {
    fn run(self) {
        let writes = checkpoint_writes(&self.writes);
        let offset = self.changelog_offset;
        let result = self
            .pages
            .apply(&writes, |batch| record_offset(batch, offset))
            .map_err(|e| e.to_string());
        if let Err(e) = &result {
            let _ = self.failure.set(e.clone());
        }
        self.done.finish(result);
    }
}

/// Where batches go to be applied; clones share the thread, which ends with the last one.
#[derive(Debug, Clone)]
pub(crate) struct Applier {
    jobs: Sender<Job>,
}

impl Applier {
    /// Starts the thread.
    pub(crate) fn start() -> std::io::Result<Self> {
        let (jobs, queue) = channel::<Job>();
        std::thread::Builder::new()
            .name("eddy-state-checkpoints".into())
            .spawn(move || {
                for job in queue {
                    job.run();
                    crate::allocator::release_free_memory();
                }
            })?;
        Ok(Self { jobs })
    }

    /// Queues `job`; gives it back if the thread is gone.
    pub(crate) fn submit(&self, job: Job) -> Result<(), Job> {
        self.jobs.send(job).map_err(|e| e.0)
    }
}
