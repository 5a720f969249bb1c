//! Appends in the order they were queued, made durable, on a blocking thread: how a
//! coordinator writes its internal topic without holding its lock across the disk and without
//! waiting for the disk on the async workers. The coordinator decides on its records under its
//! lock and queues them there (queueing never waits), so the records of its partitions are
//! appended in the order they were decided; it answers once [`QueuedAppend::durable`] says
//! they are stored. One thread runs whatever is queued at once, appending every batch and then
//! fsyncing each partition once for all of them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use eddy_core::log::Timestamp;
use tokio::sync::oneshot;

use super::log::Origin;
use super::{Partition, StorageError};

/// Checks that a producer's transaction includes the partition (producer id, epoch), for a
/// transactional batch a coordinator writes on the producer's behalf (TxnOffsetCommit).
pub(crate) type Verify = Arc<dyn Fn(i64, i16) -> Result<(), StorageError> + Send + Sync>;

/// One queued append.
struct Job {
    partition: Arc<Partition>,
    batch: Bytes,
    now_ms: Timestamp,
    verify: Option<Verify>,
    done: oneshot::Sender<Result<i64, StorageError>>,
}

/// The appends of one coordinator, in order.
#[derive(Debug, Default)]
pub(crate) struct AppendQueue {
    queue: Arc<Mutex<Queue>>,
}

/// Appends waiting, and whether a blocking thread is running them.
#[derive(Debug, Default)]
struct Queue {
    jobs: VecDeque<Job>,
    running: bool,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("partition", self.partition.topic_partition())
            .field("bytes", &self.batch.len())
            .finish()
    }
}

/// An append on its way to the disk.
#[derive(Debug)]
pub(crate) struct QueuedAppend {
    done: oneshot::Receiver<Result<i64, StorageError>>,
}

impl QueuedAppend {
    /// Waits until the batch is appended and durable: the offset of its last record.
    pub(crate) async fn durable(self) -> Result<i64, StorageError> {
        self.done.await.map_err(|_| {
            StorageError::Io(std::io::Error::other("the append was dropped unfinished"))
        })?
    }
}

impl AppendQueue {
    /// Queues `batch` (whole record batches a coordinator built) for `partition`; `verify`
    /// makes it a producer's transactional batch, checked as a producer's would be. Never
    /// waits: it may be called under a lock. Must be called within a tokio runtime.
    pub(crate) fn push(
        &self,
        partition: &Arc<Partition>,
        batch: Bytes,
        now_ms: Timestamp,
        verify: Option<Verify>,
    ) -> QueuedAppend {
        let (done, outcome) = oneshot::channel();
        let job = Job {
            partition: Arc::clone(partition),
            batch,
            now_ms,
            verify,
            done,
        };
        let mut queue = lock(&self.queue);
        queue.jobs.push_back(job);
        if !queue.running {
            // One blocking thread runs the appends while any are waiting, then returns.
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    queue.running = true;
                    let shared = Arc::clone(&self.queue);
                    drop(runtime.spawn_blocking(move || run(&shared)));
                }
                Err(e) => {
                    if let Some(job) = queue.jobs.pop_back() {
                        let _ = job
                            .done
                            .send(Err(StorageError::Io(std::io::Error::other(e))));
                    }
                }
            }
        }
        QueuedAppend { done: outcome }
    }
}

fn lock(queue: &Mutex<Queue>) -> std::sync::MutexGuard<'_, Queue> {
    queue.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs the queued appends in order until none is left. Should an append panic, the queue is
/// left for the next push to start again, and the appends it held answer with an error.
fn run(queue: &Mutex<Queue>) {
    struct Stopped<'a>(&'a Mutex<Queue>);
    impl Drop for Stopped<'_> {
        fn drop(&mut self) {
            // Only an unwinding runner stops here; one that returns has already said so,
            // and another may be running since.
            if std::thread::panicking() {
                let mut queue = lock(self.0);
                queue.jobs.clear();
                queue.running = false;
            }
        }
    }
    let _stopped = Stopped(queue);
    loop {
        let jobs = {
            let mut queue = lock(queue);
            if queue.jobs.is_empty() {
                // Cleared under the same lock a push checks: no job is left behind.
                queue.running = false;
                return;
            }
            std::mem::take(&mut queue.jobs)
        };
        // Every waiting batch is appended first, then made durable: the first wait of each
        // partition fsyncs for all of its batches (group commit), the others find them durable.
        let appended: Vec<_> = jobs
            .into_iter()
            .map(|job| {
                let outcome = match &job.verify {
                    Some(verify) => job.partition.append_from(
                        &job.batch,
                        job.now_ms,
                        Origin::TxnOffsetCommit {
                            verify: verify.as_ref(),
                        },
                    ),
                    None => job.partition.append(&job.batch, job.now_ms),
                };
                (job, outcome.map(|info| info.last_offset))
            })
            .collect();
        for (job, outcome) in appended {
            let durable = outcome.and_then(|last_offset| {
                job.partition.wait_durable_blocking(last_offset)?;
                Ok(last_offset)
            });
            let _ = job.done.send(durable);
        }
    }
}
