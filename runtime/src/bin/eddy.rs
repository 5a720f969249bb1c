//! The `eddy` command-line tool.
//!
//! - `eddy broker --data-dir DIR --listen 127.0.0.1:9092` runs the bundled broker in the
//!   foreground until SIGINT or SIGTERM, then shuts it down cleanly.
//! - `eddy bench produce|consume --bootstrap HOST:PORT …` measures a broker's throughput and
//!   prints one JSON line of figures.
//! - `eddy groups list | describe --group G | reset-offsets --group G --topic T …` shows and
//!   moves consumer groups, as Kafka's `kafka-consumer-groups.sh` does.
//! - `eddy topics create | list | describe | delete` manages topics (`kafka-topics.sh`).
//! - `eddy produce TOPIC` writes standard input's lines to a topic; `eddy consume TOPIC`
//!   prints a topic's records (Kafka's console producer and consumer), on eddy's own client.
//! - `eddy transactions list | describe` shows transactional producers.

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
    /// Create, list, describe and delete topics.
    #[command(subcommand)]
    Topics(TopicsCommand),
    /// Write standard input to a topic, a record per line: `key<TAB>value`, or a value alone
    /// on lines without a tab.
    Produce(ProduceArgs),
    /// Print a topic's records to standard output, a line each.
    Consume(ConsumeArgs),
}

#[derive(Subcommand)]
enum TopicsCommand {
    /// Create a topic.
    Create {
        #[command(flatten)]
        broker: BrokerAddress,
        /// The topic.
        topic: String,
        /// Partitions.
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Replicas of each partition.
        #[arg(long, default_value_t = 1)]
        replication_factor: i16,
        /// A topic config, as key=value (repeatable).
        #[arg(long = "config")]
        configs: Vec<String>,
    },
    /// The names of every topic.
    List {
        #[command(flatten)]
        broker: BrokerAddress,
        /// Include the broker's internal topics.
        #[arg(long)]
        internal: bool,
    },
    /// A topic's partitions, leaders and replicas.
    Describe {
        #[command(flatten)]
        broker: BrokerAddress,
        /// The topic.
        topic: String,
    },
    /// Delete a topic.
    Delete {
        #[command(flatten)]
        broker: BrokerAddress,
        /// The topic.
        topic: String,
    },
}

#[derive(clap::Args)]
struct ProduceArgs {
    #[command(flatten)]
    broker: BrokerAddress,
    /// The topic.
    topic: String,
    /// Every line is a value: no keys, even on lines with a tab.
    #[arg(long)]
    no_keys: bool,
    /// acks: all, 1 or 0.
    #[arg(long, default_value = "all")]
    acks: String,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none")]
    compression: String,
    /// How long a batch waits for more records, in ms.
    #[arg(long, default_value_t = 5)]
    linger_ms: u64,
    /// Send without idempotence (required with acks 0 or 1).
    #[arg(long)]
    no_idempotence: bool,
}

#[derive(clap::Args)]
struct ConsumeArgs {
    #[command(flatten)]
    broker: BrokerAddress,
    /// The topic.
    topic: String,
    /// Read as a member of this group, committing what was printed.
    #[arg(long)]
    group: Option<String>,
    /// Start at the beginning of partitions without a committed offset (else at the end).
    #[arg(long)]
    from_beginning: bool,
    /// Stop after this many records.
    #[arg(long)]
    max_messages: Option<u64>,
    /// Stop when no record came for this many ms.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// read_uncommitted or read_committed.
    #[arg(long, default_value = "read_uncommitted")]
    isolation: String,
    /// Print each record's key before its value, tab-separated.
    #[arg(long)]
    print_key: bool,
    /// Print each record's partition and offset first, tab-separated.
    #[arg(long)]
    print_position: bool,
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
    /// Send records (no key, fixed-size values, acks=all, idempotent) through eddy's client
    /// and wait for every acknowledgement.
    Produce(BenchArgs),
    /// Read a topic's partitions from the start through eddy's client until the given number
    /// of records arrived.
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
    /// Write keyed input, then run a streams application over it and time it from running to
    /// every record processed and committed; at-least-once and exactly-once runs alternate
    /// `--rounds` times and the ratio of their medians is printed.
    Streams(StreamsBenchArgs),
}

