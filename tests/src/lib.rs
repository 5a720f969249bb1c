//! Helpers for eddy's end-to-end tests: a bare Kafka wire connection that sends any bytes,
//! well formed or not, and decodes the responses, so tests can speak to a real broker below
//! any client library; the Kafka Streams reference catalog on eddy's side
//! ([`streams_catalog`]) with its randomized differential test ([`streams_differential`]);
//! and the Flink CEP reference catalog on eddy's side ([`cep_catalog`]).

pub mod cep_catalog;
pub mod streams_catalog;
pub mod streams_differential;

use std::io;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, RequestHeader, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A raw connection to a broker.
pub struct WireConnection {
    stream: TcpStream,
    next_correlation_id: i32,
}

impl WireConnection {
    /// Connects to `addr`.
    pub async fn connect(addr: &str) -> io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            next_correlation_id: 1,
        })
    }

    /// Sends bytes as they are, framing included or not.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Sends a request body of type `R` at `version` and decodes its response.
    pub async fn request<R: Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> io::Result<R::Response> {
        let correlation_id = self.write_request(version, request).await?;
        self.read_response::<R>(version, correlation_id).await
    }

    /// Sends a request the broker does not answer (a produce with acks=0).
    pub async fn request_without_response<R: Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> io::Result<()> {
        self.write_request(version, request).await.map(|_| ())
    }

    /// Sends a request as [`Self::request`] does, with every compact string equal to
    /// `placeholder` replaced by `replacement` on the wire: a string that the codec would
    /// refuse to encode (longer than Kafka allows, say) can still be sent to the broker.
    /// `version` must be a flexible one.
    pub async fn request_replacing<R: Request>(
        &mut self,
        version: i16,
        request: &R,
        placeholder: &str,
        replacement: &[u8],
    ) -> io::Result<R::Response> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let body = encode_request(correlation_id, version, request)?;
        let compact = |s: &[u8]| {
            let mut out = Vec::new();
            let mut n = u64::try_from(s.len()).expect("a length fits u64") + 1;
            while n >= 0x80 {
                out.push((n as u8 & 0x7f) | 0x80);
                n >>= 7;
            }
            out.push(n as u8);
            out.extend_from_slice(s);
            out
        };
        let (from, to) = (compact(placeholder.as_bytes()), compact(replacement));
        let mut replaced = Vec::with_capacity(body.len() + replacement.len());
        let mut rest = &body[..];
        while let Some(at) = rest.windows(from.len()).position(|w| w == from) {
            replaced.extend_from_slice(&rest[..at]);
            replaced.extend_from_slice(&to);
            rest = &rest[at + from.len()..];
        }
        assert!(
            !replaced.is_empty(),
            "the placeholder is not in the request"
        );
        replaced.extend_from_slice(rest);
        let size = i32::try_from(replaced.len()).expect("a frame under 2 GiB");
        self.stream.write_all(&size.to_be_bytes()).await?;
        self.stream.write_all(&replaced).await?;
        self.read_response::<R>(version, correlation_id).await
    }

    async fn read_response<R: Request>(
        &mut self,
        version: i16,
        correlation_id: i32,
    ) -> io::Result<R::Response> {
        let mut response = self.read_frame().await?;
        let header = ResponseHeader::decode(&mut response, R::Response::header_version(version))
            .map_err(io::Error::other)?;
        assert_eq!(
            header.correlation_id, correlation_id,
            "responses out of order"
        );
        R::Response::decode(&mut response, version).map_err(io::Error::other)
    }

    async fn write_request<R: Request>(&mut self, version: i16, request: &R) -> io::Result<i32> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let body = encode_request(correlation_id, version, request)?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(i32::try_from(body.len()).map_err(io::Error::other)?);
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame).await?;
        Ok(correlation_id)
    }

    /// Reads one response frame (without its size).
    pub async fn read_frame(&mut self) -> io::Result<Bytes> {
        let size = self.stream.read_i32().await?;
        let mut body = vec![0; size.max(0) as usize];
        self.stream.read_exact(&mut body).await?;
        Ok(Bytes::from(body))
    }

    /// Whether the broker closed the connection (reads end) within `wait`.
    pub async fn is_closed_by_peer(&mut self, wait: Duration) -> bool {
        let mut buf = [0u8; 64];
        loop {
            match tokio::time::timeout(wait, self.stream.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => continue,
                Err(_) => return false,
            }
        }
    }
}

/// A request's header and body, without the frame's size.
fn encode_request<R: Request>(
    correlation_id: i32,
    version: i16,
    request: &R,
) -> io::Result<BytesMut> {
    let api = ApiKey::try_from(R::KEY).expect("a known API key");
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("eddy-tests")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, api.request_header_version(version))
        .map_err(io::Error::other)?;
    request
        .encode(&mut body, version)
        .map_err(io::Error::other)?;
    Ok(body)
}

/// A Fetch of partition 0 of `topic` from offset 0 that does not wait, up to 1 MiB.
pub fn fetch_from_start(topic: &str) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![
                FetchPartition::default().with_partition_max_bytes(1 << 20)
            ])])
}

/// Reads an i16 error code at the front of a body.
pub fn leading_error_code(mut body: Bytes) -> i16 {
    body.get_i16()
}

/// What a check of [`wait_until`] gives: whether it holds, or why not.
pub trait Check {
    /// `Ok` when the awaited condition holds, else what stands instead (may be empty).
    fn holds(self) -> Result<(), String>;
}

impl Check for bool {
    fn holds(self) -> Result<(), String> {
        if self {
            Ok(())
        } else {
            Err(String::new())
        }
    }
}

