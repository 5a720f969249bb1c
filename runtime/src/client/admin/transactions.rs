//! Transactions as the coordinators show them: every transactional id, and one id's
//! producer and open transaction.

use eddy_core::log::TopicPartition;
use kafka_protocol::messages::{
    DescribeTransactionsRequest, ListTransactionsRequest, TransactionalId,
};

use super::{text, Admin};
use crate::client::cluster::CoordinatorType;
use crate::client::ClientError;

/// A transactional id as ListTransactions shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTransaction {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// `Ongoing`, `CompleteCommit`, …
    pub state: String,
}

/// A transactional id's state as DescribeTransactions shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionDescription {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer id and epoch.
    pub producer: (i64, i16),
    /// `Empty`, `Ongoing`, `PrepareCommit`, `CompleteCommit`, …
    pub state: String,
    /// The producer's `transaction.timeout.ms`.
    pub timeout_ms: i32,
    /// When the open transaction began (ms since the epoch), or -1.
    pub start_time_ms: i64,
    /// The partitions of the open transaction.
    pub partitions: Vec<TopicPartition>,
}

impl Admin {
    /// Every transactional id the broker knows, sorted.
    pub async fn list_transactions(&self) -> Result<Vec<ListedTransaction>, ClientError> {
        let cluster = &self.cluster;
        let response = cluster
            .retry(self.deadline(), || async {
                let broker = cluster.any_broker().await?;
                let response = cluster
                    .send(&broker, &ListTransactionsRequest::default())
                    .await?;
                match response.error_code {
                    0 => Ok(response),
                    code => Err(Self::refused("ListTransactions", code)),
                }
            })
            .await?;
        let mut listed: Vec<_> = response
            .transaction_states
            .into_iter()
            .map(|t| ListedTransaction {
                transactional_id: t.transactional_id.0.to_string(),
                producer_id: t.producer_id.0,
                state: t.transaction_state.to_string(),
            })
            .collect();
        listed.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(listed)
    }

    /// A transactional id's producer and open transaction.
    pub async fn describe_transaction(
        &self,
        transactional_id: &str,
    ) -> Result<TransactionDescription, ClientError> {
        let request = DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(text(transactional_id))]);
        let cluster = &self.cluster;
        let t =
            cluster
                .with_coordinator(
                    CoordinatorType::Transaction,
                    transactional_id,
                    self.deadline(),
                    |broker| {
                        let request = request.clone();
                        async move {
                            let response = cluster.send(&broker, &request).await?;
                            let t = response.transaction_states.into_iter().next().ok_or_else(
                                || {
                                    Self::refused(
                                        "DescribeTransactions (nothing in the answer)",
                                        -1,
                                    )
                                },
                            )?;
                            match t.error_code {
                                0 => Ok(t),
                                code => Err(Self::refused("DescribeTransactions", code)),
                            }
                        }
                    },
                )
                .await?;
        let mut partitions: Vec<TopicPartition> = t
            .topics
            .iter()
            .flat_map(|topic| {
                topic
                    .partitions
                    .iter()
                    .map(|&p| TopicPartition::new(topic.topic.0.as_str(), p))
            })
            .collect();
        partitions.sort();
        Ok(TransactionDescription {
            transactional_id: t.transactional_id.0.to_string(),
            producer: (t.producer_id.0, t.producer_epoch),
            state: t.transaction_state.to_string(),
            timeout_ms: t.transaction_timeout_ms,
            start_time_ms: t.transaction_start_time_ms,
            partitions,
        })
    }
}
