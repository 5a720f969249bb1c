//! Typed setters of [`StreamsConfig`], one per setting, each consuming and returning the
//! config so that they chain: `StreamsConfig::new("fraud").num_stream_threads(2)`. Each
//! says its property name and its default; [`StreamsConfig::set`] reads the same settings
//! from Kafka-style properties.

use std::path::PathBuf;
use std::time::Duration;

use super::{Bootstrap, ErrorHandling, ProcessingGuarantee, StreamsConfig};

impl StreamsConfig {
    /// `bootstrap.servers`: the cluster's brokers, `host:port` each. Default: none, which
    /// runs the application on an embedded broker.
    pub fn bootstrap_servers<S: Into<String>>(
        mut self,
        servers: impl IntoIterator<Item = S>,
    ) -> Self {
        let servers: Vec<String> = servers.into_iter().map(Into::into).collect();
        self.bootstrap = if servers.is_empty() {
            Bootstrap::Embedded
        } else {
            Bootstrap::Servers(servers)
        };
        self
    }

    /// `num.stream.threads`: the stream threads of this instance. Default 1.
    pub fn num_stream_threads(mut self, threads: usize) -> Self {
        self.num_stream_threads = threads;
        self
    }

    /// `processing.guarantee`. Default [`ProcessingGuarantee::AtLeastOnce`].
    pub fn processing_guarantee(mut self, guarantee: ProcessingGuarantee) -> Self {
        self.processing_guarantee = guarantee;
        self
    }

    /// `commit.interval.ms`. Default 100 ms under exactly-once, 30 s otherwise.
    pub fn commit_interval_ms(mut self, interval: Duration) -> Self {
        self.commit_interval_ms = Some(interval);
        self
    }

    /// `state.dir`: where tasks keep their stores. Default
    /// `<temporary directory>/kafka-streams`.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = dir.into();
        self
    }

    /// `num.standby.replicas`: warm copies of each task's state on other instances.
    /// Default 0.
    pub fn num_standby_replicas(mut self, replicas: usize) -> Self {
        self.num_standby_replicas = replicas;
        self
    }

    /// `statestore.cache.max.bytes`: the record caches of this instance's tasks together.
    /// Default 10 MiB.
    pub fn statestore_cache_max_bytes(mut self, bytes: usize) -> Self {
        self.statestore_cache_max_bytes = bytes;
        self
    }

    /// `state.checkpoint.interval.ms`: how long committed writes may wait in the write
    /// buffers before they are applied to sled. Default 5 s.
    pub fn state_checkpoint_interval(mut self, interval: Duration) -> Self {
        self.state_checkpoint_interval = interval;
        self
    }

    /// `state.checkpoint.max.bytes`: the memory the write buffers of the instance's tasks
    /// may take together. Default a quarter of `statestore.memory.max.bytes`.
    pub fn state_checkpoint_max_bytes(mut self, bytes: usize) -> Self {
        self.state_checkpoint_max_bytes = Some(bytes);
        self
    }

    /// `state.cleanup.delay.ms`: how long a task's state stays once the task moved away.
    /// Default 10 min.
    pub fn state_cleanup_delay(mut self, delay: Duration) -> Self {
        self.state_cleanup_delay = delay;
        self
    }

    /// `statestore.memory.max.bytes`: the memory the instance's state may take, record
    /// caches, write buffers and sled's page cache together. Default 256 MiB.
    pub fn statestore_memory_max_bytes(mut self, bytes: usize) -> Self {
        self.statestore_memory_max_bytes = bytes;
        self
    }

    /// `max.task.idle.ms`: how long a task waits for an empty, caught-up input; `None`
    /// (-1) never waits. Default `Some(0)`.
    pub fn max_task_idle(mut self, idle: Option<Duration>) -> Self {
        self.max_task_idle = idle;
        self
    }

    /// `acceptable.recovery.lag`: how far behind its changelog a copy of a task's state may
    /// be and still take the task at once. Default 10,000 records.
    pub fn acceptable_recovery_lag(mut self, records: u64) -> Self {
        self.acceptable_recovery_lag = records;
        self
    }

    /// `max.warmup.replicas`: how many tasks may warm up on a new home at once. Default 2.
    pub fn max_warmup_replicas(mut self, replicas: usize) -> Self {
        self.max_warmup_replicas = replicas;
        self
    }

    /// `probing.rebalance.interval.ms`: how often warmups are checked for a move.
    /// Default 10 min.
    pub fn probing_rebalance_interval(mut self, interval: Duration) -> Self {
        self.probing_rebalance_interval = interval;
        self
    }

    /// `application.server`: this instance's `host:port` for interactive queries.
    /// Default: none.
    pub fn application_server(mut self, server: impl Into<String>) -> Self {
        self.application_server = Some(server.into());
        self
    }

    /// `replication.factor` of internal topics. Default -1, the broker's.
    pub fn replication_factor(mut self, factor: i16) -> Self {
        self.replication_factor = factor;
        self
    }

    /// `deserialization.exception.handler`. Default [`ErrorHandling::Fail`].
    pub fn deserialization_handling(mut self, handling: ErrorHandling) -> Self {
        self.deserialization_handling = handling;
        self
    }

    /// `processing.exception.handler`. Default [`ErrorHandling::Fail`].
    pub fn processing_handling(mut self, handling: ErrorHandling) -> Self {
        self.processing_handling = handling;
        self
    }

    /// `production.exception.handler`. Default [`ErrorHandling::Fail`].
    pub fn production_handling(mut self, handling: ErrorHandling) -> Self {
        self.production_handling = handling;
        self
    }

    /// `errors.dead.letter.queue.topic.name`: where records the handlers skip go.
    /// Default: none.
    pub fn dead_letter_queue_topic(mut self, topic: impl Into<String>) -> Self {
        self.dead_letter_queue_topic = Some(topic.into());
        self
    }
}
