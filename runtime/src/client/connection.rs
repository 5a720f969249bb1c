//! One connection to one broker, shared by any number of tasks: requests are written in the
//! order they are sent and may be many at once (pipelining); a reader task hands each
//! response to the request with its correlation id. A connection that fails fails every
//! request in flight on it.
//!
//! Responses are read with the frame decoder the broker uses for requests
//! (`eddy_core::wire::frame`): a response larger than the connection's limit closes the
//! connection before it is read, and the buffer grows only as a response's bytes arrive.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use eddy_core::wire::frame::FrameDecoder;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};

use super::ClientError;

/// The largest response a connection takes by default (`receive.message.max.bytes`, as
/// librdkafka names it).
pub(crate) const DEFAULT_MAX_RESPONSE_BYTES: usize = 100_000_000;

type Waiter = (i32, oneshot::Sender<Result<Bytes, ClientError>>);

/// A frame to write, with the waiter of its response (none for requests the broker does not
/// answer, such as a produce with acks=0).
type Outgoing = (Bytes, Option<Waiter>);

/// The requests written and not yet answered, in order. Once the connection has failed it
/// is `closed`, and new requests fail at once instead of waiting for a reader that is gone.
#[derive(Debug, Default)]
struct InFlight {
    waiters: VecDeque<Waiter>,
    closed: bool,
}

fn lock(in_flight: &Mutex<InFlight>) -> std::sync::MutexGuard<'_, InFlight> {
    in_flight.lock().unwrap_or_else(|p| p.into_inner())
}

/// A pipelined connection to a broker.
#[derive(Debug, Clone)]
pub(crate) struct Connection {
    addr: String,
    client_id: StrBytes,
    next_correlation_id: Arc<AtomicI32>,
    outgoing: mpsc::Sender<Outgoing>,
    in_flight: Arc<Mutex<InFlight>>,
    shutdown: Arc<Notify>,
}

impl Connection {
    /// Connects to `addr` (`host:port`), taking responses of up to 100,000,000 bytes.
    pub(crate) async fn connect(addr: &str, client_id: &str) -> Result<Self, ClientError> {
        Self::connect_with_limit(addr, client_id, DEFAULT_MAX_RESPONSE_BYTES).await
    }

    /// Connects to `addr` (`host:port`), taking responses of up to `max_response_bytes`: a
    /// larger one closes the connection, failing the requests in flight on it.
    pub(crate) async fn connect_with_limit(
        addr: &str,
        client_id: &str,
        max_response_bytes: usize,
    ) -> Result<Self, ClientError> {
        let io = |source| ClientError::Io {
            addr: addr.to_string(),
            source: Arc::new(source),
        };
        let stream = TcpStream::connect(addr).await.map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        let (read_half, write_half) = stream.into_split();
        let in_flight: Arc<Mutex<InFlight>> = Arc::default();
        let (outgoing, requests) = mpsc::channel(1024);
        let shutdown = Arc::new(Notify::new());
        tokio::spawn(write_requests(
            write_half,
            requests,
            Arc::clone(&in_flight),
            addr.to_string(),
        ));
        tokio::spawn(read_responses(
            read_half,
            FrameDecoder::new(max_response_bytes),
            Arc::clone(&in_flight),
            Arc::clone(&shutdown),
            addr.to_string(),
        ));
        Ok(Self {
            addr: addr.to_string(),
            client_id: StrBytes::from_string(client_id.to_string()),
            next_correlation_id: Arc::new(AtomicI32::new(1)),
            outgoing,
            in_flight,
            shutdown,
        })
    }

