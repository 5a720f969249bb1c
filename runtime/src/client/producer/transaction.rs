//! Transactions of a producer with a `transactional.id`: the state machine (uninitialized →
//! ready → in a transaction → committing or aborting → ready), the coordinator requests
//! (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn), and the
//! kinds of failure a caller must tell apart: [`ClientError::Abortable`] (abort and go on),
//! [`ClientError::CommitFailed`] (offsets of a rebalanced member: abort, rejoin) and
//! [`ClientError::Fenced`] (another producer took over: close this one).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use eddy_core::log::TopicPartition;
use kafka_protocol::error::ResponseError::{
    self, ConcurrentTransactions, FencedInstanceId, IllegalGeneration, InvalidProducerEpoch,
    InvalidTxnState, OperationNotAttempted, ProducerFenced, TransactionalIdAuthorizationFailed,
    UnknownMemberId,
};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::accumulator::Membership;
use super::{Producer, ProducerId, Shared};
use crate::client::cluster::CoordinatorType;
use crate::client::ClientError;
use crate::time::Instant;

/// The consumer group whose offsets a transaction commits, as the group's member knows it
/// (KIP-447: the coordinator refuses offsets from a member fenced by a rebalance).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadata {
    /// The group id.
    pub group_id: String,
    /// The member's generation, or -1 outside a generation.
    pub generation_id: i32,
    /// The member id, or empty.
    pub member_id: String,
    /// The member's `group.instance.id`.
    pub group_instance_id: Option<String>,
}

impl GroupMetadata {
    /// A group without member information: commits are checked by group id only.
    pub fn new(group_id: impl Into<String>) -> Self {
        Self {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Uninitialized,
    Ready,
    InTransaction,
    /// Commit or abort under way: no more records.
    Ending,
    Fatal,
}

/// A transactional producer's state.
#[derive(Debug)]
pub(crate) struct Transaction {
    id: TransactionalId,
    state: State,
    /// Why the open transaction must be aborted, or why the producer is done.
    error: Option<ClientError>,
    /// Offsets were added to the open transaction.
    offsets_added: bool,
    /// Partitions were added to the open transaction.
    partitions_added: bool,
}

impl Transaction {
    pub(crate) fn new(id: &str) -> Self {
        Self {
            id: TransactionalId(StrBytes::from_string(id.to_string())),
            state: State::Uninitialized,
            error: None,
            offsets_added: false,
            partitions_added: false,
        }
    }

    pub(crate) fn id(&self) -> &TransactionalId {
        &self.id
    }

    /// Whether records may be sent now.
    pub(crate) fn check_can_send(&self) -> Result<(), ClientError> {
        match (self.state, &self.error) {
            (_, Some(e)) => Err(e.clone()),
            (State::InTransaction, None) => Ok(()),
            (State::Uninitialized, None) => Err(ClientError::State(
                "a transactional producer calls init_transactions first".into(),
            )),
            _ => Err(ClientError::State(
                "a transactional producer sends within a transaction: begin_transaction first"
                    .into(),
            )),
        }
    }

    /// A batch failed: the transaction can no longer commit, or (fenced) the producer is done.
    pub(crate) fn batch_failed(&mut self, error: &ClientError) {
        self.fail(error.clone());
    }

    fn fail(&mut self, error: ClientError) {
        if self.state == State::Fatal {
            return;
        }
        match error {
            ClientError::Fenced { .. } => {
                self.state = State::Fatal;
                self.error = Some(error);
            }
            other => {
                self.error.get_or_insert(other.in_transaction());
            }
        }
    }
}

/// The error for a code a transaction API answered: fenced, abortable, or retriable.
fn txn_error(what: &str, code: i16, broker: &crate::client::cluster::Broker) -> ClientError {
    let refused = ClientError::Refused {
        addr: broker.conn.addr().to_string(),
        what: what.to_string(),
        code,
    };
    match ResponseError::try_from_code(code) {
        Some(ProducerFenced | InvalidProducerEpoch | TransactionalIdAuthorizationFailed) => {
            ClientError::Fenced {
                source: Box::new(refused),
            }
        }
        Some(IllegalGeneration | UnknownMemberId | FencedInstanceId) => ClientError::CommitFailed {
            source: Box::new(refused),
        },
        Some(ConcurrentTransactions | OperationNotAttempted) => refused,
        _ if refused.is_retriable() => refused,
        _ => refused.in_transaction(),
    }
}

/// Calls `attempt` with the coordinator of `key` until it succeeds or `max.block.ms` passes.
async fn with_coordinator<T, F, Fut>(
    shared: &Shared,
    key: (CoordinatorType, &str),
    attempt: F,
) -> Result<T, ClientError>
where
    F: FnMut(crate::client::cluster::Broker) -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let deadline = Instant::now() + shared.config.max_block;
    shared
        .cluster
        .with_coordinator(key.0, key.1, deadline, attempt)
        .await
}

/// InitProducerId for transactional id `id`: `current` is the producer id and epoch it has
/// (KIP-360: the coordinator bumps that epoch, and fences a producer that is not the
/// current one), or [`ProducerId::NONE`] for the first call, which fences every earlier
/// producer of the id.
async fn init_producer_id(
    shared: &Shared,
    id: &TransactionalId,
    current: ProducerId,
) -> Result<ProducerId, ClientError> {
    let timeout_ms =
        i32::try_from(shared.config.transaction_timeout.as_millis()).unwrap_or(i32::MAX);
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(id.clone()))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(current.id.into())
        .with_producer_epoch(current.epoch);
    with_coordinator(shared, (CoordinatorType::Transaction, &id.0), |broker| {
        let request = request.clone();
        async move {
            let response = shared.cluster.send(&broker, &request).await?;
            if response.error_code != 0 {
                return Err(txn_error("InitProducerId", response.error_code, &broker));
            }
            Ok(ProducerId {
                id: response.producer_id.0,
                epoch: response.producer_epoch,
            })
        }
    })
    .await
}

