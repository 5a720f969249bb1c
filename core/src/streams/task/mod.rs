//! The task engine: one sub-topology for one partition number, as a synchronous and
//! deterministic machine. The caller hands it input records ([`StreamTask::add_record`]) and
//! turns the crank ([`StreamTask::process`]); it takes the next record from the input with the
//! smallest head timestamp, advances stream time, runs the record through the processors, and
//! keeps what leaves: records for sinks and repartition topics ([`StreamTask::output`])
//! and store writes for changelog topics ([`StreamTask::changelog`]). Punctuations run
//! on stream time as records are processed and on wall-clock time when the caller moves the
//! clock. The `TestDriver` and the runtime drive the same engine.

mod failure;
mod stores;

use crate::streams::store::CacheBudget;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

pub use self::failure::{ErrorOrigin, FailedRecord};
use crate::log::{Offset, Timestamp};
pub use crate::streams::graph::{
    EmitIntervals, Output, OutputRecord, PartitionCounts, SharedStore, SinkRecord, SinkRecords,
    StoreInstance,
};
use crate::streams::graph::{
    Graph, NodeRole, NodeSlot, Punctuation, PunctuationType, StoreSlot, TaskState,
};
use crate::streams::record::RecordMetadata;
use crate::streams::store::{InMemoryStores, StoreBuilder, StoreSupplier};
use crate::streams::topology::{BuildContext, NodeKind, TimestampExtractor, Topology};
use crate::streams::{StreamsError, TopologyError};

/// The records an input queue keeps room for once emptied.
const KEPT_QUEUED: usize = 256;

/// The global stores of an application instance, shared by its tasks: created by the first
/// task that needs one.
#[derive(Clone, Default)]
pub struct GlobalStores(Arc<Mutex<HashMap<String, SharedStore>>>);

impl GlobalStores {
    fn get_or_create(
        &self,
        definition: &StoreBuilder,
        supplier: &dyn StoreSupplier,
    ) -> SharedStore {
        let mut stores = self.0.lock().unwrap_or_else(|e| e.into_inner());
        stores
            .entry(definition.name().to_string())
            .or_insert_with(|| {
                let inner = supplier.inner("global", definition);
                match StoreInstance::build(definition, inner, None, false) {
                    StoreInstance::Shared(store) => store,
                    _ => unreachable!("a global store is shared"),
                }
            })
            .clone()
    }
}

/// How a task is set up.
#[derive(Clone)]
pub struct TaskConfig {
    /// The application id: the prefix of internal topics.
    pub application_id: String,
    /// Builds the task's stores.
    pub stores: Arc<dyn StoreSupplier>,
    /// Partition counts, for sinks with a custom partitioner.
    pub partitions: Option<PartitionCounts>,
    /// The wall-clock time at start.
    pub wall_clock: Timestamp,
    /// The instance's global stores.
    pub globals: GlobalStores,
    /// How often throttled emissions may happen.
    pub emit_intervals: EmitIntervals,
    /// What the task's record caches draw from together: a budget of their own, or a
    /// stream thread's, shared with its other tasks (`statestore.cache.max.bytes` over the
    /// threads, as Kafka's thread cache). `None`, the default, caches nothing, so every
    /// update is forwarded and logged at once, as in Kafka's `TopologyTestDriver`.
    pub cache: Option<CacheBudget>,
    /// Whether the task's stores hold their writes until a commit is acknowledged
    /// (exactly-once).
    pub write_buffer: bool,
}

impl TaskConfig {
    /// A configuration with in-memory stores and the wall clock at 0.
    pub fn new(application_id: impl Into<String>) -> Self {
        Self {
            application_id: application_id.into(),
            stores: Arc::new(InMemoryStores),
            partitions: None,
            wall_clock: 0,
            globals: GlobalStores::default(),
            emit_intervals: EmitIntervals::default(),
            cache: None,
            write_buffer: false,
        }
    }
}

/// A task's name, as Kafka prints it: `<sub-topology>_<partition>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId {
    /// The sub-topology.
    pub subtopology: u32,
    /// The partition number.
    pub partition: i32,
}

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}_{}", self.subtopology, self.partition)
    }
}

struct InputQueue {
    topic: Arc<str>,
    node: usize,
    extractor: Option<Arc<dyn TimestampExtractor>>,
    records: VecDeque<(Offset, Timestamp, crate::log::Record)>,
    partition_time: Timestamp,
}