    /// Whether the connection has failed or was closed: every request on it fails.
    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.in_flight).closed
    }

    /// Closes the connection: requests in flight fail with [`ClientError::Disconnected`]. What a
    /// client does with a broker that stopped answering in time.
    pub(crate) fn close(&self) {
        // notify_one keeps a permit if the reader is not waiting at this moment.
        self.shutdown.notify_one();
    }

    /// The broker's address.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `request` at `version` and waits for its response. (Requests the broker does not
    /// answer, such as a produce with acks=0, do not go through here.)
    pub(crate) async fn send<R: Request>(
        &self,
        version: i16,
        request: &R,
    ) -> Result<R::Response, ClientError> {
        self.start(version, request).await?.await
    }

    /// Queues `request` at `version` for writing and returns the future of its response.
    /// Requests are written in the order their `start` calls return, so a caller that must
    /// keep an order (a producer's sequence numbers) starts them one after another and awaits
    /// the responses later, with the requests pipelined.
    pub(crate) async fn start<R: Request>(
        &self,
        version: i16,
        request: &R,
    ) -> Result<impl std::future::Future<Output = Result<R::Response, ClientError>>, ClientError>
    {
        self.start_encoded(self.encode(version, request)?).await
    }

    /// Encodes `request` at `version` without sending it, so that large requests can be
    /// encoded on other tasks and then started in order with [`Self::start_encoded`].
    pub(crate) fn encode<R: Request>(
        &self,
        version: i16,
        request: &R,
    ) -> Result<EncodedRequest<R>, ClientError> {
        let protocol = |reason: String| ClientError::Protocol {
            addr: self.addr.clone(),
            reason,
        };
        let api = ApiKey::try_from(R::KEY)
            .map_err(|_| protocol(format!("unknown API key {}", R::KEY)))?;
        // The correlation id is written when the request is started.
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_client_id(Some(self.client_id.clone()));
        let header_version = api.request_header_version(version);
        let size = header
            .compute_size(header_version)
            .map_err(|e| protocol(e.to_string()))?
            + request
                .compute_size(version)
                .map_err(|e| protocol(e.to_string()))?;
        let mut frame = BytesMut::with_capacity(4 + size);
        frame.put_i32(size as i32);
        header
            .encode(&mut frame, header_version)
            .map_err(|e| protocol(e.to_string()))?;
        request
            .encode(&mut frame, version)
            .map_err(|e| protocol(e.to_string()))?;
        Ok(EncodedRequest {
            frame,
            version,
            request: std::marker::PhantomData,
        })
    }

    /// Queues an encoded request for writing and returns the future of its response; see
    /// [`Self::start`].
    pub(crate) async fn start_encoded<R: Request>(
        &self,
        encoded: EncodedRequest<R>,
    ) -> Result<impl std::future::Future<Output = Result<R::Response, ClientError>>, ClientError>
    {
        if self.is_closed() {
            return Err(ClientError::Disconnected {
                addr: self.addr.clone(),
            });
        }
        let EncodedRequest {
            mut frame, version, ..
        } = encoded;
        let correlation_id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        // Size (4 bytes), API key (2), API version (2), then the correlation id.
        frame[8..12].copy_from_slice(&correlation_id.to_be_bytes());
        let (respond, response) = oneshot::channel();
        self.outgoing
            .send((frame.freeze(), Some((correlation_id, respond))))
            .await
            .map_err(|_| ClientError::Disconnected {
                addr: self.addr.clone(),
            })?;
        let addr = self.addr.clone();
        Ok(async move {
            let protocol = |reason: String| ClientError::Protocol {
                addr: addr.clone(),
                reason,
            };
            let mut body = response
                .await
                .map_err(|_| ClientError::Disconnected { addr: addr.clone() })??;
            let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
                .map_err(|e| protocol(e.to_string()))?;
            if header.correlation_id != correlation_id {
                return Err(protocol(format!(
                    "response {} arrived for request {correlation_id}",
                    header.correlation_id
                )));
            }
            R::Response::decode(&mut body, version).map_err(|e| protocol(e.to_string()))
        })
    }
}

impl Connection {
    /// Writes a request the broker will not answer (a produce with acks=0); returns once it is
    /// queued for writing.
    pub(crate) async fn send_unanswered(
        &self,
        version: i16,
        request: &impl Request,
    ) -> Result<(), ClientError> {
        let mut frame = self.encode(version, request)?.frame;
        let correlation_id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        frame[8..12].copy_from_slice(&correlation_id.to_be_bytes());
        self.outgoing
            .send((frame.freeze(), None))
            .await
            .map_err(|_| ClientError::Disconnected {
                addr: self.addr.clone(),
            })
    }
}

/// A request encoded and not yet sent.
#[derive(Debug)]
pub(crate) struct EncodedRequest<R> {
    frame: BytesMut,
    version: i16,
    request: std::marker::PhantomData<fn() -> R>,
}

