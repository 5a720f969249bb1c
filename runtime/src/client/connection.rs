//! One connection to one broker, shared by any number of tasks: requests are written in the
//! order they are sent and may be many at once (pipelining); a reader task hands each
//! response to the request with its correlation id. A connection that fails fails every
//! request in flight on it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};

use super::ClientError;

/// The largest response accepted.
const MAX_RESPONSE_BYTES: usize = 256 << 20;

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
pub struct Connection {
    addr: String,
    client_id: StrBytes,
    next_correlation_id: Arc<AtomicI32>,
    outgoing: mpsc::Sender<Outgoing>,
    in_flight: Arc<Mutex<InFlight>>,
    shutdown: Arc<Notify>,
}

impl Connection {
    /// Connects to `addr` (`host:port`).
    pub async fn connect(addr: &str, client_id: &str) -> Result<Self, ClientError> {
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
    pub fn is_closed(&self) -> bool {
        lock(&self.in_flight).closed
    }

    /// Closes the connection: requests in flight fail with [`ClientError::Disconnected`]. What a
    /// client does with a broker that stopped answering in time.
    pub fn close(&self) {
        // notify_one keeps a permit if the reader is not waiting at this moment.
        self.shutdown.notify_one();
    }

    /// The broker's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `request` at `version` and waits for its response. (Requests the broker does not
    /// answer, such as a produce with acks=0, do not go through here.)
    pub async fn send<R: Request>(
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
    pub async fn start<R: Request>(
        &self,
        version: i16,
        request: &R,
    ) -> Result<impl std::future::Future<Output = Result<R::Response, ClientError>>, ClientError>
    {
        self.start_encoded(self.encode(version, request)?).await
    }

    /// Encodes `request` at `version` without sending it, so that large requests can be
    /// encoded on other tasks and then started in order with [`Self::start_encoded`].
    pub fn encode<R: Request>(
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
    pub async fn start_encoded<R: Request>(
        &self,
        encoded: EncodedRequest<R>,
    ) -> Result<impl std::future::Future<Output = Result<R::Response, ClientError>>, ClientError>
    {
        if self.is_closed() {
            return Err(ClientError::Disconnected(self.addr.clone()));
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
            .map_err(|_| ClientError::Disconnected(self.addr.clone()))?;
        let addr = self.addr.clone();
        Ok(async move {
            let protocol = |reason: String| ClientError::Protocol {
                addr: addr.clone(),
                reason,
            };
            let mut body = response
                .await
                .map_err(|_| ClientError::Disconnected(addr.clone()))??;
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
    pub async fn send_unanswered(
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
            .map_err(|_| ClientError::Disconnected(self.addr.clone()))
    }
}

/// A request encoded and not yet sent.
#[derive(Debug)]
pub struct EncodedRequest<R> {
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
                    let _ = respond.send(Err(ClientError::Disconnected(addr.clone())));
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
    read_half: tokio::net::tcp::OwnedReadHalf,
    in_flight: Arc<Mutex<InFlight>>,
    shutdown: Arc<Notify>,
    addr: String,
) {
    let mut reader = BufReader::with_capacity(256 * 1024, read_half);
    loop {
        let frame = async {
            let size = reader.read_i32().await?;
            if size < 0 || size as usize > MAX_RESPONSE_BYTES {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("a response of {size} bytes"),
                ));
            }
            // Read into spare capacity: no zeroing of buffers about to be overwritten.
            let size = size as usize;
            let mut body = BytesMut::with_capacity(size);
            while body.len() < size {
                let want = (size - body.len()) as u64;
                if (&mut reader).take(want).read_buf(&mut body).await? == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
            }
            Ok(body.freeze())
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
