//! The broker's domain as handlers see it: topic metadata and partition logs kept in step.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use eddy_core::log::TopicPartition;

use crate::clock::Clock;
use crate::config::BrokerConfig;
use crate::group::{GroupCoordinator, OFFSETS_TOPIC};
use crate::metadata::{configs, Metadata, MetadataError, Topic};
use crate::storage::{LogConfig, LogStore, Partition};
use crate::txn::{ProducerIds, TransactionCoordinator, TRANSACTION_STATE_TOPIC};

/// Everything a request can reach.
#[derive(Debug)]
pub(crate) struct BrokerState {
    pub(crate) config: BrokerConfig,
    pub(crate) metadata: Metadata,
    pub(crate) logs: Arc<LogStore>,
    pub(crate) groups: Arc<GroupCoordinator>,
    pub(crate) transactions: Arc<TransactionCoordinator>,
    pub(crate) producer_ids: Arc<ProducerIds>,
    /// The one clock of the broker: the coordinators' deadlines and every wall-clock time
    /// it stores (append times, commit times, retention).
    pub(crate) clock: Clock,
    pub(crate) cluster_id: String,
    /// Host and port clients are told to use.
    pub(crate) advertised: (String, u16),
}

impl BrokerState {
    /// Loads the topics and opens (recovering) every partition's log.
    pub(crate) fn open(config: BrokerConfig, advertised: (String, u16)) -> io::Result<Self> {
        std::fs::create_dir_all(&config.data_dir)?;
        let metadata = Metadata::load(&config.data_dir)?;
        let logs = Arc::new(LogStore::new(&config.data_dir)?);
        let cluster_id = cluster_id(&config.data_dir)?;
        let clock = Clock::new();
        let now = clock.now().wall_ms;
        for (topic, partitions) in [
            (OFFSETS_TOPIC, config.offsets_topic_partitions),
            (TRANSACTION_STATE_TOPIC, config.transaction_state_partitions),
        ] {
            if metadata.topic(topic).is_none() {
                let configs = BTreeMap::from([
                    ("cleanup.policy".to_string(), "compact".to_string()),
                    ("segment.bytes".to_string(), "104857600".to_string()),
                ]);
                metadata
                    .create_topic(topic, partitions, configs, false)
                    .map_err(|e| io::Error::other(e.to_string()))?;
            }
        }
        let topics = metadata.topics();
        for topic in &topics {
            let log_config = configs::log_config(&config.log, &topic.configs);
            for p in 0..topic.partitions {
                logs.open_partition(TopicPartition::new(&topic.name, p), log_config.clone(), now)?;
            }
        }
        logs.remove_unknown_partitions(|dir| {
            dir.rsplit_once('-').is_some_and(|(name, p)| {
                let p: i32 = p.parse().unwrap_or(-1);
                topics
                    .iter()
                    .any(|t| t.name == name && (0..t.partitions).contains(&p))
            })
        })?;
        let internal_log = |topic: &str| -> Vec<Arc<Partition>> {
            let partitions = metadata.topic(topic).map_or(0, |t| t.partitions);
            (0..partitions)
                .filter_map(|p| logs.get(&TopicPartition::new(topic, p)))
                .collect()
        };
        let groups =
            GroupCoordinator::open(config.groups.clone(), clock, internal_log(OFFSETS_TOPIC))
                .map_err(|e| io::Error::other(format!("cannot replay {OFFSETS_TOPIC}: {e}")))?;
        let groups = Arc::new(groups);
        let producer_ids = Arc::new(ProducerIds::open(&config.data_dir)?);
        let transactions = TransactionCoordinator::open(
            config.transactions.clone(),
            clock,
            internal_log(TRANSACTION_STATE_TOPIC),
            Arc::clone(&logs),
            Arc::clone(&groups),
            Arc::clone(&producer_ids),
        )
        .map_err(|e| io::Error::other(format!("cannot replay {TRANSACTION_STATE_TOPIC}: {e}")))?;
        let state = Self {
            config,
            metadata,
            logs,
            groups,
            transactions: Arc::new(transactions),
            producer_ids,
            clock,
            cluster_id,
            advertised,
        };
        Ok(state)
    }

    /// The log settings of a topic: its own over the broker's.
    pub(crate) fn log_config(&self, topic: &Topic) -> LogConfig {
        configs::log_config(&self.config.log, &topic.configs)
    }

    /// A partition's log, if the topic and partition exist.
    pub(crate) fn partition(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        self.logs.get(&TopicPartition::new(topic, partition))
    }

    /// Creates a topic and its partitions' logs.
    pub(crate) fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Topic, MetadataError> {
        let topic = self
            .metadata
            .create_topic(name, partitions, configs, validate_only)?;
        if !validate_only {
            self.open_partitions(&topic, 0)?;
        }
        Ok(topic)
    }

    fn open_partitions(&self, topic: &Topic, from: i32) -> Result<(), MetadataError> {
        let config = self.log_config(topic);
        let now = self.clock.now().wall_ms;
        for p in from..topic.partitions {
            self.logs
                .open_partition(TopicPartition::new(&topic.name, p), config.clone(), now)?;
        }
        Ok(())
    }

    /// Deletes a topic and its logs.
    pub(crate) fn delete_topic(&self, name: &str) -> Result<Topic, MetadataError> {
        let topic = self.metadata.delete_topic(name)?;
        for p in 0..topic.partitions {
            self.logs.delete_partition(&TopicPartition::new(name, p))?;
        }
        Ok(topic)
    }

    /// Raises a topic's partition count and creates the new partitions' logs.
    pub(crate) fn increase_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), MetadataError> {
        let old = self
            .metadata
            .increase_partitions(name, count, validate_only)?;
        if !validate_only {
            if let Some(topic) = self.metadata.topic(name) {
                self.open_partitions(&topic, old)?;
            }
        }
        Ok(())
    }
}

/// The cluster id of this data directory, made up on first start.
fn cluster_id(dir: &std::path::Path) -> io::Result<String> {
    let path = dir.join("cluster-id");
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => Ok(id.trim().to_string()),
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => {
            let id = uuid::Uuid::new_v4().simple().to_string();
            crate::storage::write_synced(&path, id.as_bytes())?;
            Ok(id)
        }
    }
}