async fn write_requests(
    write_half: tokio::net::tcp::OwnedWriteHalf,
    mut requests: mpsc::Receiver<Outgoing>,
    in_flight: Arc<Mutex<InFlight>>,
    addr: String,
) {
    let mut writer = BufWriter::with_capacity(256 * 1024, write_half);
    while let Some((frame, waiter)) = requests.recv().await {
        {
            let mut pending = lock(&in_flight);
            if pending.closed {
                if let Some((_, respond)) = waiter {
                    let _ = respond.send(Err(ClientError::Disconnected { addr: addr.clone() }));
                }
                continue;
            }
            if let Some(waiter) = waiter {
                pending.waiters.push_back(waiter);
            }
        }
        let written = async {
            writer.write_all(&frame).await?;
            if requests.is_empty() {
                writer.flush().await?;
            }
            Ok::<_, std::io::Error>(())
        };
        if let Err(source) = written.await {
            fail_all(&in_flight, &addr, source);
            return;
        }
    }
}

async fn read_responses(
    mut read_half: tokio::net::tcp::OwnedReadHalf,
    decoder: FrameDecoder,
    in_flight: Arc<Mutex<InFlight>>,
    shutdown: Arc<Notify>,
    addr: String,
) {
    let mut buf = BytesMut::new();
    loop {
        let frame = async {
            loop {
                let decoded = decoder.decode(&mut buf).map_err(|e| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
                })?;
                if let Some(body) = decoded {
                    return Ok(body);
                }
                // Read into spare capacity: no zeroing of buffers about to be overwritten.
                buf.reserve(decoder.room(&buf));
                if read_half.read_buf(&mut buf).await? == 0 {
                    return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
                }
            }
        };
        let frame = tokio::select! {
            frame = frame => frame,
            () = shutdown.notified() => Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "closed by the client",
            )),
        };
        match frame {
            Ok(body) => {
                let waiter = lock(&in_flight).waiters.pop_front();
                match waiter {
                    Some((_, respond)) => {
                        let _ = respond.send(Ok(body));
                    }
                    None => {
                        let source = std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            "a response to no request",
                        );
                        fail_all(&in_flight, &addr, source);
                        return;
                    }
                }
            }
            Err(source) => {
                fail_all(&in_flight, &addr, source);
                return;
            }
        }
    }
}

fn fail_all(in_flight: &Mutex<InFlight>, addr: &str, source: std::io::Error) {
    let source = Arc::new(source);
    let waiters: Vec<_> = {
        let mut pending = lock(in_flight);
        pending.closed = true;
        pending.waiters.drain(..).collect()
    };
    for (_, respond) in waiters {
        let _ = respond.send(Err(ClientError::Io {
            addr: addr.to_string(),
            source: Arc::clone(&source),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ApiVersionsRequest;
    use tokio::net::TcpListener;

    /// A peer that reads one request and answers with `answer` (raw bytes), then stays open.
    async fn peer_answering(answer: Vec<u8>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let size = stream.read_i32().await.unwrap();
            let mut request = vec![0; usize::try_from(size).unwrap()];
            stream.read_exact(&mut request).await.unwrap();
            // Answer in pieces, as a slow network would deliver it.
            for piece in answer.chunks(7) {
                stream.write_all(piece).await.unwrap();
                tokio::task::yield_now().await;
            }
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        });
        addr
    }

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut out = i32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
        out.extend_from_slice(body);
        out
    }

    #[tokio::test]
    async fn a_response_over_the_limit_fails_its_request_without_being_read() {
        // 200 MiB announced, nothing behind it.
        let addr = peer_answering((200i32 << 20).to_be_bytes().to_vec()).await;
        let conn = Connection::connect_with_limit(&addr, "t", 1 << 20)
            .await
            .unwrap();
        let answer = conn.send(0, &ApiVersionsRequest::default()).await;
        assert!(matches!(answer, Err(ClientError::Io { .. })), "{answer:?}");
        assert!(conn.is_closed());
    }

    #[tokio::test]
    async fn a_response_in_pieces_is_read_whole() {
        // ApiVersions v0: correlation id 1, error 0, no API keys.
        let body = [
            &1i32.to_be_bytes()[..],
            &0i16.to_be_bytes(),
            &0i32.to_be_bytes(),
        ]
        .concat();
        let addr = peer_answering(frame(&body)).await;
        let conn = Connection::connect_with_limit(&addr, "t", 64)
            .await
            .unwrap();
        let answer = conn.send(0, &ApiVersionsRequest::default()).await.unwrap();
        assert_eq!(answer.error_code, 0);
        assert!(answer.api_keys.is_empty());
    }
}
