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
    #[error("the connection to {addr} closed before the response arrived")]
    Disconnected {
        /// The broker's address.
        addr: String,
    },
    /// No connection to broker `node` is open: it is not in the cluster's metadata, or the
    /// connection to it is still being made.
    #[error("no connection to broker {node} is open yet")]
    NotConnected {
        /// The broker's node id.
        node: i32,
    },
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
    /// over (Kafka's `ProducerFencedException`): this producer can do nothing more and must
    /// be closed. `source` is how the broker said so.
    #[error("producer fenced: {source}")]
    Fenced {
        /// The broker's refusal.
        source: Box<ClientError>,
    },
    /// Another member joined the group with this consumer's `group.instance.id` (Kafka's
    /// `FencedInstanceIdException`): this consumer can do nothing more in the group.
    #[error("another member joined group {group} with group.instance.id {instance_id}")]
    FencedInstanceId {
        /// The group.
        group: String,
        /// The static member's id.
        instance_id: String,
    },
    /// The current transaction cannot commit; abort it and begin another. `source` is what
    /// went wrong in it.
    #[error("the transaction must be aborted: {source}")]
    Abortable {
        /// The failure that made the transaction unable to commit.
        source: Box<ClientError>,
    },
    /// A record was not sent because its transaction was aborted (Kafka's
    /// `TransactionAbortedException`).
    #[error("the transaction was aborted before the record was sent")]
    TransactionAborted,
    /// Offsets were refused because the group rebalanced since the committing member's
    /// generation (Kafka's `CommitFailedException`): its partitions may have moved. A
    /// transaction carrying them must be aborted; the member rejoins. `source` is the
    /// broker's refusal.
    #[error("commit refused, the group rebalanced: {source}")]
    CommitFailed {
        /// The broker's refusal.
        source: Box<ClientError>,
    },
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
            Self::Io { .. }
            | Self::Disconnected { .. }
            | Self::NotConnected { .. }
            | Self::TimedOut(_) => true,
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

    /// What a transaction's failure becomes for its caller: a fenced producer, a refused
    /// offset commit, an abortable transaction or an aborted one stay what they are; any
    /// other error makes the transaction abortable, kept as the source.
    pub(crate) fn in_transaction(self) -> ClientError {
        match self {
            e @ (Self::Fenced { .. }
            | Self::Abortable { .. }
            | Self::CommitFailed { .. }
            | Self::TransactionAborted) => e,
            other => Self::Abortable {
                source: Box::new(other),
            },
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

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::ClientError;

    #[test]
    fn a_failure_inside_a_transaction_keeps_what_went_wrong_as_its_source() {
        let refused = ClientError::Refused {
            addr: "b:9092".into(),
            what: "Produce".into(),
            code: 87, // INVALID_RECORD
        };
        let abortable = refused.clone().in_transaction();
        let ClientError::Abortable { source } = &abortable else {
            panic!("{abortable:?}");
        };
        assert_eq!(source.code(), Some(87));
        assert_eq!(
            abortable.source().map(|s| s.to_string()),
            Some(refused.to_string())
        );
        // What already says what to do stays as it is, not wrapped again.
        assert!(matches!(
            abortable.clone().in_transaction(),
            ClientError::Abortable { source } if source.code() == Some(87)
        ));
        let fenced = ClientError::Fenced {
            source: Box::new(refused),
        };
        assert!(matches!(
            fenced.in_transaction(),
            ClientError::Fenced { .. }
        ));
        assert!(matches!(
            ClientError::TransactionAborted.in_transaction(),
            ClientError::TransactionAborted
        ));
        assert!(ClientError::NotConnected { node: 3 }.is_retriable());
        assert!(!abortable.is_retriable());
    }
}
