//! Typed settings of the client, with Kafka's defaults and names: [`ClientConfig`] for what
//! every client shares (bootstrap servers, timeouts, backoff), [`ProducerConfig`] and
//! [`ConsumerConfig`] on top of it. Each can also be read from Kafka-style properties
//! (`bootstrap.servers`, `linger.ms`, …) for users who keep them in files.

use std::time::Duration;

use eddy_core::wire::compression::Compression;

use super::ConfigError;

/// Settings every client shares.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientConfig {
    /// `bootstrap.servers`: brokers to ask for the cluster's metadata first (`host:port`).
    pub bootstrap: Vec<String>,
    /// `client.id`, shown by the broker's tools. Default `eddy`.
    pub client_id: String,
    /// `request.timeout.ms`: how long to wait for a response before closing the connection
    /// and trying again. Default 30 s.
    pub request_timeout: Duration,
    /// `socket.connection.setup.timeout.ms`: how long a TCP connection may take. Default 10 s.
    pub connect_timeout: Duration,
    /// `metadata.max.age.ms`: metadata older than this is fetched again even without an
    /// error. Default 5 min.
    pub metadata_max_age: Duration,
    /// `retry.backoff.ms`: the wait before a failed request is tried again. Default 100 ms.
    pub retry_backoff: Duration,
    /// `reconnect.backoff.ms`: the first wait before connecting again to a broker that could
    /// not be reached; it doubles on each failure. Default 50 ms.
    pub reconnect_backoff: Duration,
    /// `reconnect.backoff.max.ms`: the longest wait between connection attempts. Default 1 s.
    pub reconnect_backoff_max: Duration,
    /// `receive.message.max.bytes` (librdkafka's name; the Java client has no limit): the
    /// largest response taken; a larger one closes its connection before it is read. A
    /// consumer raises it to `fetch.max.bytes` + 512 if it is lower. Default 100,000,000.
    pub receive_message_max_bytes: usize,
}

impl ClientConfig {
    /// Kafka's defaults with these bootstrap servers (a comma-separated `host:port` list).
    pub fn new(bootstrap: &str) -> Self {
        Self {
            bootstrap: split_list(bootstrap),
            client_id: "eddy".to_string(),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            metadata_max_age: Duration::from_secs(300),
            retry_backoff: Duration::from_millis(100),
            reconnect_backoff: Duration::from_millis(50),
            reconnect_backoff_max: Duration::from_secs(1),
            receive_message_max_bytes: super::connection::DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Sets `client.id`.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client_id = id.into();
        self
    }

    /// Sets `request.timeout.ms`.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets `retry.backoff.ms`.
    pub fn retry_backoff(mut self, backoff: Duration) -> Self {
        self.retry_backoff = backoff;
        self
    }

    /// Sets `metadata.max.age.ms`.
    pub fn metadata_max_age(mut self, age: Duration) -> Self {
        self.metadata_max_age = age;
        self
    }

    /// Reads Kafka-style properties of what every client shares; unknown keys are an error.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ConfigError> {
        let mut config = Self::new("");
        for (key, value) in properties {
            if !config.set(key, value)? {
                return Err(ConfigError::Unknown(key.to_string()));
            }
        }
        Ok(config)
    }

    /// Applies one Kafka-style property this struct knows; returns whether it knew it.
    fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        match key {
            "bootstrap.servers" => self.bootstrap = split_list(value),
            "client.id" => self.client_id = value.to_string(),
            "request.timeout.ms" => self.request_timeout = millis(key, value)?,
            "socket.connection.setup.timeout.ms" => self.connect_timeout = millis(key, value)?,
            "metadata.max.age.ms" => self.metadata_max_age = millis(key, value)?,
            "retry.backoff.ms" => self.retry_backoff = millis(key, value)?,
            "reconnect.backoff.ms" => self.reconnect_backoff = millis(key, value)?,
            "reconnect.backoff.max.ms" => self.reconnect_backoff_max = millis(key, value)?,
            "receive.message.max.bytes" => {
                self.receive_message_max_bytes = number(key, value)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.bootstrap.is_empty() {
            return Err(ConfigError::rejected("bootstrap.servers", "is empty"));
        }
        Ok(())
    }
}

/// How many acknowledgements a produce waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: none; the producer learns of no offset and no error.
    None,
    /// `acks=1`: the leader's.
    Leader,
    /// `acks=all` (-1): every in-sync replica's. Required by idempotence.
    All,
}

