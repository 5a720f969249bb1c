//! The broker's topics: names, ids, partition counts and configurations, kept in
//! `DATA_DIR/topics.json` and rewritten atomically (temporary file, fsync, rename) on every
//! change.

pub(crate) mod configs;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The most partitions a topic may have on this broker.
pub(crate) const MAX_PARTITIONS: i32 = 10_000;

/// A topic as the broker knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Topic {
    /// The topic's name.
    pub name: String,
    /// The topic's id (KIP-516), fixed at creation.
    pub id: Uuid,
    /// How many partitions it has.
    pub partitions: i32,
    /// Configurations set on the topic; the others have their defaults.
    pub configs: BTreeMap<String, String>,
}

/// Why a change to the topics was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MetadataError {
    /// The name is not a legal topic name.
    #[error("invalid topic name {0:?}: {1}")]
    InvalidTopicName(String, &'static str),
    /// A topic of that name exists.
    #[error("topic {0:?} already exists")]
    TopicExists(String),
    /// No topic has that name.
    #[error("unknown topic {0:?}")]
    UnknownTopic(String),
    /// The partition count is not acceptable.
    #[error("{0}")]
    InvalidPartitions(String),
    /// A configuration is unknown or has a bad value.
    #[error("{0}")]
    InvalidConfig(String),
    /// The metadata file could not be written.
    #[error("metadata I/O error: {0}")]
    Io(#[from] io::Error),
}

/// The file-backed registry of topics.
#[derive(Debug)]
pub(crate) struct Metadata {
    file: PathBuf,
    topics: RwLock<BTreeMap<String, Topic>>,
}

#[derive(Serialize, Deserialize)]
struct TopicsFile {
    topics: Vec<Topic>,
}

/// Checks a topic name as Kafka does.
pub(crate) fn validate_topic_name(name: &str) -> Result<(), MetadataError> {
    let invalid = |why| Err(MetadataError::InvalidTopicName(name.to_string(), why));
    if name.is_empty() {
        return invalid("it is empty");
    }
    if name == "." || name == ".." {
        return invalid("it cannot be '.' or '..'");
    }
    if name.len() > 249 {
        return invalid("it is longer than 249 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return invalid("it may hold only ASCII letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

impl Metadata {
    /// Loads the topics of the data directory `dir` (none if it has no topics file yet).
    pub(crate) fn load(dir: &Path) -> io::Result<Self> {
        let file = dir.join("topics.json");
        let topics = match fs::read(&file) {
            Ok(bytes) => {
                let parsed: TopicsFile = serde_json::from_slice(&bytes).map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{} is not a valid topics file: {e}", file.display()),
                    )
                })?;
                parsed
                    .topics
                    .into_iter()
                    .map(|t| (t.name.clone(), t))
                    .collect()
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e),
        };
        Ok(Self {
            file,
            topics: RwLock::new(topics),
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, Topic>> {
        self.topics.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<String, Topic>> {
        self.topics.write().unwrap_or_else(|p| p.into_inner())
    }

    fn save(&self, topics: &BTreeMap<String, Topic>) -> io::Result<()> {
        let file = TopicsFile {
            topics: topics.values().cloned().collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(io::Error::other)?;
        crate::storage::write_synced(&self.file, &bytes)
    }

    /// The topic of that name.
    pub(crate) fn topic(&self, name: &str) -> Option<Topic> {
        self.read().get(name).cloned()
    }

    /// The topic with that id.
    pub(crate) fn topic_by_id(&self, id: Uuid) -> Option<Topic> {
        self.read().values().find(|t| t.id == id).cloned()
    }

    /// Every topic, by name.
    pub(crate) fn topics(&self) -> Vec<Topic> {
        self.read().values().cloned().collect()
    }

    /// Creates a topic (or, with `validate_only`, checks that it could be created).
    pub(crate) fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Topic, MetadataError> {
        validate_topic_name(name)?;
        if !(1..=MAX_PARTITIONS).contains(&partitions) {
            return Err(MetadataError::InvalidPartitions(format!(
                "a topic needs between 1 and {MAX_PARTITIONS} partitions, not {partitions}"
            )));
        }
        for (k, v) in &configs {
            configs::validate(k, v).map_err(MetadataError::InvalidConfig)?;
        }
        let mut topics = self.write();
        if topics.contains_key(name) {
            return Err(MetadataError::TopicExists(name.to_string()));
        }
        let topic = Topic {
            name: name.to_string(),
            id: Uuid::new_v4(),
            partitions,
            configs,
        };
        if !validate_only {
            topics.insert(name.to_string(), topic.clone());
            if let Err(e) = self.save(&topics) {
                topics.remove(name);
                return Err(e.into());
            }
        }
        Ok(topic)
    }

    /// Deletes a topic.
    pub(crate) fn delete_topic(&self, name: &str) -> Result<Topic, MetadataError> {
        let mut topics = self.write();
        let topic = topics
            .remove(name)
            .ok_or_else(|| MetadataError::UnknownTopic(name.to_string()))?;
        if let Err(e) = self.save(&topics) {
            topics.insert(name.to_string(), topic);
            return Err(e.into());
        }
        Ok(topic)
    }

    /// Raises a topic's partition count to `count`; returns the previous count.
    pub(crate) fn increase_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<i32, MetadataError> {
        let mut topics = self.write();
        let topic = topics
            .get_mut(name)
            .ok_or_else(|| MetadataError::UnknownTopic(name.to_string()))?;
        let old = topic.partitions;
        if count <= old {
            return Err(MetadataError::InvalidPartitions(format!(
                "topic {name} has {old} partitions; the count can only grow, not become {count}"
            )));
        }
        if count > MAX_PARTITIONS {
            return Err(MetadataError::InvalidPartitions(format!(
                "a topic may have at most {MAX_PARTITIONS} partitions"
            )));
        }
        if !validate_only {
            topic.partitions = count;
            if let Err(e) = self.save(&topics) {
                if let Some(t) = topics.get_mut(name) {
                    t.partitions = old;
                }
                return Err(e.into());
            }
        }
        Ok(old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_persist_across_loads() {
        let dir = tempfile::tempdir().unwrap();
        let metadata = Metadata::load(dir.path()).unwrap();
        let configs = BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]);
        let created = metadata.create_topic("orders", 6, configs, false).unwrap();
        metadata
            .create_topic("checked-only", 1, BTreeMap::new(), true)
            .unwrap();
        assert_eq!(metadata.increase_partitions("orders", 8, false).unwrap(), 6);
        let reloaded = Metadata::load(dir.path()).unwrap();
        let orders = reloaded.topic("orders").unwrap();
        assert_eq!(orders.partitions, 8);
        assert_eq!(orders.id, created.id);
        assert_eq!(reloaded.topic_by_id(created.id).unwrap().name, "orders");
        assert!(reloaded.topic("checked-only").is_none());
        reloaded.delete_topic("orders").unwrap();
        assert!(Metadata::load(dir.path()).unwrap().topics().is_empty());
    }

    #[test]
    fn bad_requests_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let metadata = Metadata::load(dir.path()).unwrap();
        for name in ["", ".", "..", "has space", "slash/y", &"x".repeat(250)] {
            assert!(matches!(
                metadata.create_topic(name, 1, BTreeMap::new(), false),
                Err(MetadataError::InvalidTopicName(..))
            ));
        }
        assert!(matches!(
            metadata.create_topic("t", 0, BTreeMap::new(), false),
            Err(MetadataError::InvalidPartitions(_))
        ));
        let bad = BTreeMap::from([("retention.ms".to_string(), "forever".to_string())]);
        assert!(matches!(
            metadata.create_topic("t", 1, bad, false),
            Err(MetadataError::InvalidConfig(_))
        ));
        metadata
            .create_topic("t", 2, BTreeMap::new(), false)
            .unwrap();
        assert!(matches!(
            metadata.create_topic("t", 2, BTreeMap::new(), false),
            Err(MetadataError::TopicExists(_))
        ));
        assert!(matches!(
            metadata.increase_partitions("t", 2, false),
            Err(MetadataError::InvalidPartitions(_))
        ));
        assert!(matches!(
            metadata.delete_topic("nope"),
            Err(MetadataError::UnknownTopic(_))
        ));
    }

    #[test]
    fn a_damaged_topics_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("topics.json"), b"{not json").unwrap();
        let err = Metadata::load(dir.path()).unwrap_err();
        assert!(err.to_string().contains("not a valid topics file"), "{err}");
    }
}