/// One sub-topology running for one partition number.
pub struct StreamTask {
    id: TaskId,
    graph: Graph,
    inputs: Vec<InputQueue>,
    /// The record the last failed `process` failed on.
    failed: Option<FailedRecord>,
}

impl StreamTask {
    /// The task `id` of `topology`.
    pub fn new(
        topology: &Topology,
        id: TaskId,
        config: &TaskConfig,
    ) -> Result<Self, TopologyError> {
        let groups = topology.groups();
        let Some(members) = groups.get(id.subtopology as usize) else {
            return Err(TopologyError::Invalid(format!(
                "the topology has no sub-topology {}",
                id.subtopology
            )));
        };
        let ctx = BuildContext {
            application_id: &config.application_id,
            topology,
            partitions: config.partitions.clone(),
        };
        let task_name: Arc<str> = Arc::from(id.to_string());
        let mut stores = Vec::new();
        let mut nodes = Vec::with_capacity(members.len());
        let mut inputs = Vec::new();
        for (local, &global) in members.iter().enumerate() {
            let def = &topology.nodes[global];
            let children = members
                .iter()
                .enumerate()
                .filter(|(_, &m)| topology.nodes[m].parents.contains(&global))
                .map(|(i, _)| i)
                .collect();
            let mut node_stores = Vec::new();
            for name in &def.stores {
                let index = match stores
                    .iter()
                    .position(|s: &StoreSlot| s.definition.name() == name)
                {
                    Some(i) => i,
                    None => {
                        let definition = topology
                            .stores
                            .iter()
                            .find(|s| s.name() == name)
                            .cloned()
                            .ok_or_else(|| TopologyError::Invalid(format!("no store {name}")))?;
                        let store = if definition.is_global() {
                            StoreInstance::Shared(
                                config.globals.get_or_create(&definition, &*config.stores),
                            )
                        } else {
                            StoreInstance::build(
                                &definition,
                                config.stores.inner(&task_name, &definition),
                                config.cache.clone(),
                                config.write_buffer,
                            )
                        };
                        stores.push(StoreSlot {
                            store,
                            changelog_topic: Arc::from(format!(
                                "{}-{}-changelog",
                                config.application_id, name
                            )),
                            definition,
                        });
                        stores.len() - 1
                    }
                };
                node_stores.push(index);
            }
            if let NodeKind::Source { topics, extractor } = &def.kind {
                for t in topics {
                    inputs.push(InputQueue {
                        topic: ctx.topic(t),
                        node: local,
                        extractor: extractor.clone(),
                        records: VecDeque::new(),
                        partition_time: -1,
                    });
                }
            }
            let role = match &def.kind {
                NodeKind::Source { .. } => NodeRole::Source,
                NodeKind::Sink { .. } => NodeRole::Sink,
                _ => NodeRole::Processor,
            };
            nodes.push(NodeSlot {
                name: Arc::from(def.name.as_str()),
                role,
                node: Some((def.factory)(&ctx)),
                children,
                stores: node_stores,
            });
        }
        let globals = topology
            .stores
            .iter()
            .filter(|s| s.is_global())
            .map(|d| (d.clone(), config.globals.get_or_create(d, &*config.stores)))
            .collect();
        let graph = Graph {
            nodes,
            state: TaskState {
                globals,
                task_id: task_name,
                partition: id.partition,
                application_id: Arc::from(config.application_id.as_str()),
                stores,
                metadata: None,
                timestamp: -1,
                stream_time: -1,
                wall_clock: config.wall_clock,
                emit_intervals: config.emit_intervals,
                schedules: Vec::new(),
                next_schedule: 0,
                output: Output::default(),
                scratch: Default::default(),
                error: None,
                failed_node: None,
                dropped: Vec::new(),
                flush_forwarders: Vec::new(),
            },
        };
        Ok(Self {
            id,
            graph,
            inputs,
            failed: None,
        })
    }

    /// Calls every processor's `init`, in the order the nodes were added.
    pub fn init(&mut self) -> Result<(), StreamsError> {
        for i in 0..self.graph.nodes.len() {
            let Some(mut node) = self.graph.nodes[i].node.take() else {
                continue;
            };
            let result = node.init(&mut self.graph, i);
            self.graph.nodes[i].node = Some(node);
            result?;
        }
        Ok(())
    }

    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// The full names of the topics the task reads (one partition of each: its own).
    pub fn input_topics(&self) -> Vec<Arc<str>> {
        self.inputs.iter().map(|q| q.topic.clone()).collect()
    }