impl Acks {
    pub(crate) fn code(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// Settings of a [`super::Producer`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProducerConfig {
    /// What every client shares.
    pub client: ClientConfig,
    /// `acks`. Default [`Acks::All`].
    pub acks: Acks,
    /// `linger.ms`: how long a batch waits for more records before it is sent. Default 5 ms
    /// (Kafka 4's default).
    pub linger: Duration,
    /// `batch.size`: bytes of records (before compression) after which a batch is sent
    /// without waiting. Default 16 KiB.
    pub batch_size: usize,
    /// `buffer.memory`: bytes of records waiting to be sent or acknowledged; `send` waits
    /// when they are all in use. Default 32 MiB.
    pub buffer_memory: usize,
    /// `max.block.ms`: how long `send` waits for buffer space or for the topic's metadata.
    /// Default 60 s.
    pub max_block: Duration,
    /// `max.request.size`: the largest record, and the most bytes of batches in one produce
    /// request. Default 1 MiB.
    pub max_request_size: usize,
    /// `compression.type`. Default none.
    pub compression: Compression,
    /// `enable.idempotence`: no duplicates and no reordering across retries. Default on;
    /// requires `acks=all`.
    pub idempotence: bool,
    /// `max.in.flight.requests.per.connection`, which idempotence bounds to 5. Default 5.
    pub max_in_flight: usize,
    /// `delivery.timeout.ms`: how long a record may take from `send` to its acknowledgement,
    /// retries included, before it fails. Default 120 s.
    pub delivery_timeout: Duration,
    /// `transactional.id`: makes the producer transactional. Default none.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms`: how long the broker lets a transaction stay open. Default
    /// 60 s.
    pub transaction_timeout: Duration,
}

impl ProducerConfig {
    /// Kafka's producer defaults with these bootstrap servers.
    pub fn new(bootstrap: &str) -> Self {
        Self {
            client: ClientConfig::new(bootstrap).client_id("eddy-producer"),
            acks: Acks::All,
            linger: Duration::from_millis(5),
            batch_size: 16 * 1024,
            buffer_memory: 32 << 20,
            max_block: Duration::from_secs(60),
            max_request_size: 1 << 20,
            compression: Compression::None,
            idempotence: true,
            max_in_flight: 5,
            delivery_timeout: Duration::from_secs(120),
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
        }
    }

    /// Reads Kafka-style producer properties; unknown keys are an error.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ConfigError> {
        let mut config = Self::new("");
        for (key, value) in properties {
            if config.client.set(key, value)? {
                continue;
            }
            match key {
                "acks" => config.acks = value.parse()?,
                "linger.ms" => config.linger = millis(key, value)?,
                "batch.size" => config.batch_size = number(key, value)?,
                "buffer.memory" => config.buffer_memory = number(key, value)?,
                "max.block.ms" => config.max_block = millis(key, value)?,
                "max.request.size" => config.max_request_size = number(key, value)?,
                "compression.type" => config.compression = compression(value)?,
                "enable.idempotence" => config.idempotence = boolean(key, value)?,
                "max.in.flight.requests.per.connection" => {
                    config.max_in_flight = number(key, value)?
                }
                "delivery.timeout.ms" => config.delivery_timeout = millis(key, value)?,
                "transactional.id" => config.transactional_id = optional(value),
                "transaction.timeout.ms" => config.transaction_timeout = millis(key, value)?,
                _ => return Err(ConfigError::Unknown(key.to_string())),
            }
        }
        Ok(config)
    }

    /// Sets `acks`.
    pub fn acks(mut self, acks: Acks) -> Self {
        self.acks = acks;
        self
    }

