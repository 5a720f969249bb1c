//! Appends in the order they were queued, on a blocking thread: how a coordinator writes its
//! internal topic without holding its lock across the disk and without waiting for the disk
//! on the async workers. The coordinator decides on its records under its lock and queues
//! them there (queueing never waits), so the records of its partitions are appended in the
//! order they were decided; it answers once [`QueuedAppend::durable`] says they are stored.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use eddy_core::log::Timestamp;
use tokio::sync::{mpsc, oneshot};

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
#[derive(Debug)]
pub(crate) struct AppendQueue {
    jobs: mpsc::UnboundedSender<Job>,
    /// Taken by the first append, which starts the task that runs them.
    receiver: Mutex<Option<mpsc::UnboundedReceiver<Job>>>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("partition", self.partition.topic_partition())
            .field("bytes", &self.batch.len())
            .finish()
    }
}

/// An append on its way: the partition it goes to and its outcome.
#[derive(Debug)]
pub(crate) struct QueuedAppend {
    partition: Arc<Partition>,
    done: oneshot::Receiver<Result<i64, StorageError>>,
}

impl QueuedAppend {
    /// Waits until the batch is appended: the offset of its last record.
    pub(crate) async fn appended(self) -> Result<(Arc<Partition>, i64), StorageError> {
        let last_offset = self.done.await.map_err(|_| {
            StorageError::Io(std::io::Error::other("the append was dropped unfinished"))
        })??;
        Ok((self.partition, last_offset))
    }

    /// Waits until the batch is appended and durable: the offset of its last record.
    pub(crate) async fn durable(self) -> Result<i64, StorageError> {
        let (partition, last_offset) = self.appended().await?;
        partition.wait_durable(last_offset).await?;
        Ok(last_offset)
    }
}

impl Default for AppendQueue {
    fn default() -> Self {
        let (jobs, receiver) = mpsc::unbounded_channel();
        Self {
            jobs,
            receiver: Mutex::new(Some(receiver)),
        }
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
        if let Some(receiver) = self
            .receiver
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(run(receiver));
                }
                Err(e) => {
                    let _ = done.send(Err(StorageError::Io(std::io::Error::other(e))));
                    return QueuedAppend {
                        partition: Arc::clone(partition),
                        done: outcome,
                    };
                }
            }
        }
        let job = Job {
            partition: Arc::clone(partition),
            batch,
            now_ms,
            verify,
            done,
        };
        // A send fails only once the runtime that ran the queue is gone; the dropped job
        // then answers its append with an error.
        let _ = self.jobs.send(job);
        QueuedAppend {
            partition: Arc::clone(partition),
            done: outcome,
        }
    }
}

/// Runs the queued appends in order, as many as are waiting at once on one blocking thread.
async fn run(mut receiver: mpsc::UnboundedReceiver<Job>) {
    let mut jobs = Vec::new();
    while receiver.recv_many(&mut jobs, 256).await > 0 {
        let batch = std::mem::take(&mut jobs);
        // A panic drops the rest, whose appends then answer with an error.
        let _ = tokio::task::spawn_blocking(move || {
            for job in batch {
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
                let _ = job.done.send(outcome.map(|info| info.last_offset));
            }
        })
        .await;
    }
}
