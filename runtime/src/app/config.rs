//! [`StreamsConfig`]: the settings of a streams application, with Kafka Streams' names and
//! defaults, typed, and readable from Kafka-style properties (`application.id`,
//! `processing.guarantee`, …) for users who keep them in files. Client settings pass through
//! with Kafka Streams' prefixes (`producer.`, `consumer.`, `admin.`; unprefixed client keys
//! reach every client), see `clients`.

use std::path::PathBuf;
use std::time::Duration;

use eddy_core::streams::internals::EmitIntervals;

use crate::client::config::{bad, millis, number, split_list};
pub use crate::client::ConfigError;

/// Where the application's broker is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bootstrap {
    /// A broker started in the process, on a loopback port: nothing to install.
    Embedded,
    /// `bootstrap.servers`: an Apache Kafka, Redpanda or eddy cluster (`host:port` each).
    Servers(Vec<String>),
}

/// `processing.guarantee`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessingGuarantee {
    /// `at_least_once`: input offsets are committed after the outputs are acknowledged; a
    /// crash may process a record again.
    AtLeastOnce,
    /// `exactly_once_v2`: outputs, changelog records and input offsets commit in one
    /// transaction per stream thread.
    ExactlyOnceV2,
}

impl std::str::FromStr for ProcessingGuarantee {
    type Err = ConfigError;

    /// `processing.guarantee` by Kafka Streams' values: `at_least_once` or `exactly_once_v2`.
    fn from_str(value: &str) -> Result<Self, ConfigError> {
        match value.trim() {
            "at_least_once" => Ok(Self::AtLeastOnce),
            "exactly_once_v2" => Ok(Self::ExactlyOnceV2),
            _ => Err(bad("processing.guarantee", value)),
        }
    }
}

/// What happens to a record that fails: to deserialize (`deserialization.exception.handler`),
/// to be processed (`processing.exception.handler`) or to be produced
/// (`production.exception.handler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorHandling {
    /// The task stops with the error (Kafka's `LogAndFail…` handlers; the default).
    Fail,
    /// The record is logged, counted as dropped and skipped (`LogAndContinue…`); with
    /// `errors.dead.letter.queue.topic.name` set, it also goes to that topic.
    Continue,
}

impl ErrorHandling {
    /// A handler by its Kafka class name (full or simple) or eddy's short name.
    fn parse(key: &str, value: &str) -> Result<Self, ConfigError> {
        let simple = value.rsplit('.').next().unwrap_or(value);
        Ok(match simple {
            "fail"
            | "LogAndFailExceptionHandler"
            | "LogAndFailProcessingExceptionHandler"
            | "DefaultProductionExceptionHandler" => Self::Fail,
            "continue"
            | "LogAndContinueExceptionHandler"
            | "LogAndContinueProcessingExceptionHandler" => Self::Continue,
            _ => return Err(bad(key, value)),
        })
    }
}

