//! The count by key of `eddy bench streams` as an application of its own, for the restart
//! benchmark (`tests/reference/bench-restart`) and the state memory test
//! (`tests/crash/test_state_memory.py`): it reads `--input` (string keys, any values) and
//! writes each key's count to `--output` (with `--workload windowed`, each key's count in
//! one-minute tumbling windows), with the record cache at its default, under exactly-once,
//! until SIGTERM or SIGINT. It prints `running` when its tasks run.
//!
//! ```sh
//! count-app --bootstrap HOST:PORT --state-dir DIR --input TOPIC --output TOPIC
//!           [--application-id ID] [--group-instance-id ID] [--checkpoint-interval-ms N]
//!           [--workload count|windowed] [--config KEY=VALUE]...
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use eddy::app::{Bootstrap, ProcessingGuarantee, State, Streams, StreamsConfig};
use eddy::internals::bench::streams::{topology, StreamsWorkload};

/// The count application's command line.
#[derive(Debug, Parser)]
#[command(name = "count-app", about = "Count by key, exactly-once")]
struct Args {
    /// The cluster's brokers (`host:port`, comma-separated).
    #[arg(long)]
    bootstrap: String,
    /// Where the tasks keep their state.
    #[arg(long)]
    state_dir: PathBuf,
    /// The topic read.
    #[arg(long)]
    input: String,
    /// The topic the counts go to.
    #[arg(long)]
    output: String,
    /// `application.id`.
    #[arg(long, default_value = "count-app")]
    application_id: String,
    /// The consumers' `group.instance.id` (static membership: a restart takes the place of
    /// the killed instance at once instead of waiting out its session).
    #[arg(long)]
    group_instance_id: Option<String>,
    /// `state.checkpoint.interval.ms`; the library's default when not given.
    #[arg(long)]
    checkpoint_interval_ms: Option<u64>,
    /// `count` (by key) or `windowed` (by key in one-minute tumbling windows).
    #[arg(long, default_value = "count")]
    workload: StreamsWorkload,
    /// A streams setting by its Kafka Streams name (repeatable).
    #[arg(long = "config", value_name = "KEY=VALUE")]
    properties: Vec<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    eddy_tests::log_to_stderr();
    let args = Args::parse();
    let mut config = StreamsConfig::new(&args.application_id);
    config.bootstrap = Bootstrap::Servers(vec![args.bootstrap.clone()]);
    config.state_dir = args.state_dir.clone();
    config.processing_guarantee = ProcessingGuarantee::ExactlyOnceV2;
    if let Some(id) = &args.group_instance_id {
        config
            .set("consumer.group.instance.id", id)
            .expect("a consumer setting");
    }
    if let Some(ms) = args.checkpoint_interval_ms {
        config.state_checkpoint_interval = Duration::from_millis(ms);
    }
    if let Err(e) = eddy_tests::set_properties(&mut config, &args.properties) {
        eprintln!("count-app: --config: {e}");
        return ExitCode::from(2);
    }
    if args.workload == StreamsWorkload::Stateless {
        eprintln!("count-app: --workload: expected count or windowed");
        return ExitCode::from(2);
    }
    let topology = topology(args.workload, &args.input, &args.output);
    let mut streams = match Streams::new(topology, config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("count-app: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = streams.start().await {
        eprintln!("count-app: starting: {e}");
        return ExitCode::FAILURE;
    }
    let stop = async {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    let watch = async {
        let mut announced = false;
        loop {
            match streams.state() {
                State::Error => return,
                State::Running if !announced => {
                    println!("running");
                    announced = true;
                }
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::select! {
        () = stop => {}
        () = watch => {}
    }
    let failed = streams.state() == State::Error;
    match (failed, streams.close(Duration::from_secs(60)).await) {
        (false, Ok(())) => ExitCode::SUCCESS,
        (_, Err(e)) => {
            eprintln!("count-app: {e}");
            ExitCode::FAILURE
        }
        (true, Ok(())) => ExitCode::FAILURE,
    }
}
