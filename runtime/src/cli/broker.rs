//! `eddy broker`: the bundled broker in the foreground until SIGINT or SIGTERM, then shut
//! down cleanly.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use eddy_broker::Broker;

use super::shutdown_signal;

#[derive(clap::Args)]
pub(super) struct BrokerArgs {
    /// Where topics and logs live.
    #[arg(long, default_value = "eddy-data")]
    pub(super) data_dir: PathBuf,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub(super) listen: SocketAddr,
    /// The host clients are told to connect to (defaults to the listen address).
    #[arg(long)]
    pub(super) advertised_host: Option<String>,
    /// The port clients are told to connect to (defaults to the listen port).
    #[arg(long)]
    pub(super) advertised_port: Option<u16>,
    /// Create unknown topics when clients ask for them (off by default, as in Kafka 4).
    #[arg(long)]
    pub(super) auto_create_topics: bool,
    /// Partitions of topics created without a count.
    #[arg(long, default_value_t = 1)]
    pub(super) num_partitions: i32,
    /// Acknowledge produce requests once they reach the page cache instead of after fsync
    /// (Kafka's default; eddy's default is fsync).
    #[arg(long)]
    pub(super) no_fsync: bool,
    /// Close connections from which nothing arrives for this long (`connections.max.idle.ms`).
    #[arg(long, default_value_t = 600_000)]
    pub(super) connections_max_idle_ms: u64,
    /// Connections one address may hold at once (`max.connections.per.ip`; no limit by
    /// default).
    #[arg(long)]
    pub(super) max_connections_per_ip: Option<usize>,
    /// How long the first rebalance of a new or empty group waits for more members to join
    /// (`group.initial.rebalance.delay.ms`; Kafka's built-in default is 3000).
    #[arg(long, default_value_t = 0)]
    pub(super) group_initial_rebalance_delay_ms: u64,
}

pub(super) async fn run(args: BrokerArgs) -> std::io::Result<()> {
    let mut builder = Broker::builder()
        .data_dir(args.data_dir)
        .listen(args.listen)
        .auto_create_topics(args.auto_create_topics)
        .num_partitions(args.num_partitions)
        .fsync_before_ack(!args.no_fsync)
        .connections_max_idle(Duration::from_millis(args.connections_max_idle_ms))
        .group_initial_rebalance_delay(Duration::from_millis(
            args.group_initial_rebalance_delay_ms,
        ));
    if let Some(limit) = args.max_connections_per_ip {
        builder = builder.max_connections_per_ip(limit);
    }
    if let Some(host) = args.advertised_host {
        builder = builder.advertised_host(host);
    }
    if let Some(port) = args.advertised_port {
        builder = builder.advertised_port(port);
    }
    let broker = builder.start().await?;
    shutdown_signal().await?;
    tracing::info!("shutting down");
    broker.shutdown().await?;
    tracing::info!("stopped cleanly");
    Ok(())
}