    /// Queues a record read at `offset` of this task's partition of `topic`.
    pub fn add_record(
        &mut self,
        topic: &str,
        offset: Offset,
        record: crate::log::Record,
    ) -> Result<(), StreamsError> {
        self.add_records(topic, std::iter::once((offset, record)))
    }

    /// Queues a batch of records of `topic` with their offsets, as a fetch hands them over:
    /// the same as [`StreamTask::add_record`] for each, with the input found once.
    pub fn add_records(
        &mut self,
        topic: &str,
        records: impl IntoIterator<Item = (Offset, crate::log::Record)>,
    ) -> Result<(), StreamsError> {
        let Some(queue) = self.inputs.iter_mut().find(|q| &*q.topic == topic) else {
            return Err(StreamsError::processor(
                format!("task {}", self.id),
                format!("reads no topic {topic}"),
            ));
        };
        let records = records.into_iter();
        queue.records.reserve(records.size_hint().0);
        for (offset, record) in records {
            let timestamp = match &queue.extractor {
                Some(e) => e.extract(&record, queue.partition_time),
                None => record.timestamp,
            };
            queue.partition_time = queue.partition_time.max(timestamp);
            queue.records.push_back((offset, timestamp, record));
        }
        Ok(())
    }

    /// The smallest timestamp at the head of an input queue: the record `process` takes next.
    pub fn next_timestamp(&self) -> Option<Timestamp> {
        self.inputs
            .iter()
            .filter_map(|q| q.records.front().map(|r| r.1))
            .min()
    }

    /// How many input topics the task reads (of its partition number).
    pub fn input_count(&self) -> usize {
        self.inputs.len()
    }

