//! `eddy produce TOPIC` and `eddy consume TOPIC`: standard input to a topic and a topic to
//! standard output, a record per line (Kafka's console producer and consumer), on eddy's own
//! client.

use std::time::Duration;

use eddy_core::wire::compression::Compression;

use super::{shutdown_signal, BrokerAddress};
use crate::client::{compression, Acks, ConsumerConfig, IsolationLevel, ProducerConfig};
use crate::internals::tools::console::{self, ConsumeOptions};

#[derive(clap::Args)]
pub(super) struct ProduceArgs {
    #[command(flatten)]
    pub(super) broker: BrokerAddress,
    /// The topic.
    pub(super) topic: String,
    /// Every line is a value: no keys, even on lines with a tab.
    #[arg(long)]
    pub(super) no_keys: bool,
    /// acks: all, 1 or 0.
    #[arg(long, default_value = "all")]
    pub(super) acks: Acks,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none", value_parser = compression)]
    pub(super) compression: Compression,
    /// How long a batch waits for more records, in ms.
    #[arg(long, default_value_t = 5)]
    pub(super) linger_ms: u64,
    /// Send without idempotence (required with acks 0 or 1).
    #[arg(long)]
    pub(super) no_idempotence: bool,
}

#[derive(clap::Args)]
pub(super) struct ConsumeArgs {
    #[command(flatten)]
    pub(super) broker: BrokerAddress,
    /// The topic.
    pub(super) topic: String,
    /// Read as a member of this group, committing what was printed.
    #[arg(long)]
    pub(super) group: Option<String>,
    /// Start at the beginning of partitions without a committed offset (else at the end).
    #[arg(long)]
    pub(super) from_beginning: bool,
    /// Stop after this many records.
    #[arg(long)]
    pub(super) max_messages: Option<u64>,
    /// Stop when no record came for this many ms.
    #[arg(long)]
    pub(super) timeout_ms: Option<u64>,
    /// read_uncommitted or read_committed.
    #[arg(long, default_value = "read_uncommitted")]
    pub(super) isolation: IsolationLevel,
    /// Print each record's key before its value, tab-separated.
    #[arg(long)]
    pub(super) print_key: bool,
    /// Print each record's partition and offset first, tab-separated.
    #[arg(long)]
    pub(super) print_position: bool,
}

pub(super) async fn run_produce(args: ProduceArgs) -> std::io::Result<()> {
    let acks = args.acks;
    let config = ProducerConfig::new(&args.broker.bootstrap)
        .client_id("eddy-console-producer")
        .acks(acks)
        .idempotence(!args.no_idempotence && acks == Acks::All)
        .compression(args.compression)
        .linger(Duration::from_millis(args.linger_ms));
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let separator = (!args.no_keys).then_some('\t');
    let written = console::produce(config, &args.topic, separator, stdin)
        .await
        .map_err(std::io::Error::other)?;
    tracing::debug!(records = written, topic = %args.topic, "produced");
    Ok(())
}

pub(super) async fn run_consume(args: ConsumeArgs) -> std::io::Result<()> {
    let options = ConsumeOptions {
        topic: args.topic,
        group: args.group,
        from_beginning: args.from_beginning,
        max_messages: args.max_messages,
        idle_timeout: args.timeout_ms.map(Duration::from_millis),
        isolation: args.isolation,
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
