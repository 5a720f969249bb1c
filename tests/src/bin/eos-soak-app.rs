//! The exactly-once soak application, after Kafka's `EosTestClient`: a streams application
//! (`eos-soak`) that reads `data` (UTF-8 string keys, values Kafka's 8-byte big-endian
//! longs) and writes, every update emitted (record cache off): `echo` (the input unchanged),
//! `min` and `sum` per key, and, after a `repartition()` of the stream, `max` and `cnt` per
//! key, all 8-byte big-endian longs keyed by the input key. The topics `data`, `echo`,
//! `min`, `sum`, `max` and `cnt` must exist; it creates its internal topics itself. It runs
//! until SIGTERM or SIGINT, then closes cleanly.
//!
//! ```sh
//! eos-soak-app --bootstrap HOST:PORT --state-dir DIR [--guarantee exactly_once_v2|at_least_once]
//!              [--commit-interval-ms N] [--threads N] [--transaction-timeout-ms N]
//!              [--checkpoint-interval-ms N] [--config KEY=VALUE]...
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use eddy::app::{ProcessingGuarantee, State, Streams, StreamsConfig};
use eddy::serde::{I64Serde, Nullable, StringSerde};
use eddy::streams::{Consumed, Grouped, Materialized, Produced, StreamsBuilder, Topology};

/// The soak application's command line.
#[derive(Debug, Parser)]
#[command(name = "eos-soak-app", about = "The exactly-once soak application")]
struct Args {
    /// The cluster's brokers (`host:port`, comma-separated).
    #[arg(long)]
    bootstrap: String,
    /// Where the tasks keep their state.
    #[arg(long)]
    state_dir: PathBuf,
    /// `exactly_once_v2` or `at_least_once`.
    #[arg(long, default_value = "exactly_once_v2")]
    guarantee: ProcessingGuarantee,
    /// `commit.interval.ms`; Kafka Streams' default for the guarantee when not given.
    #[arg(long)]
    commit_interval_ms: Option<u64>,
    /// `num.stream.threads`.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// The producers' `transaction.timeout.ms`; Kafka Streams' default under exactly-once
    /// (10 s) when not given.
    #[arg(long)]
    transaction_timeout_ms: Option<u64>,
    /// `state.checkpoint.interval.ms`: how long committed state may wait in memory before it
    /// reaches sled; the library's default (1 s) when not given.
    #[arg(long)]
    checkpoint_interval_ms: Option<u64>,
    /// A further setting, as a Kafka-style property (`statestore.memory.max.bytes=67108864`);
    /// repeat for more.
    #[arg(long = "config", value_name = "KEY=VALUE")]
    properties: Vec<String>,
}

fn topology() -> Topology {
    let builder = StreamsBuilder::new();
    let longs = || Produced::with(StringSerde, Nullable(I64Serde));
    let data = builder.stream("data", Consumed::with(StringSerde, I64Serde));
    data.clone()
        .to("echo", Produced::with(StringSerde, I64Serde));
    let grouped = || {
        data.clone()
            .group_by_key(Grouped::with(StringSerde, I64Serde))
    };
    grouped()
        .aggregate(
            || i64::MAX,
            |_k, v, min| v.min(min),
            Materialized::with(StringSerde, I64Serde),
        )
        .to_stream()
        .to("min", longs());
    grouped()
        .aggregate(
            || 0,
            |_k, v, sum| sum + v,
            Materialized::with(StringSerde, I64Serde),
        )
        .to_stream()
        .to("sum", longs());
    let repartitioned = data
        .clone()
        .repartition(Grouped::with(StringSerde, I64Serde));
    let regrouped = || {
        repartitioned
            .clone()
            .group_by_key(Grouped::with(StringSerde, I64Serde))
    };
    regrouped()
        .aggregate(
            || i64::MIN,
            |_k, v, max| v.max(max),
            Materialized::with(StringSerde, I64Serde),
        )
        .to_stream()
        .to("max", longs());
    regrouped()
        .count(Materialized::with(StringSerde, I64Serde))
        .to_stream()
        .to("cnt", longs());
    builder.build().expect("the soak topology is valid")
}

/// SIGTERM and SIGINT, caught from the start: a signal that comes while the application is
/// still starting closes it cleanly too.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn catch() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    eddy_tests::log_to_stderr();
    let args = Args::parse();
    let mut signals = match Signals::catch() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("eos-soak-app: catching signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut config = StreamsConfig::new("eos-soak")
        .bootstrap_servers([args.bootstrap.clone()])
        .state_dir(args.state_dir.clone())
        .processing_guarantee(args.guarantee)
        .num_stream_threads(args.threads)
        .statestore_cache_max_bytes(0)
        // A killed instance leaves the group within seconds, so that a restart takes over
        // soon.
        .main_consumer(|c| {
            c.session_timeout(Duration::from_secs(6))
                .heartbeat_interval(Duration::from_secs(1))
        });
    config.commit_interval_ms = args.commit_interval_ms.map(Duration::from_millis);
    if let Some(ms) = args.checkpoint_interval_ms {
        config = config.state_checkpoint_interval(Duration::from_millis(ms));
    }
    if let Some(ms) = args.transaction_timeout_ms {
        config = config.producer(|p| p.transaction_timeout(Duration::from_millis(ms)));
    }
    if let Err(e) = eddy_tests::set_properties(&mut config, &args.properties) {
        eprintln!("eos-soak-app: --config: {e}");
        return ExitCode::from(2);
    }
    let mut streams = match Streams::new(topology(), config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("eos-soak-app: {e}");
            return ExitCode::from(2);
        }
    };
    tokio::select! {
        started = streams.start() => {
            if let Err(e) = started {
                eprintln!("eos-soak-app: starting: {e}");
                return ExitCode::FAILURE;
            }
        }
        () = signals.next() => {
            let _ = streams.close(Duration::from_secs(60)).await;
            return ExitCode::SUCCESS;
        }
    }
    tokio::select! {
        () = signals.next() => {}
        () = async {
            while streams.state() != State::Error {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        } => {}
    }
    let failed = streams.state() == State::Error;
    let closed = streams.close(Duration::from_secs(60)).await;
    match (failed, closed) {
        (false, Ok(())) => ExitCode::SUCCESS,
        (_, Err(e)) => {
            eprintln!("eos-soak-app: {e}");
            ExitCode::FAILURE
        }
        (true, Ok(())) => ExitCode::FAILURE,
    }
}
