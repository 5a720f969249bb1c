//! The `eddy` command-line tool: its arguments (clap), one module per subcommand, and the
//! process around them (logging, the runtime, signals). It is what the `eddy` binary runs;
//! nothing in it is an API of the library.
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

mod bench;
mod broker;
mod console;
mod groups;
mod topics;
mod transactions;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use self::bench::BenchCommand;
use self::broker::BrokerArgs;
use self::console::{ConsumeArgs, ProduceArgs};
use self::groups::GroupsCommand;
use self::topics::TopicsCommand;
use self::transactions::TransactionsCommand;

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

/// Which broker a command talks to.
#[derive(clap::Args)]
struct BrokerAddress {
    /// The broker, as host:port.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
}

/// Runs the `eddy` command with the process's arguments.
pub fn main() -> ExitCode {
    log_to_stderr("EDDY_LOG");
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
            Command::Broker(args) => broker::run(args).await,
            Command::Bench(command) => bench::run(command).await,
            Command::Groups(command) => groups::run(command).await,
            Command::Transactions(command) => transactions::run(command).await,
            Command::Topics(command) => topics::run(command).await,
            Command::Produce(args) => console::run_produce(args).await,
            Command::Consume(args) => console::run_consume(args).await,
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

/// Logs to standard error at the levels the environment variable `filter_var` names
/// (`info` when it is unset), in colour only for a person at a terminal, so that logs written
/// to files and pipes carry no escape codes: how the `eddy` command, the examples and eddy's
/// test applications log.
pub fn log_to_stderr(filter_var: &str) {
    use tracing_subscriber::EnvFilter;
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env(filter_var).unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// An admin client for the broker at `bootstrap`.
async fn connect(bootstrap: &str) -> std::io::Result<crate::client::Admin> {
    crate::client::Admin::connect(bootstrap)
        .await
        .map_err(std::io::Error::other)
}

/// Returns at SIGINT or SIGTERM.
async fn shutdown_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = term.recv() => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{Cli, Command};
    use crate::app::ProcessingGuarantee;
    use crate::client::{Acks, IsolationLevel};
    use crate::internals::bench::streams::StreamsWorkload;

    #[test]
    fn the_arguments_parse_into_the_configs_types_by_kafkas_names() {
        Cli::command().debug_assert();
        let parse = |args: &[&str]| Cli::try_parse_from([&["eddy"], args].concat());
        let Command::Bench(super::bench::BenchCommand::Streams(streams)) = parse(&[
            "bench",
            "streams",
            "--workload",
            "count",
            "--guarantee",
            "at_least_once",
        ])
        .unwrap()
        .command
        else {
            panic!("not bench streams");
        };
        assert_eq!(streams.workload, StreamsWorkload::CountByKey);
        assert_eq!(streams.guarantee, Some(ProcessingGuarantee::AtLeastOnce));
        let Command::Produce(produce) = parse(&["produce", "t", "--acks", "1"]).unwrap().command
        else {
            panic!("not produce");
        };
        assert_eq!(produce.acks, Acks::Leader);
        let Command::Consume(consume) = parse(&["consume", "t"]).unwrap().command else {
            panic!("not consume");
        };
        assert_eq!(consume.isolation, IsolationLevel::ReadUncommitted);
        for bad in [
            &["produce", "t", "--acks", "2"][..],
            &["produce", "t", "--compression", "brotli"],
            &["consume", "t", "--isolation", "read_some"],
            &["bench", "streams", "--workload", "joins"],
            &["bench", "streams", "--guarantee", "exactly_once"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
