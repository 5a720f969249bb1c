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
    /// Show transactional producers and their transactions.
    #[command(subcommand)]
    Transactions(TransactionsCommand),
}

/// Which broker a command talks to.
#[derive(clap::Args)]
struct BrokerAddress {
    /// The broker, as host:port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
}

#[derive(Subcommand)]
enum TransactionsCommand {
    /// Every transactional id, with its producer id and state.
    List {
        #[command(flatten)]
        broker: BrokerAddress,
    },
    /// One transactional id: producer, state, timeout, and the open transaction's start and
    /// partitions.
    Describe {
        #[command(flatten)]
        broker: BrokerAddress,
        /// The transactional id.
        #[arg(long)]
        transactional_id: String,
    },
}

#[derive(Subcommand)]
enum GroupsCommand {
    /// The ids of every group.
    List {
        #[command(flatten)]
        broker: BrokerAddress,
    },
    /// A group's partitions: committed offset, end, lag and consumer.
    Describe {
        #[command(flatten)]
        broker: BrokerAddress,
        /// The group.
        #[arg(long)]
        group: String,
    },
    /// Move a group's offsets in a topic (a dry run unless --execute); the group must have no
    /// active members.
    ResetOffsets {
        #[command(flatten)]
        broker: BrokerAddress,
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
    /// Send the same records with acks=all and from a transactional producer in
    /// transactions of `--transaction-ms` each, alternately; prints the throughputs, the ratio
    /// of their medians and the EndTxn latency.
    Transactions {
        #[command(flatten)]
        load: BenchArgs,
        /// How long each transaction runs.
        #[arg(long, default_value_t = 100)]
        transaction_ms: u64,
        /// Plain and transactional runs of `--records` each, alternated.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
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
            Command::Transactions(command) => run_transactions(command).await,
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
    let load_of = |args: &BenchArgs, topic: String| bench::ProduceLoad {
        topic,
        partitions: args.partitions,
        records: args.records,
        record_size: args.record_size,
        batch_records: args.batch_records,
        in_flight: args.in_flight,
        acks: -1,
        compression: Compression::None,
    };
    let failed = std::io::Error::other;
    match command {
        BenchCommand::Produce(args) => {
            let load = load_of(&args, args.topic.clone());
            let figures = bench::produce(&args.bootstrap, &load)
                .await
                .map_err(failed)?;
            print_throughput(&args.label, "produce", &figures);
        }
        BenchCommand::Consume(args) => {
            let figures = bench::consume(
                &args.bootstrap,
                &args.topic,
                args.partitions,
                args.records,
                args.record_size,
            )
            .await
            .map_err(failed)?;
            print_throughput(&args.label, "consume", &figures);
        }
        BenchCommand::Transactions {
            load: args,
            transaction_ms,
            rounds,
        } => {
            // Rounds alternate plain and transactional runs, so a shared machine's slow spells
            // fall on both; the medians are compared.
            let (mut plain_rates, mut transactional_rates, mut end_txn) =
                (Vec::new(), Vec::new(), Vec::new());
            for round in 0..rounds.max(1) {
                // Each run also pays for the writeback of the one before: the order alternates.
                for transactional in [round % 2 == 1, round % 2 == 0] {
                    let topic = format!("{}-{round}-{transactional}", args.topic);
                    let load = load_of(&args, topic);
                    if transactional {
                        let run = bench::produce_transactionally(
                            &args.bootstrap,
                            &load,
                            &format!("{}-producer", args.topic),
                            std::time::Duration::from_millis(transaction_ms),
                        )
                        .await
                        .map_err(failed)?;
                        print_throughput(&args.label, "produce-transactional", &run.throughput);
                        transactional_rates.push(run.throughput.records_per_sec());
                        end_txn.extend(run.end_txn);
                    } else {
                        let plain = bench::produce(&args.bootstrap, &load)
                            .await
                            .map_err(failed)?;
                        print_throughput(&args.label, "produce", &plain);
                        plain_rates.push(plain.records_per_sec());
                    }
                }
            }
            end_txn.sort_unstable();
            let percentile = |p: f64| {
                let i = ((end_txn.len() as f64 * p).ceil() as usize).clamp(1, end_txn.len().max(1));
                end_txn.get(i - 1).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
            };
            println!(
                "{{\"broker\":\"{}\",\"test\":\"transactions\",\"plain_records_per_sec\":{:.0},\"transactional_records_per_sec\":{:.0},\"ratio\":{:.3},\"transactions\":{},\"end_txn_p50_ms\":{:.2},\"end_txn_p99_ms\":{:.2}}}",
                args.label,
                median(&mut plain_rates),
                median(&mut transactional_rates),
                median(&mut transactional_rates) / median(&mut plain_rates),
                end_txn.len(),
                percentile(0.5),
                percentile(0.99)
            );
        }
    }
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// One JSON line of figures.
fn print_throughput(label: &str, test: &str, figures: &bench::Throughput) {
    println!(
        "{{\"broker\":\"{label}\",\"test\":\"{test}\",\"records\":{},\"seconds\":{:.3},\"records_per_sec\":{:.0},\"mb_per_sec\":{:.1}}}",
        figures.records,
        figures.elapsed.as_secs_f64(),
        figures.records_per_sec(),
        figures.mb_per_sec()
    );
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
        GroupsCommand::List { broker } => groups::list(&connect(broker.bootstrap).await?).await,
        GroupsCommand::Describe { broker, group } => {
            groups::describe(&connect(broker.bootstrap).await?, &group).await
        }
        GroupsCommand::ResetOffsets {
            broker,
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
            groups::reset_offsets(
                &connect(broker.bootstrap).await?,
                &group,
                &topic,
                target,
                execute,
            )
            .await
        }
    }
    .map_err(std::io::Error::other)?;
    print!("{text}");
    Ok(())
}

async fn run_transactions(command: TransactionsCommand) -> std::io::Result<()> {
    use eddy::client::Admin;
    use eddy::tools::transactions;
    let connect = |bootstrap: String| async move {
        Admin::connect(&bootstrap)
            .await
            .map_err(std::io::Error::other)
    };
    let text = match command {
        TransactionsCommand::List { broker } => {
            transactions::list(&connect(broker.bootstrap).await?).await
        }
        TransactionsCommand::Describe {
            broker,
            transactional_id,
        } => {
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            transactions::describe(&connect(broker.bootstrap).await?, &transactional_id, now_ms)
                .await
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