/// The settings of a streams application: Kafka Streams' defaults from
/// [`StreamsConfig::new`], changed by the typed setters of each setting
/// (`StreamsConfig::new("fraud").num_stream_threads(2)`), by assigning its public fields, or
/// read from Kafka-style properties ([`StreamsConfig::from_properties`]). It may gain
/// settings in any release, so it is built only by those means.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StreamsConfig {
    /// `application.id`: the consumer group's id and the prefix of internal topics.
    pub application_id: String,
    /// `bootstrap.servers`, or the embedded broker when none is given.
    pub bootstrap: Bootstrap,
    /// `num.stream.threads`. Default 1.
    pub num_stream_threads: usize,
    /// `processing.guarantee`. Default at-least-once.
    pub processing_guarantee: ProcessingGuarantee,
    /// `commit.interval.ms` when set; see [`StreamsConfig::commit_interval`].
    pub commit_interval_ms: Option<Duration>,
    /// `state.dir`: where tasks keep their stores, under `<state.dir>/<application.id>/`.
    /// Default `<temporary directory>/kafka-streams`, as Kafka Streams'.
    pub state_dir: PathBuf,
    /// `num.standby.replicas`: warm copies of each task's state on other instances.
    /// Default 0.
    pub num_standby_replicas: usize,
    /// `statestore.cache.max.bytes`: the record caches of an instance's tasks together.
    /// Default 10 MiB.
    pub statestore_cache_max_bytes: usize,
    /// `state.checkpoint.interval.ms` (eddy's own): how long committed writes may wait in a
    /// thread's write buffers before they are applied to sled, in one batch per store with
    /// the changelog offset they reach. A key updated many times in the interval reaches
    /// sled once; after a crash, restoration replays the changelog from the last
    /// checkpoint. While interactive queries come (they read sled), at most a second.
    /// Default 5 s.
    pub state_checkpoint_interval: Duration,
    /// `state.checkpoint.max.bytes` (eddy's own): the write buffers of a thread's tasks
    /// together are checkpointed early once they hold this much. Default 64 MiB.
    pub state_checkpoint_max_bytes: usize,
    /// `max.task.idle.ms`: how long a task reading several partitions waits for data on an
    /// empty one that is caught up before it processes the others' records without it;
    /// `None` (-1) never waits. An empty partition with records still on the broker (or whose
    /// end is not yet known) is always waited for, unless this is `None`, so that records
    /// are processed in timestamp order across the task's inputs. Default 0, as in Kafka.
    pub max_task_idle: Option<Duration>,
    /// How often a task looks for what is due to be emitted by wall-clock time: the final
    /// results of windowed aggregations emitted on window close
    /// (`__emit.interval.ms.kstreams.windowed.aggregation__`) and records of left and outer
    /// stream joins left without a partner
    /// (`__emit.interval.ms.kstreams.outer.join.spurious.results.fix__`), Kafka Streams'
    /// internal settings. Default 1 s each, as in Kafka.
    pub emit_intervals: EmitIntervals,
    /// `acceptable.recovery.lag`: how far behind its changelog a copy of a task's state may
    /// be and still take the task at once. Default 10,000 records.
    pub acceptable_recovery_lag: u64,
    /// `max.warmup.replicas`: how many tasks may warm up on a new home at once. Default 2.
    pub max_warmup_replicas: usize,
    /// `probing.rebalance.interval.ms`: how often warmups are checked for a move. Default
    /// 10 min.
    pub probing_rebalance_interval: Duration,
    /// `application.server`: this instance's `host:port` for interactive queries.
    pub application_server: Option<String>,
    /// `replication.factor` of internal topics; -1, the default, takes the broker's.
    pub replication_factor: i16,
    /// `deserialization.exception.handler`. Default fail.
    pub deserialization_handling: ErrorHandling,
    /// `processing.exception.handler`. Default fail.
    pub processing_handling: ErrorHandling,
    /// `production.exception.handler`. Default fail.
    pub production_handling: ErrorHandling,
    /// `errors.dead.letter.queue.topic.name` (KIP-1034): where records the handlers skip
    /// go, with the error and their origin in headers.
    pub dead_letter_queue_topic: Option<String>,
    /// Client properties, as given: unprefixed (every client), `producer.`, `consumer.`,
    /// `main.consumer.`, `restore.consumer.`, `global.consumer.` and `admin.` ones, each
    /// checked against the settings of the clients it reaches when it is set. Set them with
    /// [`StreamsConfig::set`] or typed, with [`StreamsConfig::producer`] and its siblings;
    /// read what each client gets with [`StreamsConfig::producer_config`] and its siblings.
    pub(crate) client_properties: Vec<(String, String)>,
}

impl StreamsConfig {
    /// Kafka Streams' defaults for the application `application_id`, on the embedded broker.
    pub fn new(application_id: impl Into<String>) -> Self {
        Self {
            application_id: application_id.into(),
            bootstrap: Bootstrap::Embedded,
            num_stream_threads: 1,
            processing_guarantee: ProcessingGuarantee::AtLeastOnce,
            commit_interval_ms: None,
            state_dir: std::env::temp_dir().join("kafka-streams"),
            num_standby_replicas: 0,
            statestore_cache_max_bytes: 10 * 1024 * 1024,
            state_checkpoint_interval: Duration::from_secs(5),
            state_checkpoint_max_bytes: 64 * 1024 * 1024,
            max_task_idle: Some(Duration::ZERO),
            emit_intervals: EmitIntervals::default(),
            acceptable_recovery_lag: 10_000,
            max_warmup_replicas: 2,
            probing_rebalance_interval: Duration::from_secs(600),
            application_server: None,
            replication_factor: -1,
            deserialization_handling: ErrorHandling::Fail,
            processing_handling: ErrorHandling::Fail,
            production_handling: ErrorHandling::Fail,
            dead_letter_queue_topic: None,
            client_properties: Vec::new(),
        }
    }

