//! The driver: topics as in-memory logs, one task per sub-topology and partition, and the
//! loop that runs them until every record piped in (and every record it caused on a
//! repartition topic) has been processed.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use crate::log::{partition_for_key, Record, Timestamp};
use crate::serde::Serde;
use crate::streams::internals::{EmitIntervals, PartitionCounts, StreamTask, TaskConfig};
use crate::streams::{StreamsError, TaskId, Topology, TopologyError};

use super::stores::{TestSessionStore, TestWindowStore};
use super::topics::{TestInputTopic, TestKeyValueStore, TestOutputTopic};

/// A partition of a topic in the driver: its records in offset order.
pub(crate) type PartitionLog = Vec<Record>;

pub(crate) struct Topic {
    pub(crate) partitions: Vec<PartitionLog>,
    /// Every record in the order it was written, as `(partition, offset)`.
    pub(crate) written: Vec<(usize, usize)>,
    round_robin: usize,
}

pub(crate) struct DriverState {
    pub(crate) application_id: String,
    pub(crate) tasks: BTreeMap<TaskId, StreamTask>,
    pub(crate) topics: HashMap<String, Topic>,
    /// Which sub-topology reads each topic (full name), and whether it fills a global store
    /// (then its one task reads every partition).
    readers: HashMap<String, (u32, bool)>,
    default_partitions: i32,
    partitions: HashMap<String, i32>,
    pub(crate) wall_clock: Timestamp,
}

impl DriverState {
    fn partition_count(&self, topic: &str) -> i32 {
        self.partitions
            .get(topic)
            .copied()
            .unwrap_or(self.default_partitions)
    }

    pub(crate) fn topic_mut(&mut self, topic: &str) -> &mut Topic {
        let n = self.partition_count(topic).max(1) as usize;
        self.topics
            .entry(topic.to_string())
            .or_insert_with(|| Topic {
                partitions: vec![Vec::new(); n],
                written: Vec::new(),
                round_robin: 0,
            })
    }

    /// Appends `record` to `topic` (partition chosen by the producer's rules unless given) and
    /// queues it for the task that reads that partition.
    pub(crate) fn write(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        record: Record,
    ) -> Result<(), StreamsError> {
        let t = self.topic_mut(topic);
        let n = t.partitions.len();
        let p = match (partition, &record.key) {
            (Some(p), _) if (p as usize) < n && p >= 0 => p as usize,
            (Some(p), _) => {
                return Err(StreamsError::processor(
                    "test driver",
                    format!("topic {topic} has no partition {p}"),
                ))
            }
            (None, Some(key)) => partition_for_key(key, n as i32) as usize,
            (None, None) => {
                t.round_robin += 1;
                (t.round_robin - 1) % n
            }
        };
        let offset = t.partitions[p].len();
        t.partitions[p].push(record.clone());
        t.written.push((p, offset));
        if let Some(&(sub, global)) = self.readers.get(topic) {
            let id = TaskId {
                subtopology: sub,
                partition: if global { 0 } else { p as i32 },
            };
            if let Some(task) = self.tasks.get_mut(&id) {
                task.add_record(topic, offset as i64, record)?;
            }
        }
        Ok(())
    }

    /// Runs the tasks until nothing is queued: always the record with the smallest timestamp
    /// of all tasks next (a tie goes to the first task), so that one partition behaves as
    /// Kafka's `TopologyTestDriver`.
    pub(crate) fn run(&mut self) -> Result<(), StreamsError> {
        loop {
            let next = self
                .tasks
                .iter()
                .filter_map(|(id, t)| t.next_timestamp().map(|ts| (ts, *id)))
                .min();
            let Some((_, id)) = next else {
                return Ok(());
            };
            let task = self.tasks.get_mut(&id).expect("the task exists");
            task.process()?;
            self.collect(id)?;
        }
    }

    /// Moves what task `id` wrote into the topics.
    pub(crate) fn collect(&mut self, id: TaskId) -> Result<(), StreamsError> {
        let task = self.tasks.get_mut(&id).expect("the task exists");
        // The driver commits after every record, as Kafka's does, and keeps no changelog
        // topics: stores are read directly.
        task.flush_stores()?;
        task.check_stores()?;
        task.clear_changelog();
        task.commit_stores(|_| None);
        let written = task.output().to_records();
        task.clear_output();
        for r in written {
            let record = Record {
                key: r.key,
                value: r.value,
                headers: r.headers,
                timestamp: r.timestamp,
            };
            self.write(&r.topic, r.partition, record)?;
        }
        Ok(())
    }
}

/// Runs a topology with topics in memory. See [the module](super).
pub struct TestDriver {
    pub(crate) state: Rc<RefCell<DriverState>>,
}

