//! Restoration: a task's logged stores are filled from their changelogs before the task
//! processes a record. Each store resumes from the changelog offset its inner store reached
//! (nothing at all when it is up to date: after a clean close, or with state kept on disk),
//! reads committed records only up to the changelog's end, and records the end it reached.

use std::time::{Duration, Instant};

use eddy_core::log::TopicPartition;
use eddy_core::streams::internals::StreamTask;
use eddy_core::streams::store::ChangelogRecord;

use crate::client::{ClientError, Consumer};

/// Why a task's state could not be restored.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The changelog could not be read.
    #[error("restoring from {changelog}: {source}")]
    Client {
        /// The changelog partition.
        changelog: TopicPartition,
        /// What went wrong.
        source: ClientError,
    },
    /// A changelog record could not be applied to its store.
    #[error("restoring from {changelog} at offset {offset}: {reason}")]
    Record {
        /// The changelog partition.
        changelog: TopicPartition,
        /// The record's offset.
        offset: i64,
        /// What is wrong with it.
        reason: String,
    },
    /// The store holds more than its changelog: its state directory belongs to another
    /// cluster or another incarnation of the application.
    #[error(
        "the store of {changelog} reaches offset {offset}, past the changelog's end {end}: \
         its state belongs elsewhere (clean up the state directory)"
    )]
    AheadOfChangelog {
        /// The changelog partition.
        changelog: TopicPartition,
        /// The offset the store claims.
        offset: i64,
        /// The changelog's end.
        end: i64,
    },
    /// The changelog's end was not reached in time.
    #[error("restoring from {changelog}: at offset {at} of {end} after {waited:?}")]
    TimedOut {
        /// The changelog partition.
        changelog: TopicPartition,
        /// Where restoration was.
        at: i64,
        /// Where the changelog ends.
        end: i64,
        /// How long it waited without a record.
        waited: Duration,
    },
}

/// What a restoration did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restored {
    /// Changelog records applied.
    pub records: u64,
    /// How long it took.
    pub elapsed: Duration,
}

/// How long restoration waits for a changelog's next records before it gives up.
const STALL: Duration = Duration::from_secs(30);

/// Restores `task`'s logged stores with `consumer` (outside any group, `read_committed`).
pub async fn restore_task(
    consumer: &mut Consumer,
    task: &mut StreamTask,
) -> Result<Restored, RestoreError> {
    let started = Instant::now();
    let partition = task.id().partition;
    let mut restored = Restored::default();
    for (changelog, store) in task.logged_stores() {
        let tp = TopicPartition::new(changelog, partition);
        let client = |source| RestoreError::Client {
            changelog: tp.clone(),
            source,
        };
        consumer.assign(std::slice::from_ref(&tp)).map_err(client)?;
        consumer
            .seek_to_end(std::slice::from_ref(&tp))
            .await
            .map_err(client)?;
        let end = consumer.position(&tp).await.map_err(client)?;
        match store.changelog_offset() {
            Some(offset) if offset > end => {
                return Err(RestoreError::AheadOfChangelog {
                    changelog: tp.clone(),
                    offset,
                    end,
                });
            }
            Some(offset) => consumer.seek(&tp, offset).map_err(client)?,
            None => consumer
                .seek_to_beginning(std::slice::from_ref(&tp))
                .await
                .map_err(client)?,
        }
        let mut at = consumer.position(&tp).await.map_err(client)?;
        let mut last_progress = Instant::now();
        while at < end {
            let records = consumer
                .poll(Duration::from_millis(100))
                .await
                .map_err(client)?;
            for record in records {
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
                restored.records += 1;
            }
            let now = consumer.position(&tp).await.map_err(client)?;
            if now > at {
                last_progress = Instant::now();
            } else if last_progress.elapsed() > STALL {
                return Err(RestoreError::TimedOut {
                    changelog: tp.clone(),
                    at,
                    end,
                    waited: STALL,
                });
            }
            at = now;
        }
        // The store's contents now reach the changelog's end.
        store.commit(Some(end.max(at)));
        if let Some(reason) = store.failure() {
            return Err(RestoreError::Record {
                changelog: tp,
                offset: at,
                reason,
            });
        }
    }
    consumer
        .assign(&[])
        .map_err(|source| RestoreError::Client {
            changelog: TopicPartition::new("", partition),
            source,
        })?;
    restored.elapsed = started.elapsed();
    Ok(restored)
}
