//! eddy's Kafka client: what the runtime uses to reach any broker — the embedded one, an
//! `eddy broker`, Apache Kafka or Redpanda — through the wire protocol only.
//!
//! So far it holds the foundation: a [`Connection`] that pipelines typed requests over one
//! TCP connection and matches responses by correlation id, and an [`Admin`] client for groups
//! and offsets.

mod admin;
mod connection;

pub use admin::{
    Admin, GroupDescription, GroupMember, ListedGroup, ListedTransaction, OffsetSpec,
    TransactionDescription,
};
pub use connection::{Connection, EncodedRequest};

/// The Kafka protocol's message types, for requests sent through a [`Connection`].
pub use kafka_protocol as protocol;

/// What can go wrong talking to a broker.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket failed or the broker closed the connection.
    #[error("connection to {addr} failed: {source}")]
    Io {
        /// The broker's address.
        addr: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The broker closed the connection before answering.
    #[error("the connection to {0} closed before the response arrived")]
    Closed(String),
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
}

/// Kafka's name for an error code.
fn error_name(code: i16) -> String {
    match kafka_protocol::error::ResponseError::try_from_code(code) {
        Some(e) => format!("{e} (error {code})"),
        None => "no error".to_string(),
    }
}