    /// Sets `linger.ms`.
    pub fn linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// Sets `batch.size`.
    pub fn batch_size(mut self, bytes: usize) -> Self {
        self.batch_size = bytes;
        self
    }

    /// Sets `buffer.memory`.
    pub fn buffer_memory(mut self, bytes: usize) -> Self {
        self.buffer_memory = bytes;
        self
    }

    /// Sets `compression.type`.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Sets `enable.idempotence`.
    pub fn idempotence(mut self, on: bool) -> Self {
        self.idempotence = on;
        self
    }

    /// Sets `delivery.timeout.ms`.
    pub fn delivery_timeout(mut self, timeout: Duration) -> Self {
        self.delivery_timeout = timeout;
        self
    }

    /// Sets `transactional.id` (which turns idempotence on).
    pub fn transactional_id(mut self, id: impl Into<String>) -> Self {
        self.transactional_id = Some(id.into());
        self.idempotence = true;
        self
    }

    /// Sets `transaction.timeout.ms`.
    pub fn transaction_timeout(mut self, timeout: Duration) -> Self {
        self.transaction_timeout = timeout;
        self
    }

    /// Sets `client.id`.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client.client_id = id.into();
        self
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        self.client.validate()?;
        if self.idempotence && self.acks != Acks::All {
            return Err(ConfigError::rejected(
                "enable.idempotence",
                "requires acks=all",
            ));
        }
        if self.idempotence && !(1..=5).contains(&self.max_in_flight) {
            return Err(ConfigError::rejected(
                "enable.idempotence",
                "requires max.in.flight.requests.per.connection between 1 and 5",
            ));
        }
        if self.transactional_id.is_some() && !self.idempotence {
            return Err(ConfigError::rejected(
                "transactional.id",
                "requires enable.idempotence",
            ));
        }
        if self.buffer_memory < self.max_request_size || self.batch_size == 0 {
            return Err(ConfigError::rejected(
                "buffer.memory",
                "must hold at least max.request.size, and batch.size be positive",
            ));
        }
        Ok(())
    }
}

/// Where a consumer starts in a partition with no committed offset, or whose offset is no
/// longer in the log (`auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    /// The first offset the partition holds.
    Earliest,
    /// The end of the partition: only records written from now on.
    Latest,
    /// No reset: the consumer fails instead.
    None,
}

/// Which records a consumer reads (`isolation.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationLevel {
    /// Every record, those of open and aborted transactions included.
    ReadUncommitted,
    /// Records of committed transactions and non-transactional records only, up to the last
    /// stable offset.
    ReadCommitted,
}

/// Settings of a [`super::Consumer`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConsumerConfig {
    /// What every client shares.
    pub client: ClientConfig,
    /// `group.id`: needed by `subscribe` and by commits. Default none.
    pub group_id: Option<String>,
    /// `group.instance.id`: makes the member static (KIP-345). Default none.
    pub group_instance_id: Option<String>,
    /// `auto.offset.reset`. Default [`OffsetReset::Latest`].
    pub auto_offset_reset: OffsetReset,
    /// `isolation.level`. Default [`IsolationLevel::ReadUncommitted`].
    pub isolation_level: IsolationLevel,
    /// `max.poll.records`: the most records one poll returns. Default 500.
    pub max_poll_records: usize,
    /// `fetch.min.bytes`. Default 1.
    pub fetch_min_bytes: i32,
    /// `fetch.max.bytes`. Default 50 MiB.
    pub fetch_max_bytes: i32,
    /// `fetch.max.wait.ms`. Default 500 ms.
    pub fetch_max_wait: Duration,
    /// `max.partition.fetch.bytes`. Default 1 MiB.
    pub max_partition_fetch_bytes: i32,
    /// `session.timeout.ms`: how long the coordinator waits for a heartbeat before it
    /// removes the member. Default 45 s.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`. Default 3 s.
    pub heartbeat_interval: Duration,
    /// `max.poll.interval.ms`: the longest time between polls before the member leaves the
    /// group so that its partitions go elsewhere. Default 5 min; also the rebalance timeout.
    pub max_poll_interval: Duration,
    /// `enable.auto.commit`: commit the positions of the last poll in the background every
    /// `auto_commit_interval`. Default off (eddy commits explicitly; Kafka's default is on).
    pub enable_auto_commit: bool,
    /// `auto.commit.interval.ms`. Default 5 s.
    pub auto_commit_interval: Duration,
}