/// Adds the partitions that received records to the open transaction; their batches are held
/// until this succeeds. Called by the sender.
pub(super) async fn add_registered_partitions(shared: &Shared) -> Result<(), ClientError> {
    let pending: Vec<(Arc<str>, i32)> = shared.accumulator().to_add.clone();
    if pending.is_empty() {
        return Ok(());
    }
    let (id, failed) = {
        let txn = shared.transaction().expect("transactional");
        (txn.id.clone(), txn.error.clone())
    };
    let producer = shared.producer_id();
    let outcome = if let Some(earlier) = failed {
        // The transaction failed earlier: it cannot take partitions now.
        Err(earlier.in_transaction())
    } else {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (topic, p) in &pending {
            by_topic.entry(topic).or_default().push(*p);
        }
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(id.clone())
            .with_v3_and_below_producer_id(producer.id.into())
            .with_v3_and_below_producer_epoch(producer.epoch)
            .with_v3_and_below_topics(
                by_topic
                    .iter()
                    .map(|(topic, ps)| {
                        AddPartitionsToTxnTopic::default()
                            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                            .with_partitions(ps.clone())
                    })
                    .collect(),
            );
        with_coordinator(shared, (CoordinatorType::Transaction, &id.0), |broker| {
            let request = request.clone();
            async move {
                let response = shared.cluster.send(&broker, &request).await?;
                let mut codes = response
                    .results_by_topic_v3_and_below
                    .iter()
                    .flat_map(|t| t.results_by_partition.iter())
                    .map(|p| p.partition_error_code);
                // OPERATION_NOT_ATTEMPTED only says another partition failed.
                match codes.find(|&c| {
                    ResponseError::try_from_code(c).is_some_and(|e| e != OperationNotAttempted)
                }) {
                    Some(c) => Err(txn_error("AddPartitionsToTxn", c, &broker)),
                    None => Ok(()),
                }
            }
        })
        .await
    };
    let mut accumulator = shared.accumulator();
    accumulator.to_add.retain(|entry| !pending.contains(entry));
    match outcome {
        Ok(()) => {
            for (topic, p) in &pending {
                if let Some(queue) = accumulator.queue(topic, *p) {
                    queue.membership = Membership::Added;
                }
            }
            drop(accumulator);
            shared
                .transaction()
                .expect("transactional")
                .partitions_added = true;
            Ok(())
        }
        Err(error) => {
            // The partitions' batches can never be sent in this transaction.
            let error = error.in_transaction();
            for (topic, p) in &pending {
                if let Some(queue) = accumulator.queue(topic, *p) {
                    queue.membership = Membership::Outside;
                }
            }
            let failed = fail_unsent(&mut accumulator, &pending, &error);
            drop(accumulator);
            shared
                .transaction()
                .expect("transactional")
                .fail(error.clone());
            release(shared, failed);
            Err(error)
        }
    }
}

