//! Handlers: one module per API family. Each takes a decoded request, calls the domain
//! (storage, metadata) and builds the response, mapping domain errors to Kafka error codes.
//! Handlers never touch files.
//!
//! A handler returns a [`Reply`]. Its synchronous part, and the [`Reply::InOrder`] work it may
//! hand back (a produce's appends, on a blocking thread), run in request order on the
//! connection, so a producer's appends keep their order; what it must wait for (an fsync, a
//! long-poll fetch) runs afterwards, and responses still go out in request order.

mod api_versions;
mod configs;
mod errors;
mod fetch;
mod fetch_response;
mod group;
mod list_offsets;
mod metadata;
mod metadata_wire;
mod offsets;
mod produce;
mod producer_ids;
mod topics;
mod transactions;

use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::future::BoxFuture;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use crate::state::BrokerState;

pub(crate) use api_versions::supported_versions;
pub(crate) use fetch_response::Part;

/// What a request is answered with.
pub(crate) enum Reply {
    /// The encoded response, ready now.
    Ready(Bytes),
    /// The response, once the future completes.
    Later(BoxFuture<'static, Result<Response, ProtocolError>>),
    /// Work that must end before the connection's next request starts (a produce's appends,
    /// which keep a producer's batches in order), then the reply.
    InOrder(BoxFuture<'static, Result<Reply, ProtocolError>>),
    /// No response at all (a produce with acks=0).
    Nothing,
}

/// A response frame, whole or in parts.
pub(crate) enum Response {
    /// The whole encoded frame.
    Frame(Bytes),
    /// Encoded pieces and file ranges, written one after the other (a fetch's batches go
    /// from the page cache to the socket).
    Parts(Vec<Part>),
}

/// Why a connection must be closed: the peer sent something that is not a request we can
/// answer, or a response could not be encoded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProtocolError {
    /// The frame is too short to hold a request header.
    #[error("a {0}-byte frame is too short for a request header")]
    ShortFrame(usize),
    /// The API key is not one eddy serves.
    #[error("unsupported API key {0}")]
    UnknownApi(i16),
    /// The version is outside the range eddy serves for that API.
    #[error("unsupported version {version} of {api:?}")]
    UnsupportedVersion {
        /// The API.
        api: ApiKey,
        /// The version asked for.
        version: i16,
    },
    /// The header or body does not decode.
    #[error("malformed {api:?} v{version} request: {reason}")]
    Malformed {
        /// The API.
        api: ApiKey,
        /// The version.
        version: i16,
        /// What the decoder reported.
        reason: String,
    },
    /// The broker failed while answering (a bug): the connection is closed.
    #[error("failed while answering {api:?}: {reason}")]
    Internal {
        /// The API.
        api: ApiKey,
        /// What failed.
        reason: String,
    },
    /// A response could not be encoded (a bug).
    #[error("could not encode a {api:?} v{version} response: {reason}")]
    Encode {
        /// The API.
        api: ApiKey,
        /// The version.
        version: i16,
        /// What the encoder reported.
        reason: String,
    },
}

/// What every handler knows about the request it answers.
#[derive(Debug, Clone)]
pub(crate) struct RequestContext {
    pub(crate) api: ApiKey,
    pub(crate) version: i16,
    pub(crate) correlation_id: i32,
    /// The client's `client.id` (a slice of the request, not a copy).
    pub(crate) client_id: Option<kafka_protocol::protocol::StrBytes>,
    /// The client's address.
    pub(crate) peer: std::net::SocketAddr,
}

impl RequestContext {
    /// The response encoded with its header, as a whole frame (length prefix included).
    pub(crate) fn encode<R: Encodable + HeaderVersion>(
        &self,
        response: &R,
    ) -> Result<Bytes, ProtocolError> {
        let failed = |e: anyhow::Error| ProtocolError::Encode {
            api: self.api,
            version: self.version,
            reason: e.to_string(),
        };
        let header_version = R::header_version(self.version);
        let header = ResponseHeader::default().with_correlation_id(self.correlation_id);
        let size = header.compute_size(header_version).map_err(failed)?
            + response.compute_size(self.version).map_err(failed)?;
        let mut buf = BytesMut::with_capacity(4 + size);
        buf.put_i32(size as i32);
        header.encode(&mut buf, header_version).map_err(failed)?;
        response.encode(&mut buf, self.version).map_err(failed)?;
        Ok(buf.freeze())
    }

    /// A reply that comes when `response` is ready.
    pub(crate) fn later<R, F>(self, response: F) -> Result<Reply, ProtocolError>
    where
        R: Encodable + HeaderVersion,
        F: std::future::Future<Output = R> + Send + 'static,
    {
        Ok(Reply::Later(Box::pin(async move {
            let response = response.await;
            self.encode(&response).map(Response::Frame)
        })))
    }

    /// A reply that is ready now.
    pub(crate) fn reply<R: Encodable + HeaderVersion>(
        &self,
        response: &R,
    ) -> Result<Reply, ProtocolError> {
        self.encode(response).map(Reply::Ready)
    }
}

/// Runs a handler that may write files on a blocking thread, never on the async workers; the
/// connection waits for it before reading its next request.
fn on_blocking_thread(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    handle: impl FnOnce(&Arc<BrokerState>, &RequestContext) -> Result<Reply, ProtocolError>
        + Send
        + 'static,
) -> Result<Reply, ProtocolError> {
    let (state, ctx) = (Arc::clone(state), ctx.clone());
    let api = ctx.api;
    Ok(Reply::InOrder(Box::pin(async move {
        crate::storage::off_workers(move || Ok(handle(&state, &ctx)))
            .await
            .map_err(|e| ProtocolError::Internal {
                api,
                reason: e.to_string(),
            })?
    })))
}

/// A topic's name as the codec carries it.
fn topic_name(name: &str) -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(kafka_protocol::protocol::StrBytes::from_string(
        name.to_string(),
    ))
}