impl ConsumerConfig {
    /// Kafka's consumer defaults with these bootstrap servers.
    pub fn new(bootstrap: &str) -> Self {
        Self {
            client: ClientConfig::new(bootstrap).client_id("eddy-consumer"),
            group_id: None,
            group_instance_id: None,
            auto_offset_reset: OffsetReset::Latest,
            isolation_level: IsolationLevel::ReadUncommitted,
            max_poll_records: 500,
            fetch_min_bytes: 1,
            fetch_max_bytes: 50 << 20,
            fetch_max_wait: Duration::from_millis(500),
            max_partition_fetch_bytes: 1 << 20,
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(3),
            max_poll_interval: Duration::from_secs(300),
            enable_auto_commit: false,
            auto_commit_interval: Duration::from_secs(5),
        }
    }

    /// Reads Kafka-style consumer properties; unknown keys are an error.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ConfigError> {
        let mut config = Self::new("");
        for (key, value) in properties {
            if config.client.set(key, value)? {
                continue;
            }
            match key {
                "group.id" => config.group_id = optional(value),
                "group.instance.id" => config.group_instance_id = optional(value),
                "auto.offset.reset" => config.auto_offset_reset = value.parse()?,
                "isolation.level" => config.isolation_level = value.parse()?,
                "max.poll.records" => config.max_poll_records = number(key, value)?,
                "fetch.min.bytes" => config.fetch_min_bytes = number(key, value)?,
                "fetch.max.bytes" => config.fetch_max_bytes = number(key, value)?,
                "fetch.max.wait.ms" => config.fetch_max_wait = millis(key, value)?,
                "max.partition.fetch.bytes" => {
                    config.max_partition_fetch_bytes = number(key, value)?
                }
                "session.timeout.ms" => config.session_timeout = millis(key, value)?,
                "heartbeat.interval.ms" => config.heartbeat_interval = millis(key, value)?,
                "max.poll.interval.ms" => config.max_poll_interval = millis(key, value)?,
                "enable.auto.commit" => config.enable_auto_commit = boolean(key, value)?,
                "auto.commit.interval.ms" => config.auto_commit_interval = millis(key, value)?,
                _ => return Err(ConfigError::Unknown(key.to_string())),
            }
        }
        Ok(config)
    }

    /// Sets `group.id`.
    pub fn group_id(mut self, id: impl Into<String>) -> Self {
        self.group_id = Some(id.into());
        self
    }

    /// Sets `group.instance.id` (static membership).
    pub fn group_instance_id(mut self, id: impl Into<String>) -> Self {
        self.group_instance_id = Some(id.into());
        self
    }

    /// Sets `auto.offset.reset`.
    pub fn auto_offset_reset(mut self, reset: OffsetReset) -> Self {
        self.auto_offset_reset = reset;
        self
    }

    /// Sets `isolation.level`.
    pub fn isolation_level(mut self, level: IsolationLevel) -> Self {
        self.isolation_level = level;
        self
    }

    /// Sets `max.poll.records`.
    pub fn max_poll_records(mut self, records: usize) -> Self {
        self.max_poll_records = records;
        self
    }

    /// Sets `session.timeout.ms`.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// Sets `heartbeat.interval.ms`.
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// Sets `max.poll.interval.ms`.
    pub fn max_poll_interval(mut self, interval: Duration) -> Self {
        self.max_poll_interval = interval;
        self
    }

    /// Sets `client.id`.
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.client.client_id = id.into();
        self
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        self.client.validate()?;
        if self.max_poll_records == 0 {
            return Err(ConfigError::rejected(
                "max.poll.records",
                "must be positive",
            ));
        }
        if self.heartbeat_interval >= self.session_timeout {
            return Err(ConfigError::rejected(
                "heartbeat.interval.ms",
                "must be below session.timeout.ms",
            ));
        }
        Ok(())
    }
}

