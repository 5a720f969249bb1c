//! `eddy bench produce | consume | transactions | streams | latency`: load against a broker, with
//! rounds that alternate what is compared (so a shared machine's slow spells fall on both)
//! and one JSON line of figures per run and per comparison.

use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;
use eddy_core::wire::compression::Compression;
use serde_json::json;

use crate::app::{ProcessingGuarantee, Progress};
use crate::internals::bench::latency::{self, LatencyLoad};
use crate::internals::bench::streams::{self, StreamsLoad, StreamsWorkload};
use crate::internals::bench::{self, Throughput};

#[derive(Subcommand)]
pub(super) enum BenchCommand {
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
    /// Write records at a steady rate to a running streams application's input, each value
    /// the time it was sent (microseconds, an 8-byte long), and time each until its echo is
    /// readable (read_committed) on the application's output: the exactly-once soak
    /// application's `data` and `echo`, whichever library runs it. Prints p50, p99, p99.9.
    Latency(LatencyBenchArgs),
}

#[derive(clap::Args)]
pub(super) struct LatencyBenchArgs {
    /// The broker, as host:port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub(super) bootstrap: String,
    /// The application's input topic.
    #[arg(long, default_value = "data")]
    pub(super) input: String,
    /// Its output topic that carries each input value unchanged.
    #[arg(long, default_value = "echo")]
    pub(super) output: String,
    /// Records per second.
    #[arg(long, default_value_t = 10_000)]
    pub(super) rate: u64,
    /// Seconds measured.
    #[arg(long, default_value_t = 20)]
    pub(super) seconds: u64,
    /// Seconds written first and not measured.
    #[arg(long, default_value_t = 3)]
    pub(super) warmup_seconds: u64,
    /// Distinct keys, written in turn.
    #[arg(long, default_value_t = 1_000)]
    pub(super) keys: u64,
    /// A label for the output line.
    #[arg(long, default_value = "eddy")]
    pub(super) label: String,
    /// Read the output uncommitted (read_committed by default): the latency without what the
    /// application's transactions add.
    #[arg(long)]
    pub(super) read_uncommitted: bool,
}

#[derive(clap::Args)]
pub(super) struct StreamsBenchArgs {
    /// The broker, as host:port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub(super) bootstrap: String,
    /// `stateless` (filter, map_values), `count` (count by key) or `windowed` (one-minute
    /// tumbling count by key).
    #[arg(long, default_value = "stateless")]
    pub(super) workload: StreamsWorkload,
    /// Input records.
    #[arg(long, default_value_t = 1_000_000)]
    pub(super) records: u64,
    /// Distinct keys.
    #[arg(long, default_value_t = 100_000)]
    pub(super) keys: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    pub(super) value_size: usize,
    /// Partitions of the input and output.
    #[arg(long, default_value_t = 4)]
    pub(super) partitions: i32,
    /// `commit.interval.ms`, for both guarantees.
    #[arg(long, default_value_t = 100)]
    pub(super) commit_interval_ms: u64,
    /// `num.stream.threads`.
    #[arg(long, default_value_t = 1)]
    pub(super) threads: usize,
    /// `state.checkpoint.interval.ms`: how long committed state may wait in memory before
    /// it is applied to sled (the library's default when not given).
    #[arg(long)]
    pub(super) checkpoint_interval_ms: Option<u64>,
    /// Runs of each guarantee, alternated.
    #[arg(long, default_value_t = 3)]
    pub(super) rounds: usize,
    /// Only this guarantee (`exactly_once_v2` or `at_least_once`), no comparison.
    #[arg(long)]
    pub(super) guarantee: Option<ProcessingGuarantee>,
    /// Where the applications keep their state (a fresh directory under it per run).
    #[arg(long, default_value = "eddy-bench-state")]
    pub(super) state_dir: PathBuf,
    /// After each run, empty the state directory, start the application again and time the
    /// full restore of its stores from their changelogs (count and windowed workloads).
    #[arg(long)]
    pub(super) restore: bool,
    /// A further setting of the application, as a Kafka-style property
    /// (`statestore.memory.max.bytes=67108864`); repeat for more.
    #[arg(long = "config", value_name = "KEY=VALUE", value_parser = property)]
    pub(super) properties: Vec<(String, String)>,
}

/// `key=value`.
fn property(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        _ => Err(format!("{text:?} is not key=value")),
    }
}

#[derive(clap::Args)]
pub(super) struct BenchArgs {
    /// The broker, as host:port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub(super) bootstrap: String,
    /// The topic (created if it does not exist).
    #[arg(long, default_value = "eddy-bench")]
    pub(super) topic: String,
    /// Partitions of the topic.
    #[arg(long, default_value_t = 6)]
    pub(super) partitions: i32,
    /// Records in all.
    #[arg(long, default_value_t = 5_000_000)]
    pub(super) records: u64,
    /// Bytes per record value.
    #[arg(long, default_value_t = 100)]
    pub(super) record_size: usize,
    /// Records per batch (produce).
    #[arg(long, default_value_t = 2000)]
    pub(super) batch_records: usize,
    /// Produce requests under way at once.
    #[arg(long, default_value_t = 8)]
    pub(super) in_flight: usize,
    /// A label for the output line.
    #[arg(long, default_value = "broker")]
    pub(super) label: String,
    /// Use the raw load generator (the least a client can do: it measures the broker) instead
    /// of eddy's client (produce and consume).
    #[arg(long)]
    pub(super) raw: bool,
}

