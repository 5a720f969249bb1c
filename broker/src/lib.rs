//! eddy-broker: the broker bundled with eddy, a single node that speaks the Apache Kafka wire
//! protocol, so every Kafka client and tool works against it.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! let broker = eddy_broker::Broker::builder()
//!     .data_dir("/var/lib/eddy")
//!     .listen("127.0.0.1:9092".parse().unwrap())
//!     .start()
//!     .await?;
//! println!("serving on {}", broker.local_addr());
//! broker.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! A request travels `server` (listener, connections, framing) → `handler` (one module per
//! API family, translating requests into calls on the domain and errors into Kafka error
//! codes) → the domain: `storage` (partition logs), `metadata` (topics and their
//! configurations), `group` (consumer groups and offsets) and `txn` (producer ids and
//! transactions). Handlers never touch files; storage never sees a request. The domain is
//! internal: what users see is the [`Broker`], its builder and its configuration.

mod clock;
mod config;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod group;
mod handler;
mod internal_records;
mod maintenance;
pub(crate) mod metadata;
mod server;
mod state;
pub(crate) mod storage;
pub(crate) mod txn;

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use config::BrokerConfig;
pub use group::GroupConfig;
use state::BrokerState;
pub use storage::LogConfig;
pub use storage::StorageFaults;
pub use txn::TxnConfig;

/// A running broker. Dropping it leaves it running until the runtime ends; call
/// [`Broker::shutdown`] to stop it cleanly.
#[derive(Debug)]
pub struct Broker {
    local_addr: SocketAddr,
    state: Arc<BrokerState>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Broker {
    /// A builder with Kafka's defaults, listening on 127.0.0.1:9092.
    pub fn builder() -> BrokerBuilder {
        BrokerBuilder {
            config: BrokerConfig::default(),
        }
    }

    /// The address the broker listens on (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `host:port` for clients' `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.local_addr.to_string()
    }

    /// The faults its storage is made to meet from now on: a slow or failing disk, for tests.
    #[cfg(feature = "failpoints")]
    pub fn storage_faults(&self) -> StorageFaults {
        self.state.logs.faults.clone()
    }

    /// The broker's settings.
    pub fn config(&self) -> &BrokerConfig {
        &self.state.config
    }

    /// Stops accepting connections, closes the open ones, and syncs every log and writes its
    /// indexes, so the next start needs no recovery work.
    pub async fn shutdown(mut self) -> io::Result<()> {
        let _ = self.shutdown.send(true);
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
        let state = Arc::clone(&self.state);
        tokio::task::spawn_blocking(move || state.logs.close())
            .await
            .map_err(io::Error::other)?
    }
}

/// Settings for a [`Broker`]; see [`BrokerConfig`] for each one's default.
#[derive(Debug, Clone)]
pub struct BrokerBuilder {
    config: BrokerConfig,
}

impl BrokerBuilder {
    /// Where topics and logs live (defaults to `eddy-data`).
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config.data_dir = dir.into();
        self
    }

    /// The address to listen on (defaults to 127.0.0.1:9092; port 0 picks a free port).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.config.listen = addr;
        self
    }

    /// The host clients are told to connect to (defaults to the listen address's IP).
    pub fn advertised_host(mut self, host: impl Into<String>) -> Self {
        self.config.advertised_host = Some(host.into());
        self
    }

    /// The port clients are told to connect to (defaults to the port listened on), for a
    /// broker behind a proxy or a port forward.
    pub fn advertised_port(mut self, port: u16) -> Self {
        self.config.advertised_port = Some(port);
        self
    }

    /// Create unknown topics on first use (defaults to false, as in Kafka 4).
    pub fn auto_create_topics(mut self, enabled: bool) -> Self {
        self.config.auto_create_topics = enabled;
        self
    }

    /// Partitions of topics created without a count (defaults to 1).
    pub fn num_partitions(mut self, partitions: i32) -> Self {
        self.config.num_partitions = partitions;
        self
    }

    /// The largest request accepted (defaults to 100 MiB).
    pub fn socket_request_max_bytes(mut self, bytes: usize) -> Self {
        self.config.socket_request_max_bytes = bytes;
        self
    }

    /// Close connections from which nothing arrives for this long (defaults to 10 minutes).
    pub fn connections_max_idle(mut self, idle: Duration) -> Self {
        self.config.connections_max_idle = idle;
        self
    }

    /// Connections one address may have open at once (defaults to no limit).
    pub fn max_connections_per_ip(mut self, connections: usize) -> Self {
        self.config.max_connections_per_ip = connections;
        self
    }

    /// How long the first rebalance of a new or empty group waits for more members
    /// (`group.initial.rebalance.delay.ms`; defaults to 0, Kafka's built-in default is 3 s).
    pub fn group_initial_rebalance_delay(mut self, delay: Duration) -> Self {
        self.config.groups.initial_rebalance_delay = delay;
        self
    }

    /// Answer produce requests only after fsync (defaults to true). `false` leaves
    /// durability to the page cache, like Kafka's default, with an fsync every `flush.ms`.
    pub fn fsync_before_ack(mut self, fsync: bool) -> Self {
        self.config.log.fsync_before_ack = fsync;
        self
    }

    /// How often retention runs (defaults to 5 minutes).
    pub fn retention_check_interval(mut self, interval: Duration) -> Self {
        self.config.retention_check_interval = interval;
        self
    }

    /// How often compacted topics are looked at for work (defaults to 15 seconds).
    pub fn cleaner_backoff(mut self, interval: Duration) -> Self {
        self.config.cleaner_backoff = interval;
        self
    }

    /// The log settings of topics that do not set their own.
    pub fn log_defaults(mut self, log: LogConfig) -> Self {
        self.config.log = log;
        self
    }

    /// All settings at once.
    pub fn config(mut self, config: BrokerConfig) -> Self {
        self.config = config;
        self
    }

    /// Opens the data directory (recovering every log), binds the listener and starts
    /// serving.
    pub async fn start(self) -> io::Result<Broker> {
        let config = self.config;
        let listener = TcpListener::bind(config.listen).await?;
        let local_addr = listener.local_addr()?;
        let host = config
            .advertised_host
            .clone()
            .unwrap_or_else(|| local_addr.ip().to_string());
        let state = tokio::task::spawn_blocking(move || {
            let port = config.advertised_port.unwrap_or(local_addr.port());
            BrokerState::open(config, (host, port))
        })
        .await
        .map_err(io::Error::other)??;
        let state = Arc::new(state);
        tracing::info!(
            %local_addr,
            data_dir = %state.config.data_dir.display(),
            topics = state.metadata.topics().len(),
            "broker started"
        );
        let (shutdown, stop) = watch::channel(false);
        let tasks = vec![
            tokio::spawn(server::serve(listener, Arc::clone(&state), stop.clone())),
            tokio::spawn(maintenance::run(Arc::clone(&state), stop.clone())),
            tokio::spawn(Arc::clone(&state.groups).run_timers(stop.clone())),
            tokio::spawn(Arc::clone(&state.transactions).run_timers(stop)),
        ];
        Ok(Broker {
            local_addr,
            state,
            shutdown,
            tasks,
        })
    }
}