pub(crate) fn split_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

pub(crate) fn bad(key: &str, value: &str) -> ConfigError {
    ConfigError::invalid(key, value)
}

pub(crate) fn number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, ConfigError> {
    value.trim().parse().map_err(|_| bad(key, value))
}

pub(crate) fn millis(key: &str, value: &str) -> Result<Duration, ConfigError> {
    number::<u64>(key, value).map(Duration::from_millis)
}

pub(crate) fn boolean(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(key, value)),
    }
}

impl std::str::FromStr for Acks {
    type Err = ConfigError;

    /// `acks` by Kafka's values: `all` (or `-1`), `1` or `0`.
    fn from_str(value: &str) -> Result<Self, ConfigError> {
        match value.trim() {
            "0" => Ok(Self::None),
            "1" => Ok(Self::Leader),
            "all" | "-1" => Ok(Self::All),
            _ => Err(bad("acks", value)),
        }
    }
}

impl std::str::FromStr for OffsetReset {
    type Err = ConfigError;

    /// `auto.offset.reset` by Kafka's values: `earliest`, `latest` or `none`.
    fn from_str(value: &str) -> Result<Self, ConfigError> {
        match value.trim() {
            "earliest" => Ok(Self::Earliest),
            "latest" => Ok(Self::Latest),
            "none" => Ok(Self::None),
            _ => Err(bad("auto.offset.reset", value)),
        }
    }
}

impl std::str::FromStr for IsolationLevel {
    type Err = ConfigError;

    /// `isolation.level` by Kafka's values: `read_uncommitted` or `read_committed`.
    fn from_str(value: &str) -> Result<Self, ConfigError> {
        match value.trim() {
            "read_uncommitted" => Ok(Self::ReadUncommitted),
            "read_committed" => Ok(Self::ReadCommitted),
            _ => Err(bad("isolation.level", value)),
        }
    }
}

/// An optional setting: empty means unset.
fn optional(value: &str) -> Option<String> {
    let value = value.trim();
    (!value.is_empty()).then(|| value.to_string())
}

/// A `compression.type` value.
pub fn compression(name: &str) -> Result<Compression, ConfigError> {
    Ok(match name {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        _ => return Err(bad("compression.type", name)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_set_the_typed_fields() {
        let config = ProducerConfig::from_properties([
            ("bootstrap.servers", "a:1, b:2"),
            ("linger.ms", "20"),
            ("acks", "all"),
            ("compression.type", "zstd"),
            ("transactional.id", "t"),
        ])
        .unwrap();
        assert_eq!(config.client.bootstrap, ["a:1", "b:2"]);
        assert_eq!(config.linger, Duration::from_millis(20));
        assert_eq!(config.compression, Compression::Zstd);
        assert_eq!(config.transactional_id.as_deref(), Some("t"));
        config.validate().unwrap();
    }

    #[test]
    fn unknown_or_malformed_properties_are_refused() {
        assert_eq!(
            ProducerConfig::from_properties([("linger", "5")]).unwrap_err(),
            ConfigError::Unknown("linger".into())
        );
        assert_eq!(
            ProducerConfig::from_properties([("linger.ms", "soon")]).unwrap_err(),
            ConfigError::invalid("linger.ms", "soon")
        );
        assert!(ConsumerConfig::from_properties([("auto.offset.reset", "smallest")]).is_err());
        let consumer = ConsumerConfig::from_properties([
            ("bootstrap.servers", "h:9092"),
            ("isolation.level", "read_committed"),
        ])
        .unwrap();
        assert_eq!(consumer.isolation_level, IsolationLevel::ReadCommitted);
    }

    #[test]
    fn idempotence_needs_acks_all() {
        let config = ProducerConfig::new("h:1").acks(Acks::Leader);
        assert!(matches!(
            config.validate(),
            Err(ConfigError::Rejected {
                property: "enable.idempotence",
                ..
            })
        ));
        config.idempotence(false).validate().unwrap();
        assert!(ProducerConfig::new("").validate().is_err());
    }
}