    /// Reads Kafka-style properties; unknown keys and values that cannot be used are errors.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ConfigError> {
        let mut config = Self::new("");
        for (key, value) in properties {
            config.set(key, value)?;
        }
        config.validate()?;
        Ok(config)
    }

    /// Sets one Kafka-style property (as [`Self::from_properties`] reads them); an unknown
    /// key or a value that cannot be used is an error.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        match key {
            "application.id" => self.application_id = value.trim().to_string(),
            "bootstrap.servers" => {
                let servers = split_list(value);
                self.bootstrap = if servers.is_empty() {
                    Bootstrap::Embedded
                } else {
                    Bootstrap::Servers(servers)
                };
            }
            "num.stream.threads" => self.num_stream_threads = number(key, value)?,
            "processing.guarantee" => self.processing_guarantee = value.parse()?,
            "commit.interval.ms" => self.commit_interval_ms = Some(millis(key, value)?),
            "state.dir" => self.state_dir = PathBuf::from(value.trim()),
            "num.standby.replicas" => self.num_standby_replicas = number(key, value)?,
            "statestore.cache.max.bytes" => {
                self.statestore_cache_max_bytes = number(key, value)?;
            }
            "state.checkpoint.interval.ms" => {
                self.state_checkpoint_interval = millis(key, value)?;
            }
            "state.checkpoint.max.bytes" => {
                self.state_checkpoint_max_bytes = number(key, value)?;
            }
            "max.task.idle.ms" => {
                self.max_task_idle = match value.trim() {
                    "-1" => None,
                    _ => Some(millis(key, value)?),
                };
            }
            EmitIntervals::WINDOWED_AGGREGATION_KEY => {
                self.emit_intervals.windowed_aggregation_ms = number(key, value)?;
            }
            EmitIntervals::OUTER_JOIN_KEY => {
                self.emit_intervals.outer_join_ms = number(key, value)?;
            }
            "acceptable.recovery.lag" => self.acceptable_recovery_lag = number(key, value)?,
            "max.warmup.replicas" => self.max_warmup_replicas = number(key, value)?,
            "probing.rebalance.interval.ms" => {
                self.probing_rebalance_interval = millis(key, value)?;
            }
            "application.server" => {
                let server = value.trim();
                self.application_server = (!server.is_empty()).then(|| server.to_string());
            }
            "replication.factor" => self.replication_factor = number(key, value)?,
            "deserialization.exception.handler" | "default.deserialization.exception.handler" => {
                self.deserialization_handling = ErrorHandling::parse(key, value)?;
            }
            "processing.exception.handler" => {
                self.processing_handling = ErrorHandling::parse(key, value)?;
            }
            "production.exception.handler" | "default.production.exception.handler" => {
                self.production_handling = ErrorHandling::parse(key, value)?;
            }
            "errors.dead.letter.queue.topic.name" => {
                let topic = value.trim();
                self.dead_letter_queue_topic = (!topic.is_empty()).then(|| topic.to_string());
            }
            _ => self.set_client_property(key, value)?,
        }
        Ok(())
    }

    /// `commit.interval.ms` as it applies: the value set, or Kafka Streams' default of
    /// 100 ms under exactly-once and 30 s otherwise.
    pub fn commit_interval(&self) -> Duration {
        self.commit_interval_ms
            .unwrap_or(match self.processing_guarantee {
                ProcessingGuarantee::ExactlyOnceV2 => Duration::from_millis(100),
                ProcessingGuarantee::AtLeastOnce => Duration::from_secs(30),
            })
    }

    /// Where this application's tasks keep their state: `<state.dir>/<application.id>`.
    pub fn application_state_dir(&self) -> PathBuf {
        self.state_dir.join(&self.application_id)
    }

    /// Checks what cannot be used together or at all.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let id = &self.application_id;
        if id.is_empty() {
            return Err(ConfigError::rejected("application.id", "is required"));
        }
        // It prefixes topic names, so it takes a topic name's characters.
        if id.len() > 200
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            return Err(ConfigError::rejected(
                "application.id",
                format!(
                    "{id:?} may hold only ASCII letters, digits, '.', '_' and '-', at most 200 \
                     of them"
                ),
            ));
        }
        if self.num_stream_threads == 0 {
            return Err(ConfigError::rejected(
                "num.stream.threads",
                "must be at least 1",
            ));
        }
        if let Some(server) = &self.application_server {
            let port = server
                .rsplit_once(':')
                .map(|(host, port)| (host, port.parse::<u16>()));
            if !matches!(port, Some((host, Ok(_))) if !host.is_empty()) {
                return Err(ConfigError::rejected(
                    "application.server",
                    format!("{server:?} is not host:port"),
                ));
            }
        }
        if self.replication_factor == 0 || self.replication_factor < -1 {
            return Err(ConfigError::rejected(
                "replication.factor",
                "must be -1 (the broker's) or at least 1",
            ));
        }
        Ok(())
    }
}

mod clients;
mod properties;
mod setters;
#[cfg(test)]
mod tests;
