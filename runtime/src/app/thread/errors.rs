//! The error handlers of a stream thread (`deserialization.exception.handler`,
//! `processing.exception.handler`, `production.exception.handler`): a record that fails
//! either stops the task (fail, the default) or is logged, counted as dropped and skipped
//! (continue), and with `errors.dead.letter.queue.topic.name` also written to that topic as
//! KIP-1034 writes it: the input's raw key and value at its timestamp, with the error, its
//! message and chain, and the input's topic, partition and offset in `__streams.errors.*`
//! headers. Under exactly-once the dead letter is part of the transaction.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bytes::Bytes;
use eddy_core::log::Header;
use eddy_core::streams::internals::{ErrorOrigin, FailedRecord};
use eddy_core::streams::{StreamsError, TaskId};

use crate::app::{ErrorHandling, StreamsConfig};
use crate::client::{ClientError, ProducerRecord, Topic};

/// The headers of a dead letter (KIP-1034).
pub(crate) mod header {
    pub(crate) const EXCEPTION: &str = "__streams.errors.exception";
    pub(crate) const MESSAGE: &str = "__streams.errors.message";
    pub(crate) const STACKTRACE: &str = "__streams.errors.stacktrace";
    pub(crate) const TOPIC: &str = "__streams.errors.topic";
    pub(crate) const PARTITION: &str = "__streams.errors.partition";
    pub(crate) const OFFSET: &str = "__streams.errors.offset";
}

/// What becomes of a failed record.
pub(super) enum Decision {
    /// The task stops with the error (naming the record, when it was one's).
    Fail(Option<FailedRecord>),
    /// The record is skipped; the dead letter, if any, is to be sent.
    Skip(Option<ProducerRecord>),
}

/// The configured handlers, and what they dropped.
pub(super) struct ErrorHandlers {
    deserialization: ErrorHandling,
    processing: ErrorHandling,
    production: ErrorHandling,
    dead_letters: Option<Topic>,
    /// Records skipped, by the kind of failure (`deserialization`, `processing`,
    /// `production`).
    pub(super) dropped: BTreeMap<&'static str, u64>,
}

impl ErrorHandlers {
    pub(super) fn new(config: &StreamsConfig) -> Self {
        Self {
            deserialization: config.deserialization_handling,
            processing: config.processing_handling,
            production: config.production_handling,
            dead_letters: config.dead_letter_queue_topic.as_deref().map(Topic::from),
            dropped: BTreeMap::new(),
        }
    }

    /// Decides on a record task `task` failed on. Errors that are not a record's (no
    /// `failed`) stop the task.
    pub(super) fn on_record_error(
        &mut self,
        task: TaskId,
        error: &StreamsError,
        failed: Option<FailedRecord>,
    ) -> Decision {
        let Some(failed) = failed else {
            return Decision::Fail(None);
        };
        let (handling, kind) = match failed.origin {
            ErrorOrigin::Deserialization => (self.deserialization, "deserialization"),
            ErrorOrigin::Processing => (self.processing, "processing"),
            ErrorOrigin::Serialization => (self.production, "production"),
        };
        if handling == ErrorHandling::Fail {
            return Decision::Fail(Some(failed));
        }
        tracing::warn!(
            task = %task,
            topic = %failed.topic,
            partition = failed.partition,
            offset = failed.offset,
            processor = %failed.processor,
            "skipping a record that failed ({kind}): {error}"
        );
        *self.dropped.entry(kind).or_insert(0) += 1;
        let letter = self.dead_letters.clone().map(|topic| {
            dead_letter(
                topic,
                failed.key,
                failed.value,
                failed.timestamp,
                &error_kind(error),
                error,
                (&failed.topic, failed.partition, failed.offset),
            )
        });
        Decision::Skip(letter)
    }

    /// Decides on an output of task `task` the producer refused before sending it (larger
    /// than `max.request.size`, say). Outputs are sent apart from the input they came from:
    /// its dead letter names the output's topic and partition (-1 when the partitioner was
    /// to choose), and offset -1.
    pub(super) fn on_send_error(
        &mut self,
        task: TaskId,
        error: &ClientError,
        refused: Option<ProducerRecord>,
    ) -> Decision {
        if self.production == ErrorHandling::Fail {
            return Decision::Fail(None);
        }
        tracing::warn!(task = %task, "skipping an output the producer refused: {error}");
        *self.dropped.entry("production").or_insert(0) += 1;
        let letter = match (self.dead_letters.clone(), refused) {
            (Some(topic), Some(record)) => {
                let output = record.topic.to_string();
                let partition = record.partition.unwrap_or(-1);
                Some(dead_letter(
                    topic,
                    record.key,
                    record.value,
                    record.timestamp.unwrap_or(-1),
                    "eddy::client::ClientError",
                    error,
                    (&output, partition, -1),
                ))
            }
            _ => None,
        };
        Decision::Skip(letter)
    }
}

/// The name of the error's kind, as a dead letter's `exception` header gives it.
fn error_kind(error: &StreamsError) -> String {
    let variant = match error {
        StreamsError::Serde(_) => "Serde",
        StreamsError::InvalidTimestamp { .. } => "InvalidTimestamp",
        StreamsError::UnknownStore { .. } => "UnknownStore",
        StreamsError::UnknownChild { .. } => "UnknownChild",
        StreamsError::Store { .. } => "Store",
        StreamsError::Processor { .. } => "Processor",
    };
    format!("eddy::streams::StreamsError::{variant}")
}

/// A dead letter of `key` and `value` for `error`, which happened on the input at `origin`
/// (topic, partition, offset).
fn dead_letter(
    topic: Topic,
    key: Option<Bytes>,
    value: Option<Bytes>,
    timestamp: i64,
    kind: &str,
    error: &dyn std::error::Error,
    origin: (&str, i32, i64),
) -> ProducerRecord {
    let message = error.to_string();
    // Rust errors carry no stack: the chain of causes stands in for it.
    let mut chain = format!("{kind}: {message}");
    let mut source = error.source();
    while let Some(cause) = source {
        let _ = write!(chain, "\ncaused by: {cause}");
        source = cause.source();
    }
    let text = |key: &str, value: String| Header {
        key: key.to_string(),
        value: Some(Bytes::from(value)),
    };
    let (input, partition, offset) = origin;
    ProducerRecord {
        topic,
        partition: None,
        key,
        value,
        headers: vec![
            text(header::EXCEPTION, format!("{kind}: {message}")),
            text(header::MESSAGE, message),
            text(header::STACKTRACE, chain),
            text(header::TOPIC, input.to_string()),
            text(header::PARTITION, partition.to_string()),
            text(header::OFFSET, offset.to_string()),
        ],
        timestamp: (timestamp >= 0).then_some(timestamp),
    }
}
