//! The clients of a streams application and their settings, as Kafka Streams gives them:
//! client properties with a prefix for the clients they reach (unprefixed client keys reach
//! every client; `consumer.` every consumer; `main.consumer.`, `restore.consumer.`,
//! `global.consumer.`, `producer.` and `admin.` one kind), merged from the least to the most
//! specific whatever the order they were set in, over Kafka Streams' own defaults for its
//! clients. Each property is checked against the settings of the clients it reaches when it
//! is set; typed setters ([`StreamsConfig::producer`] and its siblings) change a client's
//! settings through its config type and keep what they change as properties.

use super::{ProcessingGuarantee, StreamsConfig};
use crate::client::{ClientConfig, ConfigError, ConsumerConfig, ProducerConfig};

/// Client settings Kafka Streams passes to its clients unprefixed.
const CLIENT_KEYS: &[&str] = &[
    "client.id",
    "request.timeout.ms",
    "socket.connection.setup.timeout.ms",
    "metadata.max.age.ms",
    "retry.backoff.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "receive.message.max.bytes",
];

/// The clients a prefix reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reaches {
    Producer,
    Consumers,
    Admin,
}

/// Prefixes of settings for some of the clients.
const CLIENT_PREFIXES: &[(&str, Reaches)] = &[
    ("producer.", Reaches::Producer),
    ("consumer.", Reaches::Consumers),
    ("main.consumer.", Reaches::Consumers),
    ("restore.consumer.", Reaches::Consumers),
    ("global.consumer.", Reaches::Consumers),
    ("admin.", Reaches::Admin),
];

/// `max.poll.records` of Kafka Streams' consumers, unless the user's settings say otherwise.
const STREAMS_MAX_POLL_RECORDS: &str = "1000";
/// `fetch.max.bytes` of a stream thread's main consumer, eddy's own default (Kafka's is 50
/// MiB): what its fetched records may hold at once, as fetched (see the consumer's fetcher),
/// comes on top of the state memory budget. At 64 partitions the consumer held 280 MiB
/// resident at 50 MiB and 186 MiB at 16 MiB, at the same speed (count of 1M keys).
const STREAMS_MAIN_FETCH_MAX_BYTES: &str = "16777216";
/// `max.partition.fetch.bytes` of a stream thread's main consumer, eddy's own default
/// (Kafka's is 1 MiB): a fetch brings twice as many records of a partition per round trip,
/// within the same `fetch.max.bytes`, so a thread catching up on its input waits less on
/// its fetches. Over 4 partitions and 3M records of `eddy bench streams` (alternating runs,
/// exactly-once, 100k keys) the count ran 15–23% faster than at 1 MiB, the windowed count
/// 5–19%, the stateless chain as fast, each as large; at 4 MiB the stateless chain ran
/// slower (a fetch then waits for room for a whole partition's answer, nearly half of
/// `fetch.max.bytes` as decoded).
const STREAMS_MAIN_MAX_PARTITION_FETCH_BYTES: &str = "2097152";

/// `fetch.max.wait.ms` of the restore consumer: a fetch of caught-up standbys waiting at
/// their ends would hold back a task that came to be restored from the same broker.
const RESTORE_FETCH_MAX_WAIT_MS: &str = "50";

/// `batch.size` of a stream thread's producer unless the user's settings say otherwise:
/// a commit sends a cache's worth of records at once, and fewer, larger batches mean fewer
/// produce requests for the broker to append and make durable before the commit goes on.
pub(crate) const STREAMS_BATCH_SIZE: usize = 256 * 1024;

/// `transaction.timeout.ms` of a stream thread's producer under exactly-once, Kafka Streams'
/// default: a crashed thread's open transaction holds its partitions' readers back no
/// longer than this.
const EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS: &str = "10000";

/// Sets `key` in `merged`, replacing an earlier value.
fn merge<'a>(merged: &mut Vec<(&'a str, &'a str)>, key: &'a str, value: &'a str) {
    match merged.iter_mut().find(|(k, _)| *k == key) {
        Some(entry) => entry.1 = value,
        None => merged.push((key, value)),
    }
}