fn decode<R: Decodable>(ctx: &RequestContext, body: &mut Bytes) -> Result<R, ProtocolError> {
    R::decode(body, ctx.version).map_err(|e| ProtocolError::Malformed {
        api: ctx.api,
        version: ctx.version,
        reason: e.to_string(),
    })
}

/// Decodes one request frame (without its length prefix) and starts answering it.
pub(crate) fn handle(
    state: &Arc<BrokerState>,
    mut frame: Bytes,
    peer: std::net::SocketAddr,
) -> Result<Reply, ProtocolError> {
    if frame.len() < 8 {
        return Err(ProtocolError::ShortFrame(frame.len()));
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api = ApiKey::try_from(api_key).map_err(|_| ProtocolError::UnknownApi(api_key))?;
    let supported = supported_versions(api).ok_or(ProtocolError::UnknownApi(api_key))?;
    let header =
        RequestHeader::decode(&mut frame, api.request_header_version(version)).map_err(|e| {
            ProtocolError::Malformed {
                api,
                version,
                reason: e.to_string(),
            }
        })?;
    let ctx = RequestContext {
        api,
        version,
        correlation_id: header.correlation_id,
        client_id: header.client_id,
        peer,
    };
    if !(supported.0..=supported.1).contains(&version) {
        if api == ApiKey::ApiVersions {
            // KIP-511: answer with v0 and our ranges, so the client can pick a version.
            return api_versions::unsupported(&ctx);
        }
        return Err(ProtocolError::UnsupportedVersion { api, version });
    }
    let body = &mut frame;
    let reply = match api {
        ApiKey::ApiVersions => api_versions::handle(&ctx, decode(&ctx, body)?),
        // These may write files (topic metadata, a new partition's directory and segment).
        ApiKey::Metadata => {
            let mut body = std::mem::take(body);
            on_blocking_thread(state, &ctx, move |s, c| metadata::handle(s, c, &mut body))
        }
        ApiKey::CreateTopics => {
            let request = decode(&ctx, body)?;
            on_blocking_thread(state, &ctx, move |s, c| topics::create(s, c, request))
        }
        ApiKey::DeleteTopics => {
            let request = decode(&ctx, body)?;
            on_blocking_thread(state, &ctx, move |s, c| topics::delete(s, c, request))
        }
        ApiKey::CreatePartitions => {
            let request = decode(&ctx, body)?;
            on_blocking_thread(state, &ctx, move |s, c| {
                topics::create_partitions(s, c, request)
            })
        }
        ApiKey::DescribeConfigs => configs::describe(state, &ctx, decode(&ctx, body)?),
        ApiKey::Produce => produce::handle(state, ctx.clone(), decode(&ctx, body)?),
        ApiKey::Fetch => fetch::handle(state, ctx.clone(), decode(&ctx, body)?),
        ApiKey::ListOffsets => list_offsets::handle(state, ctx.clone(), decode(&ctx, body)?),
        ApiKey::FindCoordinator => group::find_coordinator(state, &ctx, decode(&ctx, body)?),
        ApiKey::JoinGroup => group::join(state, ctx.clone(), decode(&ctx, body)?),
        ApiKey::SyncGroup => group::sync(state, ctx.clone(), decode(&ctx, body)?),
        ApiKey::Heartbeat => group::heartbeat(state, &ctx, decode(&ctx, body)?),
        ApiKey::LeaveGroup => group::leave(state, ctx.clone(), decode(&ctx, body)?),
        ApiKey::DescribeGroups => group::describe(state, &ctx, decode(&ctx, body)?),
        ApiKey::ListGroups => group::list(state, &ctx, decode(&ctx, body)?),
        ApiKey::DeleteGroups => group::delete(state, ctx.clone(), decode(&ctx, body)?),
        ApiKey::OffsetCommit => offsets::commit(state, ctx.clone(), decode(&ctx, body)?),
        ApiKey::OffsetFetch => offsets::fetch(state, &ctx, decode(&ctx, body)?),
        ApiKey::OffsetDelete => offsets::delete(state, ctx.clone(), decode(&ctx, body)?),
        ApiKey::InitProducerId => producer_ids::init(state, ctx.clone(), decode(&ctx, body)?),
        ApiKey::AddPartitionsToTxn => {
            transactions::add_partitions(state, ctx.clone(), decode(&ctx, body)?)
        }
        ApiKey::AddOffsetsToTxn => {
            transactions::add_offsets(state, ctx.clone(), decode(&ctx, body)?)
        }
        ApiKey::EndTxn => transactions::end(state, ctx.clone(), decode(&ctx, body)?),
        ApiKey::TxnOffsetCommit => {
            transactions::commit_offsets(state, ctx.clone(), decode(&ctx, body)?)
        }
        ApiKey::ListTransactions => transactions::list(state, &ctx, decode(&ctx, body)?),
        ApiKey::DescribeTransactions => transactions::describe(state, &ctx, decode(&ctx, body)?),
        _ => Err(ProtocolError::UnknownApi(api_key)),
    }?;
    if body.has_remaining() {
        tracing::debug!(api = ?ctx.api, version, left = body.remaining(), "bytes after the request body");
    }
    Ok(reply)
}

#[cfg(test)]
mod tests;
