//! An in-process broker on an ephemeral loopback port: what makes `cargo run` work with
//! nothing installed, and what tests use. It is the same broker as `eddy broker`, reached
//! through the same wire protocol as any other.
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! let broker = eddy::embedded::EmbeddedBroker::start().await?;
//! println!("bootstrap.servers={}", broker.bootstrap());
//! broker.shutdown().await?;
//! # Ok(()) }
//! ```

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

pub use eddy_broker::{Broker, BrokerBuilder, BrokerConfig, LogConfig};

/// A broker running inside this process.
#[derive(Debug)]
pub struct EmbeddedBroker {
    broker: Broker,
    /// The temporary data directory, removed on drop, when none was given.
    _temp_dir: Option<tempfile::TempDir>,
}

impl EmbeddedBroker {
    /// Starts a broker on 127.0.0.1 with a free port and a temporary data directory that is
    /// removed when the broker is dropped.
    pub async fn start() -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("eddy-embedded-")
            .tempdir()?;
        let broker = Self::builder(dir.path().to_path_buf()).start().await?;
        Ok(Self {
            broker,
            _temp_dir: Some(dir),
        })
    }

    /// Starts a broker on 127.0.0.1 with a free port, keeping its data in `dir` (created if
    /// needed), so a later start finds it again.
    pub async fn start_in(dir: impl Into<PathBuf>) -> io::Result<Self> {
        let broker = Self::builder(dir.into()).start().await?;
        Ok(Self {
            broker,
            _temp_dir: None,
        })
    }

    /// The builder the two starts use, for anything else to change.
    pub fn builder(dir: PathBuf) -> BrokerBuilder {
        Broker::builder()
            .data_dir(dir)
            .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// `host:port` for clients' `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.broker.bootstrap()
    }

    /// The address the broker listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.broker.local_addr()
    }

    /// Stops the broker cleanly (logs synced, indexes written).
    pub async fn shutdown(self) -> io::Result<()> {
        self.broker.shutdown().await
    }
}