#[derive(clap::Args)]
struct StreamsBenchArgs {
    /// The broker, as host:port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// `stateless` (filter, map_values), `count` (count by key) or `windowed` (one-minute
    /// tumbling count by key).
    #[arg(long, default_value = "stateless")]
    workload: String,
    /// Input records.
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Distinct keys.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Partitions of the input and output.
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    /// `commit.interval.ms`, for both guarantees.
    #[arg(long, default_value_t = 100)]
    commit_interval_ms: u64,
    /// `num.stream.threads`.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// `state.checkpoint.interval.ms`: how long committed state may wait in memory before
    /// it is applied to sled (the library's default when not given).
    #[arg(long)]
    checkpoint_interval_ms: Option<u64>,
    /// Runs of each guarantee, alternated.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Only this guarantee (`exactly_once_v2` or `at_least_once`), no comparison.
    #[arg(long)]
    guarantee: Option<String>,
    /// Where the applications keep their state (a fresh directory under it per run).
    #[arg(long, default_value = "eddy-bench-state")]
    state_dir: PathBuf,
    /// After each run, empty the state directory, start the application again and time the
    /// full restore of its stores from their changelogs (count and windowed workloads).
    #[arg(long)]
    restore: bool,
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
    /// Use the raw load generator (the least a client can do: it measures the broker) instead
    /// of eddy's client (produce and consume).
    #[arg(long)]
    raw: bool,
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
    /// Close connections from which nothing arrives for this long (`connections.max.idle.ms`).
    #[arg(long, default_value_t = 600_000)]
    connections_max_idle_ms: u64,
    /// Connections one address may hold at once (`max.connections.per.ip`; no limit by
    /// default).
    #[arg(long)]
    max_connections_per_ip: Option<usize>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("EDDY_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal: no escape codes in files and pipes.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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
            Command::Topics(command) => run_topics(command).await,
            Command::Produce(args) => run_produce(args).await,
            Command::Consume(args) => run_consume(args).await,
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
        .fsync_before_ack(!args.no_fsync)
        .connections_max_idle(std::time::Duration::from_millis(
            args.connections_max_idle_ms,
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
            let figures = if args.raw {
                bench::produce(&args.bootstrap, &load).await
            } else {
                bench::client::produce(&args.bootstrap, &load).await
            }
            .map_err(failed)?;
            print_throughput(&args.label, "produce", &figures);
        }
        BenchCommand::Consume(args) => {
            let (bootstrap, topic) = (&args.bootstrap, &args.topic);
            let (partitions, records, size) = (args.partitions, args.records, args.record_size);
            let figures = if args.raw {
                bench::consume(bootstrap, topic, partitions, records, size).await
            } else {
                bench::client::consume(bootstrap, topic, partitions, records, size).await
            }
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
        BenchCommand::Streams(args) => run_streams_bench(args).await?,
    }
    Ok(())
}

async fn run_streams_bench(args: StreamsBenchArgs) -> std::io::Result<()> {
    use eddy::app::ProcessingGuarantee;
    use eddy::bench::streams::{self, StreamsLoad, StreamsWorkload};
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, what);
    let workload = match args.workload.as_str() {
        "stateless" => StreamsWorkload::Stateless,
        "count" => StreamsWorkload::CountByKey,
        "windowed" => StreamsWorkload::WindowedCount,
        other => {
            return Err(invalid(format!(
                "--workload {other}: stateless, count or windowed"
            )))
        }
    };
    if args.restore && workload == StreamsWorkload::Stateless {
        return Err(invalid(
            "--restore: the stateless workload has no state to restore".into(),
        ));
    }
    let guarantee = |name: &str| match name {
        "exactly_once_v2" => Ok(ProcessingGuarantee::ExactlyOnceV2),
        "at_least_once" => Ok(ProcessingGuarantee::AtLeastOnce),
        other => Err(invalid(format!(
            "--guarantee {other}: exactly_once_v2 or at_least_once"
        ))),
    };
    let guarantees = match &args.guarantee {
        Some(one) => vec![guarantee(one)?],
        None => vec![
            ProcessingGuarantee::AtLeastOnce,
            ProcessingGuarantee::ExactlyOnceV2,
        ],
    };
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); guarantees.len()];
    for round in 0..args.rounds.max(1) {
        // The order alternates, so that a shared machine's slow spells fall on both.
        let mut order: Vec<usize> = (0..guarantees.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let load = StreamsLoad {
                workload,
                records: args.records,
                keys: args.keys,
                value_size: args.value_size,
                partitions: args.partitions,
                guarantee: guarantees[i],
                commit_interval: Some(std::time::Duration::from_millis(args.commit_interval_ms)),
                threads: args.threads,
                checkpoint_interval: args
                    .checkpoint_interval_ms
                    .map(std::time::Duration::from_millis),
                restore: args.restore,
            };
            let dir = args.state_dir.join(format!("run-{round}-{i}"));
            let mut progress = ProgressLine::new();
            let run = streams::run(&args.bootstrap, &load, &dir, &mut |p| progress.show(p))
                .await
                .map_err(std::io::Error::other)?;
            progress.finish();
            let _ = std::fs::remove_dir_all(&dir);
            println!(
                "{{\"test\":\"streams-{}\",\"guarantee\":\"{:?}\",\"records\":{},\"seconds\":{:.3},\"records_per_sec\":{:.0},\"commits\":{},\"commit_avg_ms\":{:.1},\"commit_max_ms\":{:.1}}}",
                args.workload,
                guarantees[i],
                run.records,
                run.elapsed.as_secs_f64(),
                run.records_per_sec(),
                run.commits,
                run.commit_latency_avg.as_secs_f64() * 1e3,
                run.commit_latency_max.as_secs_f64() * 1e3
            );
            rates[i].push(run.records_per_sec());
            if let Some(restore) = run.restore {
                println!(
                    "{{\"test\":\"streams-{}-restore\",\"guarantee\":\"{:?}\",\"records\":{},\"seconds\":{:.3},\"records_per_sec\":{:.0}}}",
                    args.workload,
                    guarantees[i],
                    restore.records,
                    restore.elapsed.as_secs_f64(),
                    restore.records_per_sec()
                );
            }
        }
    }
    let medians: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
    if let [at_least_once, exactly_once] = medians[..] {
        println!(
            "{{\"test\":\"streams-{}\",\"at_least_once_median\":{:.0},\"exactly_once_median\":{:.0},\"exactly_once_cost\":{:.3}}}",
            args.workload,
            at_least_once,
            exactly_once,
            1.0 - exactly_once / at_least_once
        );
    }
    Ok(())
}

