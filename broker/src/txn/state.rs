//! One transactional id's state and the rules of its transitions, without I/O: which request
//! is allowed in which state, and what the state becomes. The coordinator stores each new state
//! in `__transaction_state` before it applies it.
//!
//! ```text
//! Empty ──AddPartitions──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
//!   ▲                        │   └──EndTxn / timeout / fence──▶ PrepareAbort ──▶ CompleteAbort
//!   └──InitProducerId (epoch + 1)────────────────────────────────────────────────┘
//! ```

use std::collections::BTreeSet;

use super::error::TxnError;

/// Where a transaction stands (Kafka's `TransactionState`, with its codes and names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnState {
    /// No transaction is open.
    Empty,
    /// Partitions were added; the transaction is open.
    Ongoing,
    /// The commit is decided; markers are being written.
    PrepareCommit,
    /// The abort is decided; markers are being written.
    PrepareAbort,
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction aborted.
    CompleteAbort,
    /// The transactional id expired.
    Dead,
    /// The producer is being fenced (Kafka's intermediate state; eddy aborts directly).
    PrepareEpochFence,
}

impl TxnState {
    /// The code stored in `__transaction_state`.
    pub(crate) fn code(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    /// The state a stored code names.
    pub(crate) fn from_code(code: i8) -> Option<Self> {
        Some(match code {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }

    /// The name Kafka's tools show.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// Whether markers are being written.
    pub(crate) fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// A transactional id's producer and current transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TxnMetadata {
    /// The producer id.
    pub producer_id: i64,
    /// The epoch of the producer now allowed to act.
    pub producer_epoch: i16,
    /// The producer id and epoch before the last InitProducerId, so its retry is recognised
    /// (KIP-360). Kept in memory only.
    pub(crate) last_producer: Option<(i64, i16)>,
    /// `transaction.timeout.ms` of the producer.
    pub timeout_ms: i32,
    /// Where the transaction stands.
    pub state: TxnState,
    /// The partitions of the open (or ending) transaction.
    pub partitions: BTreeSet<(String, i32)>,
    /// When the transaction began (its first partition was added).
    pub start_ms: i64,
    /// When the state last changed.
    pub last_update_ms: i64,
}

/// What an InitProducerId must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InitStep {
    /// Bump the epoch (or take a new producer id) and answer with it.
    Bump,
    /// A retry of an InitProducerId that already succeeded: answer with the current ids.
    Retry,
    /// A transaction is open: abort it first (fencing its producer), then bump.
    AbortFirst,
}

/// What an EndTxn must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EndStep {
    /// The transaction already ended this way: a retry, answered with success.
    AlreadyDone,
    /// Store this (PrepareCommit or PrepareAbort), then write the markers.
    Prepare(TxnMetadata),
}

impl TxnMetadata {
    /// A new transactional id's state, before its first epoch.
    pub(crate) fn new(producer_id: i64, timeout_ms: i32) -> Self {
        Self {
            producer_id,
            producer_epoch: -1,
            last_producer: None,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: -1,
        }
    }

    /// Checks an InitProducerId that names the producer it was (`expected`), if any.
    pub(crate) fn init_step(&self, expected: Option<(i64, i16)>) -> Result<InitStep, TxnError> {
        if self.state.is_preparing() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if let Some(expected) = expected {
            let current = (self.producer_id, self.producer_epoch);
            if self.last_producer == Some(expected) && self.state != TxnState::Ongoing {
                return Ok(InitStep::Retry);
            }
            if expected != current {
                return Err(TxnError::ProducerFenced);
            }
        }
        Ok(if self.state == TxnState::Ongoing {
            InitStep::AbortFirst
        } else {
            InitStep::Bump
        })
    }

    /// Whether the epoch can still be bumped without a new producer id.
    pub(crate) fn epoch_exhausted(&self) -> bool {
        self.producer_epoch >= i16::MAX - 1
    }

    /// The state after InitProducerId: the next epoch (or `new_producer_id` at epoch 0 once
    /// the epochs are used up), no transaction, the producer's timeout.
    pub(crate) fn bumped(
        &self,
        timeout_ms: i32,
        new_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Self {
        let (producer_id, producer_epoch) = match new_producer_id {
            Some(id) => (id, 0),
            None => (self.producer_id, self.producer_epoch + 1),
        };
        Self {
            producer_id,
            producer_epoch,
            last_producer: Some((self.producer_id, self.producer_epoch)),
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
        }
    }

    /// Checks that a request comes from the current producer.
    pub(crate) fn check_producer(&self, producer_id: i64, epoch: i16) -> Result<(), TxnError> {
        if producer_id != self.producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if epoch != self.producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(())
    }

    /// The state with `partitions` added, or `None` if they all are already in the open
    /// transaction.
    pub(crate) fn with_partitions(
        &self,
        partitions: &[(String, i32)],
        now_ms: i64,
    ) -> Result<Option<Self>, TxnError> {
        match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Dead | TxnState::PrepareEpochFence => return Err(TxnError::InvalidTxnState),
            _ => {}
        }
        let ongoing = self.state == TxnState::Ongoing;
        if ongoing && partitions.iter().all(|p| self.partitions.contains(p)) {
            return Ok(None);
        }
        let mut next = self.clone();
        next.state = TxnState::Ongoing;
        next.partitions.extend(partitions.iter().cloned());
        if !ongoing {
            next.start_ms = now_ms;
        }
        next.last_update_ms = now_ms;
        Ok(Some(next))
    }