/// Checks that `key` is a setting of the clients `reaches` names and `value` one it takes.
fn check(reaches: Reaches, key: &str, value: &str) -> Result<(), ConfigError> {
    let one = [(key, value)];
    match reaches {
        Reaches::Producer => ProducerConfig::from_properties(one).map(drop),
        Reaches::Consumers => ConsumerConfig::from_properties(one).map(drop),
        Reaches::Admin => ClientConfig::from_properties(one).map(drop),
    }
}

impl StreamsConfig {
    /// Keeps a client property (unprefixed or with one of Kafka Streams' prefixes) once it
    /// is known to be a setting of the clients it reaches, with a value they take.
    pub(super) fn set_client_property(
        &mut self,
        key: &str,
        value: &str,
    ) -> Result<(), ConfigError> {
        if CLIENT_KEYS.contains(&key) {
            check(Reaches::Admin, key, value)?;
        } else {
            let Some((prefix, reaches)) = CLIENT_PREFIXES
                .iter()
                .find(|(prefix, _)| key.starts_with(prefix))
            else {
                return Err(ConfigError::Unknown(key.to_string()));
            };
            check(*reaches, &key[prefix.len()..], value)?;
        }
        self.client_properties
            .push((key.to_string(), value.to_string()));
        Ok(())
    }

    /// The client properties for one kind of client (`"producer"`, `"consumer"`,
    /// `"main.consumer"`, `"restore.consumer"`, `"global.consumer"`, `"admin"`), as Kafka
    /// Streams merges them: unprefixed ones first, then `consumer.` ones for every consumer,
    /// then those of the client's own prefix.
    pub(crate) fn client_properties_for(&self, client: &str) -> Vec<(&str, &str)> {
        let own = format!("{client}.");
        let is_consumer = client.ends_with("consumer");
        let mut merged: Vec<(&str, &str)> = Vec::new();
        let properties = || {
            self.client_properties
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
        };
        for (key, value) in properties().filter(|(k, _)| CLIENT_KEYS.contains(k)) {
            merge(&mut merged, key, value);
        }
        if is_consumer && client != "consumer" {
            for (key, value) in properties() {
                if let Some(key) = key.strip_prefix("consumer.") {
                    merge(&mut merged, key, value);
                }
            }
        }
        for (key, value) in properties() {
            if let Some(key) = key.strip_prefix(own.as_str()) {
                merge(&mut merged, key, value);
            }
        }
        merged
    }

    /// The settings of a stream thread's main consumer against `bootstrap`: Kafka Streams'
    /// defaults (polls of 1,000 records), fetches of at most 16 MiB held at once and of up
    /// to 2 MiB of a partition, under the `main.consumer` properties. The thread adds its
    /// group, offsets reset and isolation level.
    pub fn main_consumer_config(&self, bootstrap: &str) -> Result<ConsumerConfig, ConfigError> {
        let defaults = [
            ("bootstrap.servers", bootstrap),
            ("max.poll.records", STREAMS_MAX_POLL_RECORDS),
            ("fetch.max.bytes", STREAMS_MAIN_FETCH_MAX_BYTES),
            (
                "max.partition.fetch.bytes",
                STREAMS_MAIN_MAX_PARTITION_FETCH_BYTES,
            ),
        ];
        ConsumerConfig::from_properties(
            defaults
                .into_iter()
                .chain(self.client_properties_for("main.consumer")),
        )
    }

    /// The settings of a stream thread's restore consumer against `bootstrap`: fetches that
    /// come back within 50 ms and polls of 1,000 records under the `restore.consumer`
    /// properties.
    pub fn restore_consumer_config(&self, bootstrap: &str) -> Result<ConsumerConfig, ConfigError> {
        let defaults = [
            ("bootstrap.servers", bootstrap),
            ("fetch.max.wait.ms", RESTORE_FETCH_MAX_WAIT_MS),
            ("max.poll.records", STREAMS_MAX_POLL_RECORDS),
        ];
        ConsumerConfig::from_properties(
            defaults
                .into_iter()
                .chain(self.client_properties_for("restore.consumer")),
        )
    }