    /// The input topics whose queues are empty, by their place among the inputs: while one
    /// of them may still have records on the broker, the next record by timestamp is not
    /// known (Kafka Streams' `max.task.idle.ms`).
    pub fn empty_inputs(&self) -> impl Iterator<Item = (usize, &str)> + '_ {
        self.inputs
            .iter()
            .enumerate()
            .filter(|(_, q)| q.records.is_empty())
            .map(|(i, q)| (i, &*q.topic))
    }

    /// The offset of the first record of `topic` queued and not yet processed: where the
    /// task's progress in that input stands while records wait.
    pub fn next_queued_offset(&self, topic: &str) -> Option<Offset> {
        let queue = self.inputs.iter().find(|q| &*q.topic == topic)?;
        queue.records.front().map(|r| r.0)
    }

    /// Records queued and not yet processed.
    pub fn queued(&self) -> usize {
        self.inputs.iter().map(|q| q.records.len()).sum()
    }

    /// Processes the queued record with the smallest timestamp (the first input wins a tie),
    /// then any stream-time punctuation it makes due. `Ok(false)` when nothing was queued.
    pub fn process(&mut self) -> Result<bool, StreamsError> {
        let mut best: Option<(usize, Timestamp)> = None;
        for (i, q) in self.inputs.iter().enumerate() {
            if let Some(&(_, ts, _)) = q.records.front() {
                if best.is_none_or(|(_, b)| ts < b) {
                    best = Some((i, ts));
                }
            }
        }
        let Some((i, timestamp)) = best else {
            return Ok(false);
        };
        let queue = &mut self.inputs[i];
        let (offset, _, mut record) = queue.records.pop_front().expect("the queue has a head");
        if queue.records.is_empty() {
            // A queue of many that once took a large poll does not hold its room while idle.
            queue.records.shrink_to(KEPT_QUEUED);
        }
        let node = queue.node;
        if timestamp < 0 {
            self.failed = None;
            return Err(StreamsError::InvalidTimestamp {
                topic: queue.topic.to_string(),
                partition: self.id.partition,
                offset,
                timestamp,
            });
        }
        let state = &mut self.graph.state;
        state.stream_time = state.stream_time.max(timestamp);
        state.timestamp = timestamp;
        // The topic is shared: only a record of another input takes a new reference to it.
        match &mut state.metadata {
            Some(m) if Arc::ptr_eq(&m.topic, &queue.topic) => m.offset = offset,
            metadata => {
                *metadata = Some(RecordMetadata {
                    topic: queue.topic.clone(),
                    partition: self.id.partition,
                    offset,
                })
            }
        }
        self.graph.deliver_raw(node, &mut record);
        if !self.graph.state.flush_forwarders.is_empty() {
            // What the record's writes evicted from a cache goes on now.
            self.graph.forward_flushed();
        }
        if let Some(e) = self.graph.state.error.take() {
            // The source reads the raw key and value in place: they are still the record's.
            self.failed = self.failure_of(&e, i, offset, timestamp, record);
            return Err(e);
        }
        drop(record);
        let now = self.graph.state.stream_time;
        self.punctuate(PunctuationType::StreamTime, now)?;
        Ok(true)
    }

    /// Where the record that failed failed: `None` for errors that are not a record's
    /// (a punctuation, an invalid timestamp).
    fn failure_of(
        &mut self,
        error: &StreamsError,
        input: usize,
        offset: Offset,
        timestamp: Timestamp,
        record: crate::log::Record,
    ) -> Option<FailedRecord> {
        let node = self.graph.state.failed_node.take()?;
        let slot = &self.graph.nodes[node];
        let serde = matches!(error, StreamsError::Serde(_));
        let origin = match slot.role {
            NodeRole::Source if serde => ErrorOrigin::Deserialization,
            NodeRole::Sink if serde => ErrorOrigin::Serialization,
            _ => ErrorOrigin::Processing,
        };
        Some(FailedRecord {
            origin,
            processor: slot.name.to_string(),
            topic: self.inputs[input].topic.clone(),
            partition: self.id.partition,
            offset,
            timestamp,
            key: record.key,
            value: record.value,
        })
    }

    /// The record the last failed [`StreamTask::process`] failed on, and where: what error
    /// handlers decide on and a dead-letter record carries. Taken; `None` when the error
    /// was not a record's.
    pub fn take_failed_record(&mut self) -> Option<FailedRecord> {
        self.failed.take()
    }

    /// Moves the task's wall clock to `now` and runs the wall-clock punctuations due.
    pub fn set_wall_clock(&mut self, now: Timestamp) -> Result<(), StreamsError> {
        self.graph.state.wall_clock = now;
        self.punctuate(PunctuationType::WallClockTime, now)
    }

    /// The task's stream time (-1 before its first record).
    pub fn stream_time(&self) -> Timestamp {
        self.graph.state.stream_time
    }

    /// The records sinks wrote since the output was last cleared, in the order they were
    /// written.
    pub fn output(&self) -> &Output {
        &self.graph.state.output
    }

    /// Forgets the output once the caller has taken it (the buffers are kept).
    pub fn clear_output(&mut self) {
        self.graph.state.output.clear();
    }

    /// Records dropped on purpose (late for their window), by processor name.
    pub fn dropped_records(&self) -> Vec<(String, u64)> {
        self.graph
            .state
            .dropped
            .iter()
            .map(|(n, c)| (n.to_string(), *c))
            .collect()
    }

    /// Calls every processor's `close`.
    pub fn close(&mut self) -> Result<(), StreamsError> {
        for i in 0..self.graph.nodes.len() {
            let Some(mut node) = self.graph.nodes[i].node.take() else {
                continue;
            };
            let result = node.close(&mut self.graph, i);
            self.graph.nodes[i].node = Some(node);
            result?;
        }
        Ok(())
    }

    fn punctuate(&mut self, kind: PunctuationType, now: Timestamp) -> Result<(), StreamsError> {
        if now < 0 || self.graph.state.schedules.is_empty() {
            return Ok(());
        }
        loop {
            let due = self
                .graph
                .state
                .schedules
                .iter()
                .filter(|s| s.kind == kind && !s.cancelled && s.next <= now)
                .min_by_key(|s| (s.next, s.id))
                .map(|s| (s.id, s.node));
            let Some((id, node)) = due else {
                return Ok(());
            };
            let saved = self.graph.state.metadata.take();
            self.graph.state.timestamp = now;
            self.graph.punctuate(
                node,
                Punctuation {
                    schedule: id,
                    kind,
                    timestamp: now,
                },
            );
            self.graph.state.metadata = saved;
            if let Some(s) = self.graph.state.schedules.iter_mut().find(|s| s.id == id) {
                // As Kafka's `PunctuationSchedule.next`: the next multiple of the interval
                // from the schedule's start after `now`, missed punctuations not made up.
                let missed = now.saturating_sub(s.next) / s.interval;
                s.next = s
                    .next
                    .saturating_add(missed.saturating_add(1).saturating_mul(s.interval));
            }
            if let Some(e) = self.graph.state.error.take() {
                // A punctuation's failure is no record's.
                self.graph.state.failed_node = None;
                return Err(e);
            }
        }
    }
}
