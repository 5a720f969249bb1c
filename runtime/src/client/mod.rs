//! eddy's Kafka client: what the runtime uses to reach any broker — the embedded one, an
//! `eddy broker`, Apache Kafka or Redpanda — through the wire protocol only.
//!
//! It holds a [`Producer`] (batching, compression, idempotence, transactions), a [`Consumer`]
//! (assignment or group membership with client-side assignors, `read_committed`) and an
//! [`Admin`] client. Below them, a connection pipelines the codec's typed requests over one
//! TCP connection; it is internal, so that eddy's API does not carry the codec's types.

mod admin;
mod cluster;
pub(crate) mod config;
mod config_error;
mod connection;
mod consumer;
mod offsets;
mod producer;
pub(crate) mod properties;
mod versions;

pub use admin::{
    Admin, GroupDescription, GroupMember, GroupState, ListedGroup, ListedTransaction, NewTopic,
    OffsetSpec, PartitionDescription, TopicDescription, TransactionDescription,
};
pub use config::{
    compression, Acks, ClientConfig, ConsumerConfig, IsolationLevel, OffsetReset, ProducerConfig,
};
pub use config_error::ConfigError;
pub(crate) use connection::Connection;
pub(crate) use consumer::PartitionRun;
pub use consumer::{
    Assignment, Assignor, Consumer, ConsumerRecord, CooperativeStickyAssignor, MemberSubscription,
    RangeAssignor, RebalanceListener, RebalanceProtocol, RoundRobinAssignor,
};
pub use eddy_core::wire::compression::Compression;
pub use producer::{
    Delivery, GroupMetadata, Outgoing, Producer, ProducerRecord, RecordMetadata, RecordParts,
    SentAll, Topic,
};

use kafka_protocol::error::ResponseError;

/// What can go wrong talking to a broker. Cheap to clone: a failed batch of a producer hands
/// the same error to every record in it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The socket failed or the broker closed the connection.
    #[error("connection to {addr} failed: {source}")]
    Io {
        /// The broker's address.
        addr: String,
        /// The I/O error.
        source: std::sync::Arc<std::io::Error>,
    },
    /// The broker closed the connection before answering.
    #[error("the connection to {0} closed before the response arrived")]
    Disconnected(String),
    /// The broker answered with an error code.
    #[error("{what} refused by {addr}: {}", error_name(*code))]
    Refused {
        /// The broker's address.
        addr: String,
        /// What was asked.
        what: String,
        /// Kafka's error code.
        code: i16,
    },
    /// A request could not be encoded or a response decoded.
    #[error("protocol error with {addr}: {reason}")]
    Protocol {
        /// The broker's address.
        addr: String,
        /// What the codec reported.
        reason: String,
    },
    /// Nothing answered in time.
    #[error("{0} timed out")]
    TimedOut(String),
    /// A setting is missing or out of range.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// The request cannot be made in the client's current state (a record sent outside a
    /// transaction by a transactional producer, a consumer polled with nothing assigned, …).
    #[error("{0}")]
    State(String),
    /// Another producer with the same `transactional.id` (or a newer epoch of this one) took
    /// over: this producer can do nothing more and must be closed.
    #[error("producer fenced: {0}")]
    Fenced(String),
    /// The current transaction cannot commit; abort it and begin another.
    #[error("the transaction must be aborted: {0}")]
    Abortable(String),
    /// Offsets were refused because the group rebalanced since the committing member's
    /// generation (Kafka's `CommitFailedException`): its partitions may have moved. A
    /// transaction carrying them must be aborted; the member rejoins.
    #[error("commit refused, the group rebalanced: {0}")]
    CommitFailed(String),
    /// A record is larger than the producer sends in one request (Kafka's
    /// `RecordTooLargeException`); it was not sent.
    #[error("a record of {size} bytes is larger than max.request.size ({max})")]
    RecordTooLarge {
        /// The record's size as it would be sent.
        size: usize,
        /// `max.request.size`.
        max: usize,
    },
    /// The client was closed.
    #[error("the client is closed")]
    Closed,
}

impl ClientError {
    /// Whether trying again later may succeed: connection failures, timeouts, and broker
    /// errors Kafka calls retriable (no leader yet, coordinator loading, …).
    pub fn is_retriable(&self) -> bool {
        match self {
            Self::Io { .. } | Self::Disconnected(_) | Self::TimedOut(_) => true,
            Self::Refused { code, .. } => retriable(*code),
            _ => false,
        }
    }

    /// The Kafka error code the broker answered with, if that is what went wrong.
    pub fn code(&self) -> Option<i16> {
        match self {
            Self::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The Kafka error the broker answered with, if that is what went wrong: what the client
    /// matches on, rather than bare codes.
    pub(crate) fn error(&self) -> Option<ResponseError> {
        self.code().and_then(ResponseError::try_from_code)
    }
}

/// Whether Kafka calls the error `code` retriable.
pub(crate) fn retriable(code: i16) -> bool {
    ResponseError::try_from_code(code).is_some_and(|e| e.is_retriable())
}

/// Kafka's name for an error code.
fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        Some(e) => format!("{e} (error {code})"),
        None => "no error".to_string(),
    }
}
