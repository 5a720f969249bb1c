//! Why the transaction coordinator refuses an operation, in the domain's words. Handlers
//! answer each with Kafka's error code (`handler::errors::txn_code`).

use crate::group::NotStored;

/// A refusal of the transaction coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TxnError {
    /// Another request is changing the transactional id: retry.
    #[error("another request is changing the transaction")]
    ConcurrentTransactions,
    /// The producer id is not the transactional id's.
    #[error("the producer id is not the transactional id's")]
    InvalidProducerIdMapping,
    /// The transaction timeout asked for is over `transaction.max.timeout.ms`, or not positive.
    #[error("the transaction timeout is outside the broker's bounds")]
    InvalidTransactionTimeout,
    /// The transaction is not in a state that allows the operation.
    #[error("the transaction's state does not allow this")]
    InvalidTxnState,
    /// A newer producer of the transactional id fenced this one.
    #[error("a newer producer fenced this one")]
    ProducerFenced,
    /// The transaction's state could not be stored, or a producer id not handed out.
    #[error("the transaction's state could not be stored ({0:?})")]
    NotStored(NotStored),
}
