//! A streams application's settings as Kafka properties: the inverse of
//! [`StreamsConfig::set`], so that a configuration can be printed and read back, and the
//! book's configuration reference is checked against the defaults here.

use super::{Bootstrap, ErrorHandling, ProcessingGuarantee, StreamsConfig};
use crate::client::properties::ms;
use eddy_core::streams::internals::EmitIntervals;

fn handler(h: ErrorHandling) -> String {
    match h {
        ErrorHandling::Fail => "fail",
        ErrorHandling::Continue => "continue",
    }
    .to_string()
}

impl StreamsConfig {
    /// Every setting as `(key, value)`, the client properties as given last:
    /// [`StreamsConfig::from_properties`] reads them back. `commit.interval.ms` is the
    /// interval that applies.
    pub fn properties(&self) -> Vec<(String, String)> {
        let guarantee = match self.processing_guarantee {
            ProcessingGuarantee::AtLeastOnce => "at_least_once",
            ProcessingGuarantee::ExactlyOnceV2 => "exactly_once_v2",
        };
        let bootstrap = match &self.bootstrap {
            Bootstrap::Embedded => String::new(),
            Bootstrap::Servers(servers) => servers.join(","),
        };
        let own = [
            ("application.id", self.application_id.clone()),
            ("bootstrap.servers", bootstrap),
            ("num.stream.threads", self.num_stream_threads.to_string()),
            ("processing.guarantee", guarantee.to_string()),
            ("commit.interval.ms", ms(self.commit_interval())),
            ("state.dir", self.state_dir.display().to_string()),
            (
                "num.standby.replicas",
                self.num_standby_replicas.to_string(),
            ),
            (
                "statestore.cache.max.bytes",
                self.statestore_cache_max_bytes.to_string(),
            ),
            (
                "state.checkpoint.interval.ms",
                ms(self.state_checkpoint_interval),
            ),
            ("state.cleanup.delay.ms", ms(self.state_cleanup_delay)),
            (
                "statestore.memory.max.bytes",
                self.statestore_memory_max_bytes.to_string(),
            ),
            (
                "state.checkpoint.max.bytes",
                self.state_memory().write_buffers.to_string(),
            ),
            (
                "max.task.idle.ms",
                self.max_task_idle.map_or_else(|| "-1".to_string(), ms),
            ),
            (
                EmitIntervals::WINDOWED_AGGREGATION_KEY,
                self.emit_intervals.windowed_aggregation_ms.to_string(),
            ),
            (
                EmitIntervals::OUTER_JOIN_KEY,
                self.emit_intervals.outer_join_ms.to_string(),
            ),
            (
                "acceptable.recovery.lag",
                self.acceptable_recovery_lag.to_string(),
            ),
            ("max.warmup.replicas", self.max_warmup_replicas.to_string()),
            (
                "probing.rebalance.interval.ms",
                ms(self.probing_rebalance_interval),
            ),
            (
                "application.server",
                self.application_server.clone().unwrap_or_default(),
            ),
            ("replication.factor", self.replication_factor.to_string()),
            (
                "deserialization.exception.handler",
                handler(self.deserialization_handling),
            ),
            (
                "processing.exception.handler",
                handler(self.processing_handling),
            ),
            (
                "production.exception.handler",
                handler(self.production_handling),
            ),
            (
                "errors.dead.letter.queue.topic.name",
                self.dead_letter_queue_topic.clone().unwrap_or_default(),
            ),
        ];
        own.into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .chain(self.client_properties.iter().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn read_back(config: &StreamsConfig) -> StreamsConfig {
        let printed = config.properties();
        StreamsConfig::from_properties(printed.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .unwrap()
    }

    #[test]
    fn what_an_application_prints_it_reads_back() {
        let defaults = StreamsConfig::new("fraud");
        assert_eq!(read_back(&defaults).properties(), defaults.properties());
        let mut changed = StreamsConfig::new("fraud");
        changed.bootstrap = Bootstrap::Servers(vec!["a:9092".into(), "b:9092".into()]);
        changed.processing_guarantee = ProcessingGuarantee::ExactlyOnceV2;
        changed.max_task_idle = None;
        changed.emit_intervals.outer_join_ms = 0;
        changed.application_server = Some("node-1:8080".into());
        changed.production_handling = ErrorHandling::Continue;
        changed.state_checkpoint_interval = Duration::from_millis(250);
        changed
            .client_properties
            .push(("producer.linger.ms".into(), "20".into()));
        let printed = changed.properties();
        assert_ne!(printed, defaults.properties());
        assert_eq!(read_back(&changed).properties(), printed);
    }
}
