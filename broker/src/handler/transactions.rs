//! The transactional APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit
//! (producers), ListTransactions and DescribeTransactions (tools). InitProducerId with a
//! transactional id is in `producer_ids`.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedTransaction;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    EndTxnRequest, EndTxnResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TransactionalId, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::errors::txn_result_code;
use super::offsets::{by_topic, commit_rows, OffsetsToCommit};
use super::{topic_name, ProtocolError, Reply, RequestContext};
use crate::state::BrokerState;
use crate::storage::Verify;

pub(super) fn add_partitions(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: AddPartitionsToTxnRequest,
) -> Result<Reply, ProtocolError> {
    let id = request.v3_and_below_transactional_id.0.to_string();
    let producer = (
        request.v3_and_below_producer_id.0,
        request.v3_and_below_producer_epoch,
    );
    let wanted: Vec<(String, i32)> = request
        .v3_and_below_topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|&p| (t.name.0.to_string(), p)))
        .collect();
    // As Kafka: if any partition is unknown, none is added.
    let unknown: Vec<bool> = wanted
        .iter()
        .map(|(t, p)| state.partition(t, *p).is_none())
        .collect();
    let transactions = Arc::clone(&state.transactions);
    ctx.later(async move {
        let codes: Vec<i16> = if unknown.iter().any(|&u| u) {
            unknown
                .iter()
                .map(|&u| {
                    if u {
                        ResponseError::UnknownTopicOrPartition.code()
                    } else {
                        ResponseError::OperationNotAttempted.code()
                    }
                })
                .collect()
        } else {
            let code = txn_result_code(&transactions.add_partitions(&id, producer, &wanted).await);
            vec![code; wanted.len()]
        };
        let answers = wanted
            .into_iter()
            .zip(codes)
            .map(|((t, p), c)| (t, p, c))
            .collect();
        let results = by_topic(answers)
            .into_iter()
            .map(|(topic, partitions)| {
                AddPartitionsToTxnTopicResult::default()
                    .with_name(topic_name(&topic))
                    .with_results_by_partition(
                        partitions
                            .into_iter()
                            .map(|(p, code)| {
                                AddPartitionsToTxnPartitionResult::default()
                                    .with_partition_index(p)
                                    .with_partition_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect();
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
    })
}

pub(super) fn add_offsets(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: AddOffsetsToTxnRequest,
) -> Result<Reply, ProtocolError> {
    let transactions = Arc::clone(&state.transactions);
    let id = request.transactional_id.0.to_string();
    let producer = (request.producer_id.0, request.producer_epoch);
    let offsets_partition = transactions.offsets_partition(&request.group_id.0);
    ctx.later(async move {
        let added = transactions
            .add_partitions(&id, producer, &[offsets_partition])
            .await;
        let code = txn_result_code(&added);
        AddOffsetsToTxnResponse::default().with_error_code(code)
    })
}

pub(super) fn end(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: EndTxnRequest,
) -> Result<Reply, ProtocolError> {
    let transactions = Arc::clone(&state.transactions);
    let id = request.transactional_id.0.to_string();
    let producer = (request.producer_id.0, request.producer_epoch);
    ctx.later(async move {
        let ended = transactions
            .end_transaction(&id, producer, request.committed)
            .await;
        let code = txn_result_code(&ended);
        EndTxnResponse::default().with_error_code(code)
    })
}

pub(super) fn commit_offsets(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: TxnOffsetCommitRequest,
) -> Result<Reply, ProtocolError> {
    let to_commit = OffsetsToCommit::new(state, commit_rows!(request.topics));
    let group_id = &request.group_id.0;
    let (topic, partition) = state.transactions.offsets_partition(group_id);
    let transactions = Arc::clone(&state.transactions);
    let verify: Verify = Arc::new(move |producer_id: i64, epoch: i16| {
        transactions.verify(producer_id, epoch, &topic, partition)
    });
    let topics = to_commit.commit(
        |offsets| {
            state.groups.commit_transactional_offsets(
                group_id,
                (request.producer_id.0, request.producer_epoch),
                request.generation_id,
                &request.member_id,
                request.group_instance_id.as_deref(),
                offsets,
                verify,
            )
        },
        |name, partitions| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        },
        |index, code| {
            TxnOffsetCommitResponsePartition::default()
                .with_partition_index(index)
                .with_error_code(code)
        },
    );
    ctx.later(async move { TxnOffsetCommitResponse::default().with_topics(topics.await) })
}

pub(super) fn list(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: ListTransactionsRequest,
) -> Result<Reply, ProtocolError> {
    let now = state.clock.now().wall_ms;
    let known = [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ];
    let unknown_filters: Vec<StrBytes> = request
        .state_filters
        .iter()
        .filter(|f| !known.contains(&f.as_str()))
        .cloned()
        .collect();
    let listed = state
        .transactions
        .list()
        .into_iter()
        .filter(|(_, txn)| {
            request.state_filters.is_empty()
                || request
                    .state_filters
                    .iter()
                    .any(|f| f.as_str() == txn.state.name())
        })
        .filter(|(_, txn)| {
            request.producer_id_filters.is_empty()
                || request
                    .producer_id_filters
                    .iter()
                    .any(|p| p.0 == txn.producer_id)
        })
        // v1: only transactions running longer than the filter (-1: all).
        .filter(|(_, txn)| {
            request.duration_filter < 0
                || (txn.start_ms >= 0 && now - txn.start_ms > request.duration_filter)
        })
        .map(|(id, txn)| {
            ListedTransaction::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                .with_producer_id(ProducerId(txn.producer_id))
                .with_transaction_state(StrBytes::from_static_str(txn.state.name()))
        })
        .collect();
    ctx.reply(
        &ListTransactionsResponse::default()
            .with_unknown_state_filters(unknown_filters)
            .with_transaction_states(listed),
    )
}

pub(super) fn describe(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: DescribeTransactionsRequest,
) -> Result<Reply, ProtocolError> {
    let described = request
        .transactional_ids
        .into_iter()
        .map(|id| match state.transactions.describe(&id.0) {
            None => TransactionState::default()
                .with_transactional_id(id)
                .with_error_code(ResponseError::TransactionalIdNotFound.code())
                .with_transaction_state(StrBytes::from_static_str(""))
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            Some(txn) => {
                let topics = by_topic(
                    txn.partitions
                        .iter()
                        .map(|(t, p)| (t.clone(), *p, 0))
                        .collect(),
                )
                .into_iter()
                .map(|(topic, partitions)| {
                    TopicData::default()
                        .with_topic(topic_name(&topic))
                        .with_partitions(partitions.into_iter().map(|(p, _)| p).collect())
                })
                .collect();
                TransactionState::default()
                    .with_transactional_id(id)
                    .with_transaction_state(StrBytes::from_static_str(txn.state.name()))
                    .with_transaction_timeout_ms(txn.timeout_ms)
                    .with_transaction_start_time_ms(txn.start_ms)
                    .with_producer_id(ProducerId(txn.producer_id))
                    .with_producer_epoch(txn.producer_epoch)
                    .with_topics(topics)
            }
        })
        .collect();
    ctx.reply(&DescribeTransactionsResponse::default().with_transaction_states(described))
}
