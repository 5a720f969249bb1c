//! InitProducerId for idempotent producers: a new producer id at epoch 0, or, when a producer
//! asks with its id and epoch (KIP-360, after an error it cannot otherwise recover from), the
//! same id at the next epoch. Transactional ids are refused until the transaction coordinator
//! exists.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{ProtocolError, Reply, RequestContext};
use crate::state::BrokerState;

pub(super) fn init(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: InitProducerIdRequest,
) -> Result<Reply, ProtocolError> {
    let refused = |code: i16| {
        InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if request
        .transactional_id
        .as_ref()
        .is_some_and(|id| !id.is_empty())
    {
        tracing::warn!(
            "refused InitProducerId with a transactional id: transactions are not served yet"
        );
        return ctx.reply(&refused(ResponseError::InvalidRequest.code()));
    }
    let (id, epoch) = if request.producer_id.0 >= 0
        && request.producer_epoch >= 0
        && request.producer_epoch < i16::MAX
    {
        (request.producer_id.0, request.producer_epoch + 1)
    } else {
        match state.producer_ids.next_id() {
            Ok(id) => (id, 0),
            Err(e) => {
                tracing::error!(error = %e, "could not reserve producer ids");
                return ctx.reply(&refused(ResponseError::CoordinatorNotAvailable.code()));
            }
        }
    };
    ctx.reply(
        &InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
    )
}
