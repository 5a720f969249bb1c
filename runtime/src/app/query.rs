//! Interactive queries (Kafka Streams' `KafkaStreams.store` and `queryMetadataForKey`): a
//! read-only view of a store across the tasks this instance runs, reading what the stores
//! committed to sled (under exactly-once, committed transactions only; at-least-once, the
//! last commit), and where a key lives among the instances — the one running its task and
//! those keeping standbys — as the group's last assignment says, by `application.server`.
//! While queries come, the stream threads checkpoint at least every second, so that what
//! they read is at most that old.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eddy_core::log::partition_for_key;
use eddy_core::log::Timestamp;
use eddy_core::serde::{Serde, SerdeError};
use eddy_core::streams::internals::StoreInstance;
use eddy_core::streams::store::{
    KeyValueBytesStore, LayerConfig, StoreBuilder, StoreDecoder, StoreSupplier, WindowBytesStore,
};
use eddy_core::streams::{TaskId, Topology};

use super::assignor::protocol::WirePartition;
use crate::store::SledStores;
use crate::time::Instant;

/// How often the stream threads checkpoint at least while queries come: how old, at most,
/// the state a query reads is while records flow.
pub(crate) const QUERIED_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);

/// How long after a query the threads keep checkpointing that often.
const QUERIES_COME: Duration = Duration::from_secs(60);

/// Why a store cannot be queried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// The topology has no store of that name (global stores are not queried here).
    #[error("the topology has no store {0}")]
    UnknownStore(String),
    /// The store is of another kind, or holds other types.
    #[error("store {store} is not a {asked} store of those key and value types")]
    WrongType {
        /// The store.
        store: String,
        /// The kind asked for.
        asked: &'static str,
    },
    /// The application does not run (yet, or any more).
    #[error("the application is not running: {0}")]
    NotRunning(String),
    /// A key or value could not be read.
    #[error(transparent)]
    Serde(#[from] SerdeError),
}

/// Where a key's data lives among the application's instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyQueryMetadata {
    /// The `application.server` of the instance running the key's task, if known.
    pub active: Option<String>,
    /// Those of the instances keeping standbys of it.
    pub standbys: BTreeSet<String>,
    /// The key's partition.
    pub partition: i32,
}

/// What an instance hosts, kept up to date by its stream threads: the tasks each runs and
/// keeps standbys of, and the group's last word on every instance's partitions.
#[derive(Debug, Default)]
pub(crate) struct Hosted {
    running: Mutex<BTreeMap<usize, BTreeSet<TaskId>>>,
    hosts: Mutex<HostMap>,
    /// When a query last read a store here.
    queried: Mutex<Option<Instant>>,
}

/// Every instance's partitions, by `application.server`.
#[derive(Debug, Clone, Default)]
struct HostMap {
    active: Vec<(String, Vec<WirePartition>)>,
    standby: Vec<(String, Vec<WirePartition>)>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Hosted {
    /// Thread `thread` runs `tasks` now.
    pub(crate) fn set_running(&self, thread: usize, tasks: BTreeSet<TaskId>) {
        lock(&self.running).insert(thread, tasks);
    }

    /// The group's last assignment said this of every instance's partitions.
    pub(crate) fn set_hosts(
        &self,
        active: &[(String, Vec<WirePartition>)],
        standby: &[(String, Vec<WirePartition>)],
    ) {
        *lock(&self.hosts) = HostMap {
            active: active.to_vec(),
            standby: standby.to_vec(),
        };
    }

    fn running(&self) -> BTreeSet<TaskId> {
        lock(&self.running).values().flatten().copied().collect()
    }

    /// A query read a store here.
    fn note_query(&self) {
        *lock(&self.queried) = Some(Instant::now());
    }

    /// How long committed writes may wait in the write buffers before they reach sled:
    /// `configured`, or [`QUERIED_CHECKPOINT_INTERVAL`] if shorter while queries come.
    pub(crate) fn checkpoint_interval(&self, configured: Duration) -> Duration {
        let queried = *lock(&self.queried);
        if queried.is_some_and(|at| at.elapsed() < QUERIES_COME) {
            configured.min(QUERIED_CHECKPOINT_INTERVAL)
        } else {
            configured
        }
    }
}

/// What queries read from: the topology, the stores on disk, and what the instance hosts.
pub(crate) struct Queryable {
    pub(crate) topology: Arc<Topology>,
    pub(crate) application_id: String,
    pub(crate) stores: Arc<SledStores>,
    pub(crate) hosted: Arc<Hosted>,
}

impl Queryable {
    fn definition(&self, name: &str) -> Result<&StoreBuilder, QueryError> {
        self.topology
            .stores()
            .iter()
            .find(|s| s.name() == name && !s.is_global())
            .ok_or_else(|| QueryError::UnknownStore(name.to_string()))
    }

