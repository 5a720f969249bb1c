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
    /// `statestore.cache.max.bytes`: the record caches of an instance's tasks together, a
    /// share of `statestore.memory.max.bytes`. Default 10 MiB.
    pub statestore_cache_max_bytes: usize,
    /// `statestore.memory.max.bytes` (eddy's own): the memory an instance's state may take,
    /// all its tasks together: the record caches (`statestore.cache.max.bytes`), the write
    /// buffers (`state.checkpoint.max.bytes`) and sled's page cache, which takes the rest
    /// (see [`StreamsConfig::state_memory`]). Default 256 MiB.
    pub statestore_memory_max_bytes: usize,
    /// `state.checkpoint.interval.ms` (eddy's own): how long committed writes may wait in a
    /// thread's write buffers before they are applied to sled, in one batch per store with
    /// the changelog offset they reach. A key updated many times in the interval reaches
    /// sled once; after a crash, restoration replays the changelog from the last
    /// checkpoint. While interactive queries come (they read sled), at most a second.
    /// Default 5 s.
    pub state_checkpoint_interval: Duration,
    /// `state.checkpoint.max.bytes` (eddy's own): the memory the write buffers of an
    /// instance's tasks may take together, split evenly among its stream threads, a share of
    /// `statestore.memory.max.bytes`. A thread's buffers are checkpointed once they hold half
    /// its share, and its commits wait for sled once they hold all of it. `None`, the
    /// default: a quarter of `statestore.memory.max.bytes` (64 MiB of the default 256 MiB).
    pub state_checkpoint_max_bytes: Option<usize>,
    /// `state.cleanup.delay.ms`: how long a task's state stays on disk once the task has
    /// moved away from this instance (or, found on disk at start, was not assigned here)
    /// before its trees are dropped. Default 10 min, as in Kafka.
    pub state_cleanup_delay: Duration,
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
            statestore_memory_max_bytes: 256 * 1024 * 1024,
            state_checkpoint_interval: Duration::from_secs(5),
            state_checkpoint_max_bytes: None,
            state_cleanup_delay: Duration::from_secs(600),
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
            "statestore.memory.max.bytes" => {
                self.statestore_memory_max_bytes = number(key, value)?;
            }
            "state.cleanup.delay.ms" => self.state_cleanup_delay = millis(key, value)?,
            "state.checkpoint.max.bytes" => {
                self.state_checkpoint_max_bytes = Some(number(key, value)?);
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

    /// How `statestore.memory.max.bytes` is shared: the record caches take what
    /// `statestore.cache.max.bytes` holds in memory (see [`StateMemory::CACHE_MEMORY_RATIO`]),
    /// the write buffers `state.checkpoint.max.bytes` (a quarter of the whole when not set),
    /// sled's database [`StateMemory::DATABASE_OVERHEAD`], and its page cache the rest.
    pub fn state_memory(&self) -> StateMemory {
        let whole = self.statestore_memory_max_bytes;
        let record_caches = self
            .statestore_cache_max_bytes
            .saturating_mul(StateMemory::CACHE_MEMORY_RATIO);
        let write_buffers = self.state_checkpoint_max_bytes.unwrap_or(whole / 4);
        StateMemory {
            record_caches,
            write_buffers,
            page_cache: whole.saturating_sub(
                record_caches
                    .saturating_add(write_buffers)
                    .saturating_add(StateMemory::DATABASE_OVERHEAD),
            ),
        }
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
        let memory = self.state_memory();
        if memory.page_cache < StateMemory::MIN_PAGE_CACHE {
            return Err(ConfigError::rejected(
                "statestore.memory.max.bytes",
                format!(
                    "{} bytes leave sled's page cache {} beside the record caches' {} \
                     ({} times statestore.cache.max.bytes), the write buffers' {} \
                     (state.checkpoint.max.bytes) and the database's own {}; it needs at \
                     least {}",
                    self.statestore_memory_max_bytes,
                    memory.page_cache,
                    memory.record_caches,
                    StateMemory::CACHE_MEMORY_RATIO,
                    memory.write_buffers,
                    StateMemory::DATABASE_OVERHEAD,
                    StateMemory::MIN_PAGE_CACHE
                ),
            ));
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

/// How an instance's state memory (`statestore.memory.max.bytes`) is shared, in bytes: see
/// [`StreamsConfig::state_memory`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StateMemory {
    /// What the record caches of every task take in memory: `statestore.cache.max.bytes`
    /// times [`StateMemory::CACHE_MEMORY_RATIO`].
    pub record_caches: usize,
    /// The write buffers of every task, split evenly among the stream threads.
    pub write_buffers: usize,
    /// The pages of the stores in memory, for the whole instance: what is left once the
    /// caches, the write buffers and [`StateMemory::DATABASE_OVERHEAD`] are taken. Three
    /// quarters of it is sled's page cache, a quarter the pages the stores hold beside their
    /// bounds (a read of a key whose page is held takes no walk of sled's tree).
    pub page_cache: usize,
}

impl StateMemory {
    /// What a record cache takes in memory for each byte `statestore.cache.max.bytes`
    /// counts. A cache counts an entry as Kafka Streams' does, its key and value and 64
    /// bytes, so that a setting keeps as many entries in eddy as in Kafka Streams; in memory
    /// an entry takes more (its key twice, its share of the map's nodes, its link in the order
    /// of use, and the copy a flush keeps to forward, 32 bytes beside its key and values):
    /// measured with heaptrack at the peak of a windowed count over 3M keys, 27 MiB for the
    /// default 10 MiB (2.7 times), 4 of them the flush's copies.
    pub const CACHE_MEMORY_RATIO: usize = 3;

    /// What sled's database takes beside its page cache, whatever its size: the tables of
    /// its pages, its cache's shards, the IO buffers of the checkpoint batch it is writing,
    /// and the pages' bounds eddy keeps beside it (measured at 10M keys: about 30 MiB).
    pub const DATABASE_OVERHEAD: usize = 32 << 20;

    /// The least page cache an instance's sled database is given: the pages a checkpoint
    /// reads and writes.
    pub const MIN_PAGE_CACHE: usize = 8 << 20;
}

mod clients;
mod properties;
mod setters;
#[cfg(test)]
mod tests;