/// A transaction that failed (its producer fenced, a send of it failed for good, a partition
/// refused) can only be aborted: the batches its producer still holds are failed with its
/// error rather than sent, as Kafka's producer aborts its undrained batches. Batches in
/// flight are settled by their answers. Called by the sender before it drains.
pub(super) fn fail_unsent_if_doomed(shared: &Shared) {
    let Some(error) = shared
        .transaction()
        .and_then(|txn| txn.error.clone())
        .map(ClientError::in_transaction)
    else {
        return;
    };
    let failed = fail_all_unsent(&mut shared.accumulator(), &error);
    release(shared, failed);
}

/// Takes out every batch of every partition that is not in flight, to be failed.
fn fail_all_unsent(
    accumulator: &mut super::accumulator::Accumulator,
    error: &ClientError,
) -> Vec<(super::accumulator::Batch, ClientError)> {
    let partitions: Vec<(Arc<str>, i32)> = accumulator
        .topics
        .values()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .enumerate()
                .filter(|(_, queue)| queue.holds_unsent())
                .filter_map(|(p, _)| Some((topic.name.clone(), i32::try_from(p).ok()?)))
        })
        .collect();
    fail_unsent(accumulator, &partitions, error)
}

/// Takes out every batch of `partitions` that is not in flight, to be failed.
fn fail_unsent(
    accumulator: &mut super::accumulator::Accumulator,
    partitions: &[(Arc<str>, i32)],
    error: &ClientError,
) -> Vec<(super::accumulator::Batch, ClientError)> {
    let mut failed = Vec::new();
    for (topic, p) in partitions {
        if let Some(queue) = accumulator.queue(topic, *p) {
            queue
                .close_open_batch(topic, *p, std::time::Duration::ZERO, Instant::now(), true)
                .ok();
            failed.extend(queue.ready.drain(..).map(|b| (b, error.clone())));
        }
    }
    failed
}

fn release(shared: &Shared, failed: Vec<(super::accumulator::Batch, ClientError)>) {
    if failed.is_empty() {
        return;
    }
    let mut accumulator = shared.accumulator();
    for (batch, error) in failed {
        let (id, reserved) = batch.complete(Err(error));
        accumulator.incomplete.remove(&id);
        shared.memory.add_permits(reserved);
    }
    drop(accumulator);
    shared.answered.notify_waiters();
}

impl Producer {
    fn transactional(&self) -> Result<&Shared, ClientError> {
        let shared = self.shared();
        if shared.transaction.is_none() {
            return Err(ClientError::State(
                "transactions need a producer with a transactional.id".into(),
            ));
        }
        Ok(shared)
    }

    fn txn_state(&self) -> Result<(State, Option<ClientError>, TransactionalId), ClientError> {
        let shared = self.transactional()?;
        let txn = shared.transaction().expect("checked");
        Ok((txn.state, txn.error.clone(), txn.id.clone()))
    }

