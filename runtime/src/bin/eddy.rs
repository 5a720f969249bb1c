//! The `eddy` command-line tool.
//!
//! - `eddy broker --data-dir DIR --listen 127.0.0.1:9092` runs the bundled broker in the
//!   foreground until SIGINT or SIGTERM, then shuts it down cleanly.
//! - `eddy bench produce|consume --bootstrap HOST:PORT …` measures a broker's throughput and
//!   prints one JSON line of figures.
//! - `eddy groups list | describe --group G | reset-offsets --group G --topic T …` shows and
//!   moves consumer groups, as Kafka's `kafka-consumer-groups.sh` does.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use eddy::bench;
use eddy::wire::compression::Compression;
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
    /// Measure a broker's produce or consume throughput.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Show consumer groups, their lag, and move their offsets.
    #[command(subcommand)]
    Groups(GroupsCommand),
}

#[derive(Subcommand)]
enum GroupsCommand {
    /// The ids of every group.
    List {
        /// The broker, as host:port.
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// A group's partitions: committed offset, end, lag and consumer.
    Describe {
        /// The broker, as host:port.
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        /// The group.
        #[arg(long)]
        group: String,
    },
    /// Move a group's offsets in a topic (a dry run unless --execute); the group must have no
    /// active members.
    ResetOffsets {
        /// The broker, as host:port.
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        /// The group.
        #[arg(long)]
        group: String,
        /// The topic whose partitions move.
        #[arg(long)]
        topic: String,
        /// To the first offset of each partition.
        #[arg(long, group = "target")]
        to_earliest: bool,
        /// To the end of each partition.
        #[arg(long, group = "target")]
        to_latest: bool,
        /// To the first record at or after a time, like 2026-11-29T10:00:00Z.
        #[arg(long, group = "target")]
        to_datetime: Option<String>,
        /// By this many records from the committed offsets (negative to go back).
        #[arg(long, group = "target", allow_negative_numbers = true)]
        shift_by: Option<i64>,
        /// Commit the new offsets (without it, only print them).
        #[arg(long)]
        execute: bool,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Send records (no key, fixed-size values) and wait for every acknowledgement.
    Produce(BenchArgs),
    /// Read a topic's partitions from the start until the given number of records arrived.
    Consume(BenchArgs),
}

#[derive(clap::Args)]
struct BenchArgs {
    /// The broker, as host:port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// The topic (created if it does not exist).
    #[arg(long, default_value = "eddy-bench")]
    topic: String,
    /// Partitions of the topic.
    #[arg(long, default_value_t = 6)]
    partitions: i32,
    /// Records in all.
    #[arg(long, default_value_t = 5_000_000)]
    records: u64,
    /// Bytes per record value.
    #[arg(long, default_value_t = 100)]
    record_size: usize,
    /// Records per batch (produce).
    #[arg(long, default_value_t = 2000)]
    batch_records: usize,
    /// Produce requests under way at once.
    #[arg(long, default_value_t = 8)]
    in_flight: usize,
    /// A label for the output line.
    #[arg(long, default_value = "broker")]
    label: String,
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
    /// The port clients are told to connect to (defaults to the listen port).
    #[arg(long)]
    advertised_port: Option<u16>,
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
            Command::Bench(command) => run_bench(command).await,
            Command::Groups(command) => run_groups(command).await,
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

async fn run_bench(command: BenchCommand) -> std::io::Result<()> {
    let (test, result) = match command {
        BenchCommand::Produce(args) => {
            let load = bench::ProduceLoad {
                topic: args.topic.clone(),
                partitions: args.partitions,
                records: args.records,
                record_size: args.record_size,
                batch_records: args.batch_records,
                in_flight: args.in_flight,
                acks: -1,
                compression: Compression::None,
            };
            (
                "produce",
                (args.label, bench::produce(&args.bootstrap, &load).await),
            )
        }
        BenchCommand::Consume(args) => {
            let result = bench::consume(
                &args.bootstrap,
                &args.topic,
                args.partitions,
                args.records,
                args.record_size,
            )
            .await;
            ("consume", (args.label, result))
        }
    };
    let (label, result) = result;
    let figures = result.map_err(std::io::Error::other)?;
    println!(
        "{{\"broker\":\"{label}\",\"test\":\"{test}\",\"records\":{},\"seconds\":{:.3},\"records_per_sec\":{:.0},\"mb_per_sec\":{:.1}}}",
        figures.records,
        figures.elapsed.as_secs_f64(),
        figures.records_per_sec(),
        figures.mb_per_sec()
    );
    Ok(())
}

async fn run_groups(command: GroupsCommand) -> std::io::Result<()> {
    use eddy::client::Admin;
    use eddy::tools::groups::{self, ResetTarget};
    let connect = |bootstrap: String| async move {
        Admin::connect(&bootstrap)
            .await
            .map_err(std::io::Error::other)
    };
    let text = match command {
        GroupsCommand::List { bootstrap } => groups::list(&connect(bootstrap).await?).await,
        GroupsCommand::Describe { bootstrap, group } => {
            groups::describe(&connect(bootstrap).await?, &group).await
        }
        GroupsCommand::ResetOffsets {
            bootstrap,
            group,
            topic,
            to_earliest,
            to_latest,
            to_datetime,
            shift_by,
            execute,
        } => {
            let target = if to_earliest {
                ResetTarget::Earliest
            } else if to_latest {
                ResetTarget::Latest
            } else if let Some(at) = to_datetime {
                ResetTarget::Datetime(
                    eddy::tools::parse_datetime(&at).map_err(std::io::Error::other)?,
                )
            } else if let Some(n) = shift_by {
                ResetTarget::ShiftBy(n)
            } else {
                return Err(std::io::Error::other(
                    "say where to: --to-earliest, --to-latest, --to-datetime or --shift-by",
                ));
            };
            groups::reset_offsets(&connect(bootstrap).await?, &group, &topic, target, execute).await
        }
    }
    .map_err(std::io::Error::other)?;
    print!("{text}");
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