impl std::fmt::Debug for TestDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.borrow();
        f.debug_struct("TestDriver")
            .field("application_id", &state.application_id)
            .field("tasks", &state.tasks.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Sets up a [`TestDriver`].
pub struct TestDriverBuilder {
    topology: Topology,
    application_id: String,
    default_partitions: i32,
    partitions: HashMap<String, i32>,
    wall_clock: Timestamp,
}

impl TestDriverBuilder {
    /// The application id (default `"test-driver"`): the prefix of internal topics.
    pub fn application_id(mut self, id: impl Into<String>) -> Self {
        self.application_id = id.into();
        self
    }

    /// The number of partitions of every topic not given its own (default 1).
    pub fn partitions(mut self, partitions: i32) -> Self {
        self.default_partitions = partitions.max(1);
        self
    }

    /// The number of partitions of `topic` (an internal topic by its short name, as
    /// `describe()` prints it).
    pub fn topic_partitions(mut self, topic: &str, partitions: i32) -> Self {
        self.partitions.insert(topic.to_string(), partitions.max(1));
        self
    }

    /// The wall-clock time at start (default 0).
    pub fn wall_clock(mut self, start: Timestamp) -> Self {
        self.wall_clock = start;
        self
    }

    /// The driver, its tasks created and initialized.
    pub fn build(self) -> Result<TestDriver, TopologyError> {
        let app = self.application_id;
        let topology = self.topology;
        let partitions: HashMap<String, i32> = self
            .partitions
            .into_iter()
            .map(|(t, n)| (topology.full_topic_name(&app, &t), n))
            .collect();
        let default_partitions = self.default_partitions;
        let counts = {
            let partitions = partitions.clone();
            Arc::new(move |topic: &str| {
                Some(partitions.get(topic).copied().unwrap_or(default_partitions))
            }) as PartitionCounts
        };
        let config = TaskConfig {
            partitions: Some(counts),
            wall_clock: self.wall_clock,
            // As Kafka's TopologyTestDriver: no emission waits for wall-clock time.
            emit_intervals: EmitIntervals::NONE,
            ..TaskConfig::new(app.clone())
        };
        let mut tasks = BTreeMap::new();
        let mut readers = HashMap::new();
        for sub in topology.subtopologies() {
            let mut count = 1;
            for t in &sub.source_topics {
                let full = topology.full_topic_name(&app, t);
                count = count.max(partitions.get(&full).copied().unwrap_or(default_partitions));
                readers.insert(full, (sub.id, sub.global));
            }
            if sub.global {
                count = 1;
            }
            for p in 0..count {
                let id = TaskId {
                    subtopology: sub.id,
                    partition: p,
                };
                let mut task = StreamTask::new(&topology, id, &config)?;
                task.init().map_err(|e| {
                    TopologyError::Invalid(format!("task {id} failed to start: {e}"))
                })?;
                tasks.insert(id, task);
            }
        }
        Ok(TestDriver {
            state: Rc::new(RefCell::new(DriverState {
                application_id: app,
                tasks,
                topics: HashMap::new(),
                readers,
                default_partitions,
                partitions,
                wall_clock: self.wall_clock,
            })),
        })
    }
}

impl TestDriver {
    /// A driver for `topology` with one partition per topic and the clock at 0.
    pub fn new(topology: Topology) -> Result<Self, TopologyError> {
        Self::builder(topology).build()
    }

    /// Sets up a driver for `topology`.
    pub fn builder(topology: Topology) -> TestDriverBuilder {
        TestDriverBuilder {
            topology,
            application_id: "test-driver".to_string(),
            default_partitions: 1,
            partitions: HashMap::new(),
            wall_clock: 0,
        }
    }

    /// A topic to pipe records into, with the serdes of its keys and values.
    pub fn create_input_topic<K: 'static, V: 'static>(
        &self,
        topic: &str,
        keys: impl Serde<Value = K>,
        values: impl Serde<Value = V>,
    ) -> TestInputTopic<K, V> {
        TestInputTopic::new(self.state.clone(), topic, Arc::new(keys), Arc::new(values))
    }

    /// A topic to read records from, with the serdes of its keys and values; it reads from the
    /// first record the topology wrote there.
    pub fn create_output_topic<K: 'static, V: 'static>(
        &self,
        topic: &str,
        keys: impl Serde<Value = K>,
        values: impl Serde<Value = V>,
    ) -> TestOutputTopic<K, V> {
        TestOutputTopic::new(self.state.clone(), topic, Arc::new(keys), Arc::new(values))
    }

    /// Moves the wall clock forward and runs the wall-clock punctuations that become due.
    pub fn advance_wall_clock_time(&self, millis: i64) -> Result<(), StreamsError> {
        let mut state = self.state.borrow_mut();
        state.wall_clock += millis;
        let now = state.wall_clock;
        let ids: Vec<TaskId> = state.tasks.keys().copied().collect();
        for id in ids {
            state
                .tasks
                .get_mut(&id)
                .expect("the task exists")
                .set_wall_clock(now)?;
            state.collect(id)?;
        }
        state.run()
    }

    /// The key-value store `name`, across all partitions; values of the DSL's stores come
    /// without their timestamps.
    pub fn key_value_store<K: 'static, V: 'static>(&self, name: &str) -> TestKeyValueStore<K, V> {
        TestKeyValueStore::new(self.state.clone(), name)
    }

    /// The window store `name`, across all partitions; values of the DSL's stores come
    /// without their timestamps.
    pub fn window_store<K: 'static, V: 'static>(&self, name: &str) -> TestWindowStore<K, V> {
        TestWindowStore::new(self.state.clone(), name)
    }

    /// The session store `name`, across all partitions.
    pub fn session_store<K: 'static, V: 'static>(&self, name: &str) -> TestSessionStore<K, V> {
        TestSessionStore::new(self.state.clone(), name)
    }

    /// Records dropped on purpose (late for their window), by processor, over all tasks.
    pub fn dropped_records(&self) -> BTreeMap<String, u64> {
        let state = self.state.borrow();
        let mut out = BTreeMap::new();
        for task in state.tasks.values() {
            for (name, count) in task.dropped_records() {
                *out.entry(name).or_insert(0) += count;
            }
        }
        out
    }

    /// The topology's tasks, as `<sub-topology>_<partition>`.
    pub fn tasks(&self) -> Vec<TaskId> {
        self.state.borrow().tasks.keys().copied().collect()
    }

    /// Closes every task (processors' `close`).
    pub fn close(self) -> Result<(), StreamsError> {
        let mut state = self.state.borrow_mut();
        for task in state.tasks.values_mut() {
            task.close()?;
        }
        Ok(())
    }
}