    /// The settings of a stream thread's producer against `bootstrap`: batches of 256 KiB
    /// and, exactly-once, a transaction timeout of 10 s, under the `producer` properties.
    /// The thread adds its transactional id.
    pub fn producer_config(&self, bootstrap: &str) -> Result<ProducerConfig, ConfigError> {
        let batch_size = STREAMS_BATCH_SIZE.to_string();
        let mut defaults = vec![
            ("bootstrap.servers", bootstrap),
            ("batch.size", batch_size.as_str()),
        ];
        if self.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2 {
            defaults.push((
                "transaction.timeout.ms",
                EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS,
            ));
        }
        ProducerConfig::from_properties(
            defaults
                .into_iter()
                .chain(self.client_properties_for("producer")),
        )
    }

    /// The settings of the application's admin client against `bootstrap`: the `admin`
    /// properties.
    pub fn admin_config(&self, bootstrap: &str) -> Result<ClientConfig, ConfigError> {
        ClientConfig::from_properties(
            [("bootstrap.servers", bootstrap)]
                .into_iter()
                .chain(self.client_properties_for("admin")),
        )
    }

    /// Changes the stream threads' producer settings through [`ProducerConfig`]'s typed
    /// setters: `config.producer(|p| p.linger(Duration::from_millis(20)))`. What `change`
    /// sets is kept as `producer.` properties; a setting left as it was is not kept.
    pub fn producer(self, change: impl FnOnce(ProducerConfig) -> ProducerConfig) -> Self {
        let base = self.producer_config("");
        self.changed("producer.", base, change)
    }

    /// Changes the main consumers' settings through [`ConsumerConfig`]'s typed setters, kept
    /// as `main.consumer.` properties.
    pub fn main_consumer(self, change: impl FnOnce(ConsumerConfig) -> ConsumerConfig) -> Self {
        let base = self.main_consumer_config("");
        self.changed("main.consumer.", base, change)
    }

    /// Changes the restore consumers' settings through [`ConsumerConfig`]'s typed setters,
    /// kept as `restore.consumer.` properties.
    pub fn restore_consumer(self, change: impl FnOnce(ConsumerConfig) -> ConsumerConfig) -> Self {
        let base = self.restore_consumer_config("");
        self.changed("restore.consumer.", base, change)
    }

    /// Changes the admin client's settings through [`ClientConfig`]'s typed setters, kept as
    /// `admin.` properties.
    pub fn admin(self, change: impl FnOnce(ClientConfig) -> ClientConfig) -> Self {
        let base = self.admin_config("");
        self.changed("admin.", base, change)
    }

    /// Keeps, under `prefix`, the properties in which `change(base)` differs from `base`.
    fn changed<C: Properties>(
        mut self,
        prefix: &str,
        base: Result<C, ConfigError>,
        change: impl FnOnce(C) -> C,
    ) -> Self {
        // The properties kept so far were each checked when set, so they read back.
        let Ok(base) = base else { return self };
        let before = base.properties();
        for (key, value) in change(base).properties() {
            if !before.iter().any(|(k, v)| *k == key && *v == value) {
                self.client_properties
                    .push((format!("{prefix}{key}"), value));
            }
        }
        self
    }
}

/// A client's settings as Kafka properties.
trait Properties {
    fn properties(&self) -> Vec<(&'static str, String)>;
}

impl Properties for ProducerConfig {
    fn properties(&self) -> Vec<(&'static str, String)> {
        ProducerConfig::properties(self)
    }
}

impl Properties for ConsumerConfig {
    fn properties(&self) -> Vec<(&'static str, String)> {
        ConsumerConfig::properties(self)
    }
}

impl Properties for ClientConfig {
    fn properties(&self) -> Vec<(&'static str, String)> {
        ClientConfig::properties(self)
    }
}