/// The progress of an application the tool runs, on standard error: one line rewritten in
/// place on a terminal, a line each time otherwise.
struct ProgressLine {
    terminal: bool,
    shown: bool,
}

impl ProgressLine {
    fn new() -> Self {
        use std::io::IsTerminal;
        Self {
            terminal: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    fn show(&mut self, progress: eddy::app::Progress) {
        if self.terminal {
            eprint!("\r{progress}\x1b[K");
        } else {
            eprintln!("{progress}");
        }
        self.shown = true;
    }

    /// Ends the line rewritten in place, so that what follows starts on its own.
    fn finish(&mut self) {
        if self.terminal && self.shown {
            eprintln!();
        }
        self.shown = false;
    }
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
    use eddy::tools::groups::{self, ResetTarget};
    let text = match command {
        GroupsCommand::List { broker } => groups::list(&connect(&broker.bootstrap).await?).await,
        GroupsCommand::Describe { broker, group } => {
            groups::describe(&connect(&broker.bootstrap).await?, &group).await
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
                &connect(&broker.bootstrap).await?,
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
    use eddy::tools::transactions;
    let text = match command {
        TransactionsCommand::List { broker } => {
            transactions::list(&connect(&broker.bootstrap).await?).await
        }
        TransactionsCommand::Describe {
            broker,
            transactional_id,
        } => transactions::describe(&connect(&broker.bootstrap).await?, &transactional_id).await,
    }
    .map_err(std::io::Error::other)?;
    print!("{text}");
    Ok(())
}

async fn run_topics(command: TopicsCommand) -> std::io::Result<()> {
    use eddy::tools::topics;
    let text = match command {
        TopicsCommand::Create {
            broker,
            topic,
            partitions,
            replication_factor,
            configs,
        } => {
            let admin = connect(&broker.bootstrap).await?;
            topics::create(&admin, &topic, partitions, replication_factor, &configs).await
        }
        TopicsCommand::List { broker, internal } => {
            topics::list(&connect(&broker.bootstrap).await?, internal).await
        }
        TopicsCommand::Describe { broker, topic } => {
            topics::describe(&connect(&broker.bootstrap).await?, &topic).await
        }
        TopicsCommand::Delete { broker, topic } => {
            topics::delete(&connect(&broker.bootstrap).await?, &topic).await
        }
    }
    .map_err(std::io::Error::other)?;
    print!("{text}");
    Ok(())
}

async fn run_produce(args: ProduceArgs) -> std::io::Result<()> {
    use eddy::client::{compression, Acks, ProducerConfig};
    let invalid = |e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    let acks = match args.acks.as_str() {
        "all" | "-1" => Acks::All,
        "1" => Acks::Leader,
        "0" => Acks::None,
        other => return Err(invalid(format!("--acks {other}: expected all, 1 or 0"))),
    };
    let config = ProducerConfig::new(&args.broker.bootstrap)
        .client_id("eddy-console-producer")
        .acks(acks)
        .idempotence(!args.no_idempotence && acks == Acks::All)
        .compression(compression(&args.compression).map_err(|e| invalid(e.to_string()))?)
        .linger(std::time::Duration::from_millis(args.linger_ms));
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let separator = (!args.no_keys).then_some('\t');
    let written = eddy::tools::console::produce(config, &args.topic, separator, stdin)
        .await
        .map_err(std::io::Error::other)?;
    tracing::debug!(records = written, topic = %args.topic, "produced");
    Ok(())
}

async fn run_consume(args: ConsumeArgs) -> std::io::Result<()> {
    use eddy::client::{ConsumerConfig, IsolationLevel};
    use eddy::tools::console::{self, ConsumeOptions};
    let isolation = match args.isolation.as_str() {
        "read_uncommitted" => IsolationLevel::ReadUncommitted,
        "read_committed" => IsolationLevel::ReadCommitted,
        other => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("--isolation {other}: expected read_uncommitted or read_committed"),
            ))
        }
    };
    let options = ConsumeOptions {
        topic: args.topic,
        group: args.group,
        from_beginning: args.from_beginning,
        max_messages: args.max_messages,
        idle_timeout: args.timeout_ms.map(std::time::Duration::from_millis),
        isolation,
        print_position: args.print_position,
        print_key: args.print_key,
    };
    let config = ConsumerConfig::new(&args.broker.bootstrap).client_id("eddy-console-consumer");
    let stdout = tokio::io::stdout();
    let consumed = tokio::select! {
        consumed = console::consume(config, &options, stdout) => {
            consumed.map_err(std::io::Error::other)?
        }
        stopped = shutdown_signal() => {
            stopped?;
            return Ok(());
        }
    };
    tracing::debug!(records = consumed, "consumed");
    Ok(())
}

/// An admin client for the broker at `bootstrap`.
async fn connect(bootstrap: &str) -> std::io::Result<eddy::client::Admin> {
    eddy::client::Admin::connect(bootstrap)
        .await
        .map_err(std::io::Error::other)
}

async fn shutdown_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = term.recv() => Ok(()),
    }
}
