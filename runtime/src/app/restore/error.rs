//! Why a task's state could not be restored.

use std::time::Duration;

use eddy_core::log::TopicPartition;

use crate::client::ClientError;

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
    #[error(
        "restoring from {changelog}: still at offset {at} of {end} after {waited:?}; \
         read committed, so a transaction open from there holds restoration back \
         (a hanging one if it outlived its timeout)"
    )]
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
