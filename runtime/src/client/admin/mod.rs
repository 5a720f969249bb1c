//! Administration through the wire protocol, against any Kafka-compatible broker: topics
//! (create, delete, add partitions, list, describe), offsets by position or time, consumer
//! groups and their committed offsets, and transactions. What `eddy topics`, `eddy groups`
//! and `eddy transactions` are built on.
//!
//! Requests go where a Kafka admin client sends them: metadata and topic changes to any
//! broker, offset lookups to each partition's leader, group requests to the group's
//! coordinator, transaction lookups to the transaction coordinator.

mod groups;
mod topics;
mod transactions;

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::protocol::StrBytes;

pub use groups::{GroupDescription, GroupMember, GroupState, ListedGroup};
pub use topics::{NewTopic, PartitionDescription, TopicDescription};
pub use transactions::{ListedTransaction, TransactionDescription};

use super::cluster::Cluster;
use super::{ClientConfig, ClientError};
use crate::time::Instant;

/// Which offset to look up in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The first offset the partition holds.
    Earliest,
    /// The offset after the last visible record.
    Latest,
    /// The first record at or after this time (ms since the epoch); the latest offset if
    /// there is none.
    Timestamp(i64),
}

/// An administrative client.
#[derive(Debug, Clone)]
pub struct Admin {
    cluster: Arc<Cluster>,
}

pub(crate) fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

impl Admin {
    /// An admin client for the cluster behind `bootstrap` (`host:port`, or several
    /// comma-separated), failing at once if no bootstrap server answers.
    pub async fn connect(bootstrap: &str) -> Result<Self, ClientError> {
        Self::new(ClientConfig::new(bootstrap).client_id("eddy-admin")).await
    }

    /// An admin client with these settings, failing at once if no bootstrap server answers.
    pub async fn new(config: ClientConfig) -> Result<Self, ClientError> {
        let cluster = Cluster::new(config)?;
        cluster.any_broker().await?;
        Ok(Self { cluster })
    }

    fn refused(what: &str, code: i16) -> ClientError {
        ClientError::Refused {
            addr: String::new(),
            what: what.to_string(),
            code,
        }
    }

    /// The deadline of one admin call: retriable failures are retried until then.
    fn deadline(&self) -> Instant {
        Instant::now()
            + self
                .cluster
                .config
                .request_timeout
                .max(Duration::from_secs(5))
    }
}
