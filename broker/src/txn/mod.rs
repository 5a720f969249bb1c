//! The transaction coordinator and producer ids.
//!
//! Every transactional id has its state (producer id and epoch, the open transaction's
//! partitions, where it stands) as a record in the compacted internal topic
//! `__transaction_state`, in Kafka's layout, in the partition `abs(javaHashCode(id)) % 50`. A
//! change is appended and made durable before it is applied or answered; at start the state is
//! rebuilt by replaying the topic, transactions caught between their decision and their last
//! marker are completed, and open ones are left to their timeout.
//!
//! Ending a transaction: the decision (PrepareCommit or PrepareAbort) is stored; a COMMIT or
//! ABORT marker is written to every partition of the transaction (the group coordinator is told
//! of those in `__consumer_offsets`); then the completion is stored.

mod coordinator;
mod error;
mod ids;
pub(crate) mod records;
mod state;

pub use coordinator::TxnConfig;
pub(crate) use coordinator::{TransactionCoordinator, TRANSACTION_STATE_TOPIC};
pub(crate) use error::TxnError;
pub(crate) use ids::ProducerIds;

#[cfg(test)]
mod tests;