    /// Registers the `transactional.id` with its coordinator: fences any earlier producer
    /// with the same id and completes (aborts) a transaction it left open. Call once, before
    /// the first transaction.
    pub async fn init_transactions(&self) -> Result<(), ClientError> {
        let (state, _, id) = self.txn_state()?;
        if state != State::Uninitialized {
            return Err(ClientError::State(
                "init_transactions was already called".into(),
            ));
        }
        let shared = self.shared();
        let producer = init_producer_id(shared, &id, ProducerId::NONE).await;
        let mut txn = shared.transaction().expect("checked");
        match producer {
            Ok(producer) => {
                shared.set_producer_id(producer);
                txn.state = State::Ready;
                Ok(())
            }
            Err(e @ ClientError::Fenced { .. }) => {
                txn.fail(e.clone());
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Whether another producer took over this one's `transactional.id` (or the coordinator
    /// bumped its epoch): it can do nothing more and must be replaced.
    pub fn is_fenced(&self) -> bool {
        self.txn_state().is_ok_and(|(state, error, _)| {
            state == State::Fatal && matches!(error, Some(ClientError::Fenced { .. }))
        })
    }

    /// Begins a transaction: records sent from now on are committed or aborted together.
    pub fn begin_transaction(&self) -> Result<(), ClientError> {
        let shared = self.transactional()?;
        let mut txn = shared.transaction().expect("checked");
        match txn.state {
            State::Ready => {
                txn.state = State::InTransaction;
                Ok(())
            }
            State::Fatal => Err(txn.error.clone().unwrap_or(ClientError::Closed)),
            State::Uninitialized => Err(ClientError::State(
                "init_transactions must come before begin_transaction".into(),
            )),
            State::InTransaction | State::Ending => {
                Err(ClientError::State("a transaction is already open".into()))
            }
        }
    }

    /// Adds a consumer group's offsets to the open transaction: they are committed to the
    /// group if and only if the transaction commits. `offsets` are the next offsets to read.
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: &BTreeMap<TopicPartition, i64>,
        group: &GroupMetadata,
    ) -> Result<(), ClientError> {
        let (state, error, id) = self.txn_state()?;
        if let Some(e) = error {
            return Err(e);
        }
        if state != State::InTransaction {
            return Err(ClientError::State("no transaction is open".into()));
        }
        let shared = self.shared();
        let producer = shared.producer_id();
        let group_id = GroupId(StrBytes::from_string(group.group_id.clone()));
        let add = AddOffsetsToTxnRequest::default()
            .with_transactional_id(id.clone())
            .with_producer_id(producer.id.into())
            .with_producer_epoch(producer.epoch)
            .with_group_id(group_id.clone());
        let added = with_coordinator(shared, (CoordinatorType::Transaction, &id.0), |broker| {
            let add = add.clone();
            async move {
                let response = shared.cluster.send(&broker, &add).await?;
                match response.error_code {
                    0 => Ok(()),
                    c => Err(txn_error("AddOffsetsToTxn", c, &broker)),
                }
            }
        })
        .await;
        if let Err(e) = added {
            return Err(self.failed(e));
        }
        shared.transaction().expect("checked").offsets_added = true;
        let mut by_topic: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
        for (tp, offset) in offsets {
            by_topic
                .entry(&tp.topic)
                .or_default()
                .push((tp.partition, *offset));
        }
        let commit = TxnOffsetCommitRequest::default()
            .with_transactional_id(id.clone())
            .with_group_id(group_id)
            .with_producer_id(producer.id.into())
            .with_producer_epoch(producer.epoch)
            .with_generation_id(group.generation_id)
            .with_member_id(StrBytes::from_string(group.member_id.clone()))
            .with_group_instance_id(group.group_instance_id.clone().map(StrBytes::from_string))
            .with_topics(
                by_topic
                    .iter()
                    .map(|(topic, ps)| {
                        TxnOffsetCommitRequestTopic::default()
                            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                            .with_partitions(
                                ps.iter()
                                    .map(|&(p, o)| {
                                        TxnOffsetCommitRequestPartition::default()
                                            .with_partition_index(p)
                                            .with_committed_offset(o)
                                            .with_committed_leader_epoch(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let committed = with_coordinator(
            shared,
            (CoordinatorType::Group, &group.group_id),
            |broker| {
                let commit = commit.clone();
                async move {
                    let response = shared.cluster.send(&broker, &commit).await?;
                    let code = response
                        .topics
                        .iter()
                        .flat_map(|t| t.partitions.iter())
                        .map(|p| p.error_code)
                        .find(|&c| c != 0);
                    match code {
                        None => Ok(()),
                        Some(c) => Err(txn_error("TxnOffsetCommit", c, &broker)),
                    }
                }
            },
        )
        .await;
        committed.map_err(|e| self.failed(e))
    }

    /// Records `error` against the open transaction and returns it as the caller sees it.
    fn failed(&self, error: ClientError) -> ClientError {
        let error = error.in_transaction();
        self.shared()
            .transaction()
            .expect("transactional")
            .fail(error.clone());
        error
    }

    /// Sends every record of the open transaction, then commits it. On
    /// [`ClientError::Abortable`] the transaction is still open and must be aborted.
    pub async fn commit_transaction(&self) -> Result<(), ClientError> {
        let (state, error, _) = self.txn_state()?;
        if let Some(e) = error {
            return Err(e);
        }
        if state != State::InTransaction {
            return Err(ClientError::State("no transaction is open".into()));
        }
        self.set_state(State::Ending);
        let flushed = self.flush().await;
        let failed = self.txn_state()?.1;
        let result = match (flushed, failed) {
            (_, Some(e)) | (Err(e), None) => Err(e),
            (Ok(()), None) => self.end_transaction(true).await,
        };
        if result.is_err() {
            self.reopen();
        }
        result
    }

    fn set_state(&self, state: State) {
        self.shared().transaction().expect("transactional").state = state;
    }

    /// A commit or abort that failed leaves the transaction open (unless fenced), to be
    /// committed again or aborted.
    fn reopen(&self) {
        let mut txn = self.shared().transaction().expect("transactional");
        if txn.state == State::Ending {
            txn.state = State::InTransaction;
        }
    }

    /// Aborts the open transaction: records not sent yet are dropped (their deliveries fail),
    /// and whatever reached the broker is never visible to `read_committed` consumers.
    pub async fn abort_transaction(&self) -> Result<(), ClientError> {
        let (state, error, _) = self.txn_state()?;
        if state == State::Fatal {
            return Err(error.unwrap_or(ClientError::Closed));
        }
        if state != State::InTransaction {
            return Err(ClientError::State("no transaction is open".into()));
        }
        self.set_state(State::Ending);
        let shared = self.shared();
        let aborted = ClientError::TransactionAborted;
        let failed = {
            let mut accumulator = shared.accumulator();
            accumulator.to_add.clear();
            fail_all_unsent(&mut accumulator, &aborted)
        };
        release(shared, failed);
        // Batches in flight are answered before the markers are asked for.
        let result = match self.flush().await {
            Ok(()) => self.end_transaction(false).await,
            Err(e) => Err(e),
        };
        if result.is_err() {
            self.reopen();
        }
        result
    }

    /// KIP-360: a batch sent in the aborted transaction failed without an answer, leaving a
    /// gap in its partition's sequence numbers that no later batch can cross; a new epoch
    /// starts every partition's sequence again. Nothing is in flight (the abort flushed).
    /// A failure leaves the transaction to be aborted again (EndTxn and InitProducerId are
    /// both safe to repeat).
    async fn bump_epoch(&self) -> Result<(), ClientError> {
        let shared = self.shared();
        let id = shared.transaction().expect("checked").id.clone();
        let current = shared.producer_id();
        match init_producer_id(shared, &id, current).await {
            Ok(bumped) => {
                tracing::debug!(
                    producer_id = bumped.id,
                    epoch = bumped.epoch,
                    "producer epoch bumped after a failed send"
                );
                shared.set_producer_id(bumped);
                super::sender::restart_sequences(&mut shared.accumulator());
                shared.reset_producer_id.store(false, Ordering::Release);
                Ok(())
            }
            Err(e) => {
                if let ClientError::Fenced { .. } = e {
                    shared.transaction().expect("checked").fail(e.clone());
                }
                Err(e)
            }
        }
    }

    async fn end_transaction(&self, commit: bool) -> Result<(), ClientError> {
        let shared = self.shared();
        let (id, started) = {
            let txn = shared.transaction().expect("checked");
            (txn.id.clone(), txn.partitions_added || txn.offsets_added)
        };
        if started {
            let producer = shared.producer_id();
            let request = EndTxnRequest::default()
                .with_transactional_id(id.clone())
                .with_producer_id(producer.id.into())
                .with_producer_epoch(producer.epoch)
                .with_committed(commit);
            let ended = with_coordinator(shared, (CoordinatorType::Transaction, &id.0), |broker| {
                let request = request.clone();
                async move {
                    let response = shared.cluster.send(&broker, &request).await?;
                    match ResponseError::try_from_code(response.error_code) {
                        None => Ok(()),
                        // The coordinator's transaction state differs from this producer's.
                        Some(InvalidTxnState) => Err(ClientError::Fenced {
                            source: Box::new(ClientError::Refused {
                                addr: broker.conn.addr().to_string(),
                                what: "EndTxn".into(),
                                code: InvalidTxnState.code(),
                            }),
                        }),
                        Some(e) => Err(txn_error("EndTxn", e.code(), &broker)),
                    }
                }
            })
            .await;
            if let Err(e) = ended {
                // Otherwise the caller may call again: EndTxn is safe to repeat.
                if let ClientError::Fenced { .. } = e {
                    shared.transaction().expect("checked").fail(e.clone());
                }
                return Err(e);
            }
        }
        if !commit && shared.reset_producer_id.load(Ordering::Acquire) {
            self.bump_epoch().await?;
        }
        {
            let mut accumulator = shared.accumulator();
            for topic in accumulator.topics.values_mut() {
                for queue in &mut topic.partitions {
                    queue.membership = Membership::Outside;
                }
            }
        }
        let mut txn = shared.transaction().expect("checked");
        txn.state = State::Ready;
        txn.error = None;
        txn.offsets_added = false;
        txn.partitions_added = false;
        Ok(())
    }
}
