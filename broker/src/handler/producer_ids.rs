//! InitProducerId. Without a transactional id: a new producer id at epoch 0, or, when a
//! producer asks with its id and epoch (KIP-360, after an error it cannot otherwise recover
//! from), the same id at the next epoch. With one: the transaction coordinator's producer id
//! and next epoch for that id, which fences the producers before it.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::errors::txn_code;
use super::{ProtocolError, Reply, RequestContext};
use crate::state::BrokerState;

fn answer(result: Result<(i64, i16), i16>) -> InitProducerIdResponse {
    // The error code: a refusal of the transaction coordinator, or of the id allocator.
    match result {
        Ok((id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err(code) => InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}

pub(super) fn init(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: InitProducerIdRequest,
) -> Result<Reply, ProtocolError> {
    let expected = (request.producer_id.0 >= 0 && request.producer_epoch >= 0)
        .then_some((request.producer_id.0, request.producer_epoch));
    if let Some(id) = request.transactional_id.filter(|id| !id.is_empty()) {
        let transactions = Arc::clone(&state.transactions);
        let timeout_ms = request.transaction_timeout_ms;
        return ctx.later(async move {
            let initialized = transactions
                .init_producer_id(&id.0, timeout_ms, expected)
                .await;
            answer(initialized.map_err(|e| txn_code(&e)))
        });
    }
    let result = match expected {
        Some((id, epoch)) if epoch < i16::MAX => Ok((id, epoch + 1)),
        _ => state.producer_ids.next_id().map(|id| (id, 0)).map_err(|e| {
            tracing::error!(error = %e, "could not reserve producer ids");
            ResponseError::CoordinatorNotAvailable.code()
        }),
    };
    ctx.reply(&answer(result))
}
