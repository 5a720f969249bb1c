//! The `eddy` command-line tool.
//!
//! `eddy broker --data-dir DIR --listen 127.0.0.1:9092` runs the bundled broker in the
//! foreground until SIGINT or SIGTERM, then shuts it down cleanly.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use eddy_broker::Broker;
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    name = "eddy",
    version,
    about = "Stream processing on Kafka-compatible logs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the bundled broker in the foreground.
    Broker(BrokerArgs),
}

#[derive(clap::Args)]
struct BrokerArgs {
    /// Where topics and logs live.
    #[arg(long, default_value = "eddy-data")]
    data_dir: PathBuf,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:9092")]
    listen: SocketAddr,
    /// The host clients are told to connect to (defaults to the listen address).
    #[arg(long)]
    advertised_host: Option<String>,
    /// Create unknown topics when clients ask for them (off by default, as in Kafka 4).
    #[arg(long)]
    auto_create_topics: bool,
    /// Partitions of topics created without a count.
    #[arg(long, default_value_t = 1)]
    num_partitions: i32,
    /// Acknowledge produce requests once they reach the page cache instead of after fsync
    /// (Kafka's default; eddy's default is fsync).
    #[arg(long)]
    no_fsync: bool,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("EDDY_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("eddy: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Broker(args) => run_broker(args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "eddy stopped");
            ExitCode::FAILURE
        }
    }
}

async fn run_broker(args: BrokerArgs) -> std::io::Result<()> {
    let mut builder = Broker::builder()
        .data_dir(args.data_dir)
        .listen(args.listen)
        .auto_create_topics(args.auto_create_topics)
        .num_partitions(args.num_partitions)
        .fsync_before_ack(!args.no_fsync);
    if let Some(host) = args.advertised_host {
        builder = builder.advertised_host(host);
    }
    let broker = builder.start().await?;
    shutdown_signal().await?;
    tracing::info!("shutting down");
    broker.shutdown().await?;
    tracing::info!("stopped cleanly");
    Ok(())
}

async fn shutdown_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = term.recv() => Ok(()),
    }
}
