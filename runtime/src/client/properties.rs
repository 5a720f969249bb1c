//! The clients' settings as Kafka properties: the inverse of `from_properties`, so that a
//! configuration can be printed, kept in a file and read back — and so that the book's
//! configuration reference is checked against the defaults here and cannot drift.

use std::time::Duration;

use super::config::{Acks, ClientConfig, ConsumerConfig, IsolationLevel, OffsetReset};
use super::ProducerConfig;

/// A duration as Kafka's `*.ms` settings write it.
pub(crate) fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

impl ClientConfig {
    /// Every setting every client shares, as `(key, value)`, in the order of the fields.
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        vec![
            ("bootstrap.servers", self.bootstrap.join(",")),
            ("client.id", self.client_id.clone()),
            ("request.timeout.ms", ms(self.request_timeout)),
            (
                "socket.connection.setup.timeout.ms",
                ms(self.connect_timeout),
            ),
            ("metadata.max.age.ms", ms(self.metadata_max_age)),
            ("retry.backoff.ms", ms(self.retry_backoff)),
            ("reconnect.backoff.ms", ms(self.reconnect_backoff)),
            ("reconnect.backoff.max.ms", ms(self.reconnect_backoff_max)),
            (
                "receive.message.max.bytes",
                self.receive_message_max_bytes.to_string(),
            ),
        ]
    }
}

impl ProducerConfig {
    /// Every setting, as `(key, value)`: [`ProducerConfig::from_properties`] reads them back.
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        let acks = match self.acks {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        };
        let mut all = self.client.properties();
        all.extend([
            ("acks", acks.to_string()),
            ("linger.ms", ms(self.linger)),
            ("batch.size", self.batch_size.to_string()),
            ("buffer.memory", self.buffer_memory.to_string()),
            ("max.block.ms", ms(self.max_block)),
            ("max.request.size", self.max_request_size.to_string()),
            ("compression.type", self.compression.name().to_string()),
            ("enable.idempotence", self.idempotence.to_string()),
            (
                "max.in.flight.requests.per.connection",
                self.max_in_flight.to_string(),
            ),
            ("delivery.timeout.ms", ms(self.delivery_timeout)),
            (
                "transactional.id",
                self.transactional_id.clone().unwrap_or_default(),
            ),
            ("transaction.timeout.ms", ms(self.transaction_timeout)),
        ]);
        all
    }
}

impl ConsumerConfig {
    /// Every setting, as `(key, value)`: [`ConsumerConfig::from_properties`] reads them back.
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        let reset = match self.auto_offset_reset {
            OffsetReset::Earliest => "earliest",
            OffsetReset::Latest => "latest",
            OffsetReset::None => "none",
        };
        let isolation = match self.isolation_level {
            IsolationLevel::ReadUncommitted => "read_uncommitted",
            IsolationLevel::ReadCommitted => "read_committed",
        };
        let mut all = self.client.properties();
        all.extend([
            ("group.id", self.group_id.clone().unwrap_or_default()),
            (
                "group.instance.id",
                self.group_instance_id.clone().unwrap_or_default(),
            ),
            ("auto.offset.reset", reset.to_string()),
            ("isolation.level", isolation.to_string()),
            ("max.poll.records", self.max_poll_records.to_string()),
            ("fetch.min.bytes", self.fetch_min_bytes.to_string()),
            ("fetch.max.bytes", self.fetch_max_bytes.to_string()),
            ("fetch.max.wait.ms", ms(self.fetch_max_wait)),
            (
                "max.partition.fetch.bytes",
                self.max_partition_fetch_bytes.to_string(),
            ),
            ("session.timeout.ms", ms(self.session_timeout)),
            ("heartbeat.interval.ms", ms(self.heartbeat_interval)),
            ("max.poll.interval.ms", ms(self.max_poll_interval)),
            ("enable.auto.commit", self.enable_auto_commit.to_string()),
            ("auto.commit.interval.ms", ms(self.auto_commit_interval)),
        ]);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs<'a>(all: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
        all.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }

    #[test]
    fn what_the_producer_prints_it_reads_back() {
        let mut config = ProducerConfig::new("a:9092,b:9092")
            .linger(Duration::from_millis(7))
            .transactional_id("t-1");
        config.acks = Acks::Leader;
        let printed = config.properties();
        let read = ProducerConfig::from_properties(pairs(&printed)).unwrap();
        assert_eq!(read.properties(), printed);
        let defaults = ProducerConfig::new("").properties();
        assert_ne!(defaults, printed);
        let read = ProducerConfig::from_properties(pairs(&defaults)).unwrap();
        assert_eq!(read.properties(), defaults);
    }

    #[test]
    fn what_the_consumer_prints_it_reads_back() {
        let config = ConsumerConfig::new("a:9092")
            .group_id("g")
            .group_instance_id("g-1")
            .auto_offset_reset(OffsetReset::Earliest)
            .isolation_level(IsolationLevel::ReadCommitted)
            .max_poll_records(7);
        let printed = config.properties();
        let read = ConsumerConfig::from_properties(pairs(&printed)).unwrap();
        assert_eq!(read.properties(), printed);
        let defaults = ConsumerConfig::new("").properties();
        let read = ConsumerConfig::from_properties(pairs(&defaults)).unwrap();
        assert_eq!(read.properties(), defaults);
    }
}
