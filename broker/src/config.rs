//! The broker's settings, with Kafka's names where Kafka has one.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::group::GroupConfig;
use crate::storage::LogConfig;
use crate::txn::TxnConfig;

/// How a broker runs. Build one with [`crate::Broker::builder`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BrokerConfig {
    /// Where topics and logs live.
    pub data_dir: PathBuf,
    /// The address to listen on (defaults to 127.0.0.1:9092; port 0 picks a free one).
    pub listen: SocketAddr,
    /// The host clients are told to connect to (defaults to the listen address's IP).
    pub advertised_host: Option<String>,
    /// The port clients are told to connect to (defaults to the listen port).
    pub advertised_port: Option<u16>,
    /// This broker's id in metadata responses (`node.id`, defaults to 1).
    pub node_id: i32,
    /// Create a topic when a client asks for metadata of one that does not exist
    /// (`auto.create.topics.enable`, defaults to false as in Kafka 4).
    pub auto_create_topics: bool,
    /// Partitions of an auto-created topic or of a CreateTopics asking for the default
    /// (`num.partitions`, defaults to 1).
    pub num_partitions: i32,
    /// The largest request frame accepted; a larger one closes its connection before it is
    /// read (`socket.request.max.bytes`, defaults to 100 MiB).
    pub socket_request_max_bytes: usize,
    /// Requests a connection may have in progress before the broker stops reading from it
    /// (defaults to 64).
    pub max_in_flight_per_connection: usize,
    /// A connection from which nothing arrives for this long is closed
    /// (`connections.max.idle.ms`, defaults to 10 minutes).
    pub connections_max_idle: Duration,
    /// Connections one address may have open at once; more are closed as they arrive
    /// (`max.connections.per.ip`, defaults to no limit, as in Kafka).
    pub max_connections_per_ip: usize,
    /// How often retention runs (`log.retention.check.interval.ms`, defaults to 5 minutes).
    pub retention_check_interval: Duration,
    /// How often compacted topics are looked at for closed segments to clean
    /// (`log.cleaner.backoff.ms`, defaults to 15 seconds).
    pub cleaner_backoff: Duration,
    /// The log settings of topics that do not override them.
    pub log: LogConfig,
    /// Partitions of `__consumer_offsets` when the broker creates it
    /// (`offsets.topic.num.partitions`, defaults to 50).
    pub offsets_topic_partitions: i32,
    /// The group coordinator's settings.
    pub groups: GroupConfig,
    /// Partitions of `__transaction_state` when the broker creates it
    /// (`transaction.state.log.num.partitions`, defaults to 50).
    pub transaction_state_partitions: i32,
    /// The transaction coordinator's settings.
    pub transactions: TxnConfig,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("eddy-data"),
            listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            advertised_host: None,
            advertised_port: None,
            node_id: 1,
            auto_create_topics: false,
            num_partitions: 1,
            socket_request_max_bytes: 100 << 20,
            max_in_flight_per_connection: 64,
            connections_max_idle: Duration::from_secs(600),
            max_connections_per_ip: usize::MAX,
            retention_check_interval: Duration::from_secs(300),
            cleaner_backoff: Duration::from_secs(15),
            log: LogConfig::default(),
            offsets_topic_partitions: 50,
            groups: GroupConfig::default(),
            transaction_state_partitions: 50,
            transactions: TxnConfig::default(),
        }
    }
}