impl Check for Result<(), String> {
    fn holds(self) -> Result<(), String> {
        self
    }
}

/// Runs `check` until it holds, every 50 ms of tokio's clock (so a test with paused time
/// waits for none of them), and panics with `what`, what the last check said and the time
/// waited if it has not held within `within`. `check` may poll, read or await anything.
pub async fn wait_until<C: Check>(
    within: Duration,
    what: impl std::fmt::Display,
    mut check: impl AsyncFnMut() -> C,
) {
    let started = tokio::time::Instant::now();
    loop {
        let Err(state) = check().await.holds() else {
            return;
        };
        let waited = started.elapsed();
        assert!(waited < within, "{what} {state}, after {waited:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (up to a minute) until a streams application is in `state`, and panics if it is
/// not by then.
pub async fn wait_for_state(streams: &eddy::app::Streams, state: eddy::app::State) {
    wait_until(
        Duration::from_secs(60),
        format!("not {state:?}"),
        async || streams.state() == state,
    )
    .await;
}

/// The broker the client tests run against: Apache Kafka (or any broker) at
/// `EDDY_TEST_BOOTSTRAP` when that is set, as `.ci/run` does with the reference broker;
/// otherwise eddy's embedded broker, started for the test.
pub struct TestBroker {
    bootstrap: String,
    embedded: Option<eddy::embedded::EmbeddedBroker>,
    /// The embedded broker's data, kept across [`TestBroker::restart`].
    data: Option<tempfile::TempDir>,
}

impl TestBroker {
    /// Starts (or finds) the broker.
    pub async fn start() -> Self {
        match std::env::var("EDDY_TEST_BOOTSTRAP") {
            Ok(bootstrap) if !bootstrap.is_empty() => Self {
                bootstrap,
                embedded: None,
                data: None,
            },
            _ => {
                let data = tempfile::Builder::new()
                    .prefix("eddy-test-broker-")
                    .tempdir()
                    .expect("a temporary directory");
                let broker = eddy::embedded::EmbeddedBroker::start_in(data.path())
                    .await
                    .expect("the embedded broker starts");
                Self {
                    bootstrap: broker.bootstrap(),
                    embedded: Some(broker),
                    data: Some(data),
                }
            }
        }
    }

    /// Stops the embedded broker and starts it again on the same data (on a new port, which
    /// [`Self::bootstrap`] then gives): whether it could, which it cannot for an external
    /// broker. Panics if the broker does not start again.
    pub async fn restart(&mut self) -> bool {
        let (Some(broker), Some(data)) = (self.embedded.take(), self.data.as_ref()) else {
            return false;
        };
        broker.shutdown().await.expect("the broker stops");
        let broker = eddy::embedded::EmbeddedBroker::start_in(data.path())
            .await
            .expect("the broker starts again on its data");
        self.bootstrap = broker.bootstrap();
        self.embedded = Some(broker);
        true
    }

    /// `bootstrap.servers`.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// Whether this is eddy's embedded broker (some checks read its files).
    pub fn is_embedded(&self) -> bool {
        self.embedded.is_some()
    }

    /// Creates a topic with a name no other test used, and waits for its leaders.
    pub async fn create_topic(&self, name: &str, partitions: i32) -> String {
        let admin = eddy::client::Admin::connect(self.bootstrap())
            .await
            .expect("an admin client connects");
        let topic = self.unique(name);
        admin
            .create_topics(&[eddy::client::NewTopic::new(&topic, partitions)])
            .await
            .expect("the topic is created");
        topic
    }

    /// A consumer of `topic`'s committed records (read-committed), on every partition from
    /// the start: what a test reads an application's output with.
    pub async fn committed_reader(&self, topic: &str) -> eddy::client::Consumer {
        use eddy::client::{Consumer, ConsumerConfig, IsolationLevel, OffsetReset};
        let mut consumer = Consumer::new(
            ConsumerConfig::new(self.bootstrap())
                .auto_offset_reset(OffsetReset::Earliest)
                .isolation_level(IsolationLevel::ReadCommitted),
        )
        .expect("a consumer");
        let partitions = consumer
            .partition_count(topic)
            .await
            .expect("the topic's partitions");
        let all: Vec<_> = (0..partitions)
            .map(|p| eddy::log::TopicPartition::new(topic, p))
            .collect();
        consumer.assign(&all).expect("assigned");
        consumer
            .seek_to_beginning(&all)
            .await
            .expect("at the start");
        consumer
    }

    /// A name no other test run used: tests against a shared external broker must not meet
    /// each other's topics and groups.
    pub fn unique(&self, name: &str) -> String {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{name}-{:x}-{n}", nanos % (1 << 40))
    }
}

/// Logs to standard error at `RUST_LOG`'s levels, `info` by default, as the `eddy` command
/// does (no colour codes in files): what the test applications print for the suites that run
/// them.
pub fn log_to_stderr() {
    eddy::cli::log_to_stderr("RUST_LOG");
}

/// Sets each of `properties` (`KEY=VALUE`, Kafka Streams' names) on `config`: what the test
/// applications' repeatable `--config` does.
pub fn set_properties(
    config: &mut eddy::app::StreamsConfig,
    properties: &[String],
) -> Result<(), String> {
    for property in properties {
        let (key, value) = property
            .split_once('=')
            .ok_or_else(|| format!("{property:?} is not KEY=VALUE"))?;
        config.set(key, value).map_err(|e| e.to_string())?;
    }
    Ok(())
}