    /// The tasks running here whose sub-topology holds `store`.
    fn tasks_with(&self, store: &str) -> Vec<TaskId> {
        let holding: BTreeSet<u32> = self
            .topology
            .subtopologies()
            .iter()
            .filter(|s| s.stores.iter().any(|n| n == store))
            .map(|s| s.id)
            .collect();
        self.hosted
            .running()
            .into_iter()
            .filter(|t| holding.contains(&t.subtopology))
            .collect()
    }

    fn decoder<K: 'static, V: 'static>(
        &self,
        definition: &StoreBuilder,
        asked: &'static str,
    ) -> Result<StoreDecoder<K, V>, QueryError> {
        StoreDecoder::new(definition).ok_or_else(|| QueryError::WrongType {
            store: definition.name().to_string(),
            asked,
        })
    }

    /// The key-value store `name` across the tasks running here.
    pub(crate) fn key_value<K: 'static, V: 'static>(
        &self,
        name: &str,
    ) -> Result<KeyValueView<K, V>, QueryError> {
        let (parts, decoder) = self.parts(name, "key-value", |store| match store {
            StoreInstance::KeyValue(store) => Some(store),
            _ => None,
        })?;
        Ok(KeyValueView {
            parts,
            decoder,
            hosted: Arc::clone(&self.hosted),
        })
    }

    /// The window store `name` across the tasks running here.
    pub(crate) fn window<K: 'static, V: 'static>(
        &self,
        name: &str,
    ) -> Result<WindowView<K, V>, QueryError> {
        let (parts, decoder) = self.parts(name, "window", |store| match store {
            StoreInstance::Window(store) => Some(store),
            _ => None,
        })?;
        Ok(WindowView {
            parts,
            decoder,
            hosted: Arc::clone(&self.hosted),
        })
    }

    /// The parts of store `name` in the tasks running here, built by its kind over what is
    /// on disk, when its kind's store is what `part` takes (a query `asked` of that kind);
    /// and its decoder.
    fn parts<K: 'static, V: 'static, P>(
        &self,
        name: &str,
        asked: &'static str,
        part: impl Fn(StoreInstance) -> Option<P>,
    ) -> Result<(Vec<P>, StoreDecoder<K, V>), QueryError> {
        let definition = self.definition(name)?;
        let wrong_type = || QueryError::WrongType {
            store: name.to_string(),
            asked,
        };
        let rules = definition.kind().rules();
        if rules.name() != asked {
            return Err(wrong_type());
        }
        let decoder = self.decoder(definition, asked)?;
        self.hosted.note_query();
        let parts = self
            .tasks_with(name)
            .into_iter()
            .map(|task| {
                let inner = self.stores.inner(&task.to_string(), definition);
                part(rules.build(name, inner, LayerConfig::default())).ok_or_else(wrong_type)
            })
            .collect::<Result<_, _>>()?;
        Ok((parts, decoder))
    }