pub(super) async fn run(command: BenchCommand) -> std::io::Result<()> {
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
                            Duration::from_millis(transaction_ms),
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
            let plain = median(&mut plain_rates);
            let transactional = median(&mut transactional_rates);
            let figures = json!({
                "broker": args.label,
                "test": "transactions",
                "plain_records_per_sec": whole(plain),
                "transactional_records_per_sec": whole(transactional),
                "ratio": rounded(transactional / plain, 3),
                "transactions": end_txn.len(),
                "end_txn_p50_ms": rounded(percentile(0.5), 2),
                "end_txn_p99_ms": rounded(percentile(0.99), 2),
            });
            println!("{figures}");
        }
        BenchCommand::Streams(args) => run_streams(args).await?,
        BenchCommand::Latency(args) => {
            let load = LatencyLoad {
                input: args.input,
                output: args.output,
                rate: args.rate,
                duration: Duration::from_secs(args.seconds),
                warmup: Duration::from_secs(args.warmup_seconds),
                keys: args.keys,
                drain: Duration::from_secs(5),
                read_uncommitted: args.read_uncommitted,
            };
            let figures = latency::run(&args.bootstrap, &load)
                .await
                .map_err(std::io::Error::other)?;
            let ms = |d: Duration| rounded(d.as_secs_f64() * 1e3, 2);
            let line = json!({
                "test": "streams-latency",
                "label": args.label,
                "read_uncommitted": args.read_uncommitted,
                "rate": args.rate,
                "rate_reached": whole(figures.rate),
                "sent": figures.sent,
                "received": figures.received,
                "p50_ms": ms(figures.p50),
                "p99_ms": ms(figures.p99),
                "p999_ms": ms(figures.p999),
                "max_ms": ms(figures.max),
            });
            println!("{line}");
        }
    }
    Ok(())
}

async fn run_streams(args: StreamsBenchArgs) -> std::io::Result<()> {
    let workload = args.workload;
    if args.restore && workload == StreamsWorkload::Stateless {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "--restore: the stateless workload has no state to restore",
        ));
    }
    let guarantees = match args.guarantee {
        Some(one) => vec![one],
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
                commit_interval: Some(Duration::from_millis(args.commit_interval_ms)),
                threads: args.threads,
                checkpoint_interval: args.checkpoint_interval_ms.map(Duration::from_millis),
                restore: args.restore,
                properties: args.properties.clone(),
            };
            let dir = args.state_dir.join(format!("run-{round}-{i}"));
            let mut progress = ProgressLine::new();
            let run = streams::run(&args.bootstrap, &load, &dir, &mut |p| progress.show(p))
                .await
                .map_err(std::io::Error::other)?;
            progress.finish();
            let _ = std::fs::remove_dir_all(&dir);
            let figures = json!({
                "test": format!("streams-{}", workload.name()),
                "guarantee": format!("{:?}", guarantees[i]),
                "records": run.records,
                "seconds": rounded(run.elapsed.as_secs_f64(), 3),
                "records_per_sec": whole(run.records_per_sec()),
                "commits": run.commits,
                "commit_avg_ms": rounded(run.commit_latency_avg.as_secs_f64() * 1e3, 1),
                "commit_max_ms": rounded(run.commit_latency_max.as_secs_f64() * 1e3, 1),
                "peak_rss_mb": run.peak_memory.map(mebibytes),
                "start_rss_mb": run.start_memory.map(mebibytes),
                "thread_time": run
                    .thread_time
                    .shares()
                    .iter()
                    .map(|&(part, share)| (part.to_string(), json!(rounded(share, 3))))
                    .collect::<serde_json::Map<_, _>>(),
            });
            println!("{figures}");
            rates[i].push(run.records_per_sec());
            if let Some(restore) = run.restore {
                let figures = json!({
                    "test": format!("streams-{}-restore", workload.name()),
                    "guarantee": format!("{:?}", guarantees[i]),
                    "records": restore.records,
                    "seconds": rounded(restore.elapsed.as_secs_f64(), 3),
                    "records_per_sec": whole(restore.records_per_sec()),
                    "peak_rss_mb": restore.peak_memory.map(mebibytes),
                });
                println!("{figures}");
            }
        }
    }
    let medians: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
    if let [at_least_once, exactly_once] = medians[..] {
        let figures = json!({
            "test": format!("streams-{}", workload.name()),
            "at_least_once_median": whole(at_least_once),
            "exactly_once_median": whole(exactly_once),
            "exactly_once_cost": rounded(1.0 - exactly_once / at_least_once, 3),
        });
        println!("{figures}");
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

    fn show(&mut self, progress: Progress) {
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
fn print_throughput(label: &str, test: &str, figures: &Throughput) {
    let line = json!({
        "broker": label,
        "test": test,
        "records": figures.records,
        "seconds": rounded(figures.elapsed.as_secs_f64(), 3),
        "records_per_sec": whole(figures.records_per_sec()),
        "mb_per_sec": rounded(figures.mb_per_sec(), 1),
    });
    println!("{line}");
}

/// A rate as a whole number, as the figures are printed.
fn mebibytes(bytes: u64) -> u64 {
    bytes >> 20
}

fn whole(value: f64) -> u64 {
    // A float-to-integer `as` saturates (and gives 0 for NaN): no figure can wrap.
    value.round() as u64
}

/// `value` to `digits` decimals, as the figures are printed.
fn rounded(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}