    /// Checks an EndTxn and gives the state to store first.
    pub(crate) fn end_step(&self, commit: bool, now_ms: i64) -> Result<EndStep, TxnError> {
        match (self.state, commit) {
            (TxnState::Ongoing, _) => {
                let mut next = self.clone();
                next.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                next.last_update_ms = now_ms;
                Ok(EndStep::Prepare(next))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                Ok(EndStep::AlreadyDone)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// The state that aborts the open transaction and fences its producer (the epoch moves
    /// on, so the producer's next request is refused): after a timeout, or when a new producer
    /// with the same transactional id starts.
    pub(crate) fn fenced_abort(&self, now_ms: i64) -> Self {
        let mut next = self.clone();
        if !self.epoch_exhausted() {
            next.producer_epoch += 1;
        }
        // The fenced producer may still ask for the new epoch, naming its own (KIP-360).
        next.last_producer = Some((self.producer_id, self.producer_epoch));
        next.state = TxnState::PrepareAbort;
        next.last_update_ms = now_ms;
        next
    }

    /// The state once every marker is written.
    pub(crate) fn completed(&self, now_ms: i64) -> Self {
        let mut next = self.clone();
        next.state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            _ => TxnState::CompleteAbort,
        };
        next.partitions.clear();
        next.last_update_ms = now_ms;
        next
    }

    /// Whether the open transaction has outlived its timeout at `now_ms`.
    pub(crate) fn timed_out(&self, now_ms: i64) -> bool {
        self.state == TxnState::Ongoing && now_ms > self.start_ms + i64::from(self.timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ongoing() -> TxnMetadata {
        let started = TxnMetadata::new(7, 1000).bumped(1000, None, 0);
        started
            .with_partitions(&[("orders".into(), 0)], 100)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_transaction_goes_from_empty_to_complete() {
        let txn = ongoing();
        assert_eq!(
            (txn.state, txn.producer_epoch, txn.start_ms),
            (TxnState::Ongoing, 0, 100)
        );
        assert_eq!(txn.with_partitions(&[("orders".into(), 0)], 200), Ok(None));
        let more = txn
            .with_partitions(&[("orders".into(), 1)], 200)
            .unwrap()
            .unwrap();
        assert_eq!((more.partitions.len(), more.start_ms), (2, 100));
        let EndStep::Prepare(prepared) = more.end_step(true, 300).unwrap() else {
            panic!("an open transaction is prepared")
        };
        assert_eq!(prepared.state, TxnState::PrepareCommit);
        assert_eq!(
            prepared.end_step(true, 301),
            Err(TxnError::ConcurrentTransactions)
        );
        let done = prepared.completed(400);
        assert_eq!(
            (done.state, done.partitions.len()),
            (TxnState::CompleteCommit, 0)
        );
        assert_eq!(done.end_step(true, 500), Ok(EndStep::AlreadyDone));
        assert_eq!(done.end_step(false, 500), Err(TxnError::InvalidTxnState));
    }

    #[test]
    fn producers_are_checked_and_fenced() {
        let txn = ongoing();
        assert_eq!(txn.check_producer(7, 0), Ok(()));
        assert_eq!(
            txn.check_producer(8, 0),
            Err(TxnError::InvalidProducerIdMapping)
        );
        assert_eq!(txn.check_producer(7, 1), Err(TxnError::ProducerFenced));
        // A second producer with the same transactional id: the open transaction is aborted
        // with the next epoch, and the new producer gets the one after.
        assert_eq!(txn.init_step(None), Ok(InitStep::AbortFirst));
        let aborting = txn.fenced_abort(500);
        assert_eq!(
            (aborting.state, aborting.producer_epoch),
            (TxnState::PrepareAbort, 1)
        );
        assert_eq!(
            aborting.init_step(None),
            Err(TxnError::ConcurrentTransactions)
        );
        let aborted = aborting.completed(600);
        assert_eq!(aborted.init_step(None), Ok(InitStep::Bump));
        let next = aborted.bumped(1000, None, 700);
        assert_eq!(next.producer_epoch, 2);
        assert_eq!(
            txn.check_producer(7, 0),
            Ok(()),
            "the old state is untouched"
        );
        assert_eq!(next.check_producer(7, 0), Err(TxnError::ProducerFenced));
        // KIP-360: a retry of that InitProducerId names the producer it was.
        assert_eq!(next.init_step(Some((7, 1))), Ok(InitStep::Retry));
        assert_eq!(next.init_step(Some((7, 2))), Ok(InitStep::Bump));
        assert_eq!(next.init_step(Some((7, 0))), Err(TxnError::ProducerFenced));
    }

    #[test]
    fn timeouts_and_exhausted_epochs() {
        let txn = ongoing();
        assert!(!txn.timed_out(1100));
        assert!(txn.timed_out(1101));
        let mut old = txn.clone();
        old.producer_epoch = i16::MAX - 1;
        assert!(old.epoch_exhausted());
        assert_eq!(old.fenced_abort(0).producer_epoch, i16::MAX - 1);
        let renewed = old.bumped(1000, Some(99), 0);
        assert_eq!((renewed.producer_id, renewed.producer_epoch), (99, 0));
        for code in 0..8 {
            assert_eq!(TxnState::from_code(code).map(TxnState::code), Some(code));
        }
        assert_eq!(TxnState::from_code(8), None);
    }
}