    /// Where `key` of store `name` lives, the key serialized with `keys` (as the store's
    /// input topic is partitioned).
    pub(crate) fn metadata_for_key<K: 'static>(
        &self,
        name: &str,
        key: &K,
        keys: &dyn Serde<Value = K>,
    ) -> Result<KeyQueryMetadata, QueryError> {
        self.definition(name)?;
        let mut key_bytes = Vec::new();
        keys.serialize_into(name, key, &mut key_bytes)?;
        let app = &self.application_id;
        let source = self
            .topology
            .subtopologies()
            .iter()
            .find(|s| s.stores.iter().any(|n| n == name))
            .and_then(|s| s.source_topics.first())
            .map(|t| self.topology.full_topic_name(app, t))
            .ok_or_else(|| QueryError::UnknownStore(name.to_string()))?;
        let hosts = lock(&self.hosted.hosts).clone();
        // The source's partitions, as the assignment spreads them over the instances.
        let partitions = hosts
            .active
            .iter()
            .flat_map(|(_, ps)| ps)
            .filter(|p| p.0 == source)
            .map(|p| p.1 + 1)
            .max()
            .ok_or_else(|| {
                QueryError::NotRunning(format!("no instance is known to read {source}"))
            })?;
        let partition = partition_for_key(&key_bytes, partitions);
        let holds = |ps: &Vec<WirePartition>| ps.iter().any(|p| p.0 == source && p.1 == partition);
        Ok(KeyQueryMetadata {
            active: hosts
                .active
                .iter()
                .find(|(_, ps)| holds(ps))
                .map(|(h, _)| h.clone()),
            standbys: hosts
                .standby
                .iter()
                .filter(|(_, ps)| holds(ps))
                .map(|(h, _)| h.clone())
                .collect(),
            partition,
        })
    }
}

/// A key-value store as this instance holds it: the parts of the tasks it runs.
pub struct KeyValueView<K, V> {
    parts: Vec<Box<dyn KeyValueBytesStore>>,
    decoder: StoreDecoder<K, V>,
    hosted: Arc<Hosted>,
}

impl<K: 'static, V: 'static> KeyValueView<K, V> {
    /// The value of `key`, if a task here holds one.
    pub fn get(&self, key: &K) -> Result<Option<V>, QueryError> {
        self.hosted.note_query();
        let bytes = self.decoder.key_bytes(key)?;
        for part in &self.parts {
            if let Some(value) = part.get(&bytes) {
                return Ok(Some(self.decoder.value(&value)?));
            }
        }
        Ok(None)
    }

    /// Every entry, task by task, each in key order.
    pub fn all(&self) -> Result<Vec<(K, V)>, QueryError> {
        self.hosted.note_query();
        let mut out = Vec::new();
        for part in &self.parts {
            for (k, v) in part.all() {
                out.push((self.decoder.key(&k)?, self.decoder.value(&v)?));
            }
        }
        Ok(out)
    }

    /// How many entries.
    pub fn approximate_num_entries(&self) -> usize {
        self.hosted.note_query();
        self.parts.iter().map(|p| p.len()).sum()
    }
}

/// A window store as this instance holds it: the parts of the tasks it runs.
pub struct WindowView<K, V> {
    parts: Vec<Box<dyn WindowBytesStore>>,
    decoder: StoreDecoder<K, V>,
    hosted: Arc<Hosted>,
}

impl<K: 'static, V: 'static> WindowView<K, V> {
    /// The windows of `key` starting from `from` to `to` (both included): start and value,
    /// in time order.
    pub fn fetch(
        &self,
        key: &K,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<(Timestamp, V)>, QueryError> {
        self.hosted.note_query();
        let bytes = self.decoder.key_bytes(key)?;
        let mut out = Vec::new();
        for part in &self.parts {
            for (start, _, value) in part.fetch_range(&bytes, from, to) {
                out.push((start, self.decoder.value(&value)?));
            }
        }
        Ok(out)
    }

    /// Every live window: key, start and value.
    pub fn all(&self) -> Result<Vec<(K, Timestamp, V)>, QueryError> {
        self.hosted.note_query();
        let mut out = Vec::new();
        for part in &self.parts {
            for (k, start, v) in part.all() {
                out.push((self.decoder.key(&k)?, start, self.decoder.value(&v)?));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_shorten_the_checkpoint_interval_to_a_second() {
        let hosted = Hosted::default();
        let configured = Duration::from_secs(5);
        assert_eq!(hosted.checkpoint_interval(configured), configured);
        hosted.note_query();
        assert_eq!(
            hosted.checkpoint_interval(configured),
            QUERIED_CHECKPOINT_INTERVAL
        );
        // A shorter interval of the user's stands.
        let short = Duration::from_millis(200);
        assert_eq!(hosted.checkpoint_interval(short), short);
        // A minute without queries: the configured interval again.
        *lock(&hosted.queried) = Instant::now().checked_sub(QUERIES_COME);
        assert_eq!(hosted.checkpoint_interval(configured), configured);
    }
}
