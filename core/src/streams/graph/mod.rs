//! The processor graph, at the bottom of the streams engine: the node trait, the nodes of one
//! task wired as the topology says, and the state they share (stores, the record being
//! processed, stream time, punctuation schedules, the records leaving through sinks), with
//! the context a processor runs in ([`context`]). Records pass from node to node as typed
//! values behind `&mut dyn Any` (no allocation, no serialization); the topology checked at
//! build time that the types match. Everything above — the Processor API, the topology's
//! nodes, the task engine — builds on this module, and it on none of them.

mod context;
mod flush;
mod output;
mod punctuation;

pub(crate) use context::StoreReader;
pub use context::{KeyValueStoreHandle, ProcessorContext, SessionStoreHandle, WindowStoreHandle};
pub(crate) use flush::FlushForwarder;
pub use output::{Output, OutputRecord, SinkRecord, SinkRecords};
pub use punctuation::{Punctuation, PunctuationType, ScheduleId};

use std::any::Any;
use std::sync::Arc;

use crate::log::Timestamp;
use crate::streams::record::RecordMetadata;
pub use crate::streams::store::instance::{SharedStore, StoreInstance};
use crate::streams::store::{Scratch, StoreBuilder};
use crate::streams::StreamsError;

/// What every type that flows through a topology is: cloned when a node has several
/// children, and sent between threads with its task.
pub trait Data: Clone + Send + 'static {}

impl<T: Clone + Send + 'static> Data for T {}

/// The number of partitions of a topic (by full name), when known.
pub type PartitionCounts = Arc<dyn Fn(&str) -> Option<i32> + Send + Sync>;

/// A node of a task: a source, a processor or a sink, with its types erased.
pub(crate) trait Node: Send {
    /// Called once before the first record.
    fn init(&mut self, _graph: &mut Graph, _me: usize) -> Result<(), StreamsError> {
        Ok(())
    }

    /// Takes the record out of `input` (an `Option` of the node's input type) and processes it.
    fn process(
        &mut self,
        input: &mut dyn Any,
        graph: &mut Graph,
        me: usize,
    ) -> Result<(), StreamsError>;

    /// A punctuation this node scheduled is due.
    fn punctuate(
        &mut self,
        _punctuation: Punctuation,
        _graph: &mut Graph,
        _me: usize,
    ) -> Result<(), StreamsError> {
        Ok(())
    }

    /// Called once when the task closes.
    fn close(&mut self, _graph: &mut Graph, _me: usize) -> Result<(), StreamsError> {
        Ok(())
    }
}

/// One node of the task with its wiring.
pub(crate) struct NodeSlot {
    pub(crate) name: Arc<str>,
    /// Whether it reads records (a source) or writes them (a sink): where a failure of its
    /// serdes comes from.
    pub(crate) role: NodeRole,
    /// `None` only while the node is processing (it is taken out to be called).
    pub(crate) node: Option<Box<dyn Node>>,
    pub(crate) children: Vec<usize>,
    /// Indexes into [`TaskState::stores`] of the stores this node may use.
    pub(crate) stores: Vec<usize>,
}

/// What a node does with records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeRole {
    Source,
    Processor,
    Sink,
}

/// A store of the task.
pub(crate) struct StoreSlot {
    pub(crate) definition: StoreBuilder,
    pub(crate) store: StoreInstance,
    /// The changelog topic's full name.
    pub(crate) changelog_topic: Arc<str>,
}

/// A punctuation schedule.
pub(crate) struct Schedule {
    pub(crate) id: ScheduleId,
    pub(crate) node: usize,
    pub(crate) interval: i64,
    pub(crate) kind: PunctuationType,
    pub(crate) next: Timestamp,
    pub(crate) cancelled: bool,
}

/// What the nodes of a task share.
pub(crate) struct TaskState {
    pub(crate) task_id: Arc<str>,
    pub(crate) partition: i32,
    pub(crate) application_id: Arc<str>,
    pub(crate) stores: Vec<StoreSlot>,
    /// The global stores of the topology, which any processor may read.
    pub(crate) globals: Vec<(StoreBuilder, SharedStore)>,
    /// Where the record being processed came from; `None` in a punctuation.
    pub(crate) metadata: Option<RecordMetadata>,
    /// The timestamp of the record being processed, or of the punctuation.
    pub(crate) timestamp: Timestamp,
    /// The largest timestamp the task has processed; -1 before the first.
    pub(crate) stream_time: Timestamp,
    pub(crate) wall_clock: Timestamp,
    /// How often throttled emissions may happen.
    pub(crate) emit_intervals: EmitIntervals,
    pub(crate) schedules: Vec<Schedule>,
    pub(crate) next_schedule: u64,
    pub(crate) output: Output,
    /// Where stores serialize keys for lookups.
    pub(crate) scratch: Scratch,
    /// The first error of the record being processed: the task stops there.
    pub(crate) error: Option<StreamsError>,
    /// The node where that error happened, when known.
    pub(crate) failed_node: Option<usize>,
    /// Records dropped by design (late for their window), by node name.
    pub(crate) dropped: Vec<(Arc<str>, u64)>,
    /// The stores whose writers forward at flush.
    pub(crate) flush_forwarders: Vec<FlushForwarder>,
}

impl TaskState {
    /// Counts a record `node` dropped on purpose.
    pub(crate) fn count_dropped(&mut self, node: &Arc<str>) {
        match self.dropped.iter_mut().find(|(n, _)| n == node) {
            Some((_, count)) => *count += 1,
            None => self.dropped.push((node.clone(), 1)),
        }
    }
}

/// A task's nodes and state.
pub(crate) struct Graph {
    pub(crate) nodes: Vec<NodeSlot>,
    pub(crate) state: TaskState,
}

impl Graph {
    /// Records the first error; later ones are consequences.
    pub(crate) fn fail(&mut self, error: StreamsError) {
        if self.state.error.is_none() {
            self.state.error = Some(error);
        }
    }

    /// Records the first error, which happened in node `node`.
    pub(crate) fn fail_at(&mut self, node: usize, error: StreamsError) {
        if self.state.error.is_none() {
            self.state.error = Some(error);
            self.state.failed_node = Some(node);
        }
    }

    /// Hands `value` (the input type of node `to`) to node `to`.
    #[inline]
    pub(crate) fn deliver<T: 'static>(&mut self, to: usize, value: T) {
        if self.state.error.is_some() {
            return;
        }
        let Some(mut node) = self.nodes[to].node.take() else {
            let name = self.nodes[to].name.to_string();
            self.fail(StreamsError::processor(
                name,
                "a record came back to a node that is still processing",
            ));
            return;
        };
        let mut slot = Some(value);
        if let Err(e) = node.process(&mut slot, self, to) {
            self.fail_at(to, e);
        }
        self.nodes[to].node = Some(node);
    }

    /// Hands the raw record `record` to the source node `to`, which reads it in place.
    pub(crate) fn deliver_raw(&mut self, to: usize, record: &mut crate::log::Record) {
        let Some(mut node) = self.nodes[to].node.take() else {
            return;
        };
        if let Err(e) = node.process(record, self, to) {
            self.fail_at(to, e);
        }
        self.nodes[to].node = Some(node);
    }

    /// Hands `value` to every child of `from`, in the order the children were added; the
    /// last child gets it without a copy.
    #[inline]
    pub(crate) fn forward<T: Clone + 'static>(&mut self, from: usize, value: T) {
        let n = self.nodes[from].children.len();
        if n == 0 {
            return;
        }
        for i in 0..n - 1 {
            let child = self.nodes[from].children[i];
            self.deliver(child, value.clone());
        }
        let last = self.nodes[from].children[n - 1];
        self.deliver(last, value);
    }

    /// Hands `value` to the child of `from` called `child`.
    pub(crate) fn forward_to<T: 'static>(
        &mut self,
        from: usize,
        child: &str,
        value: T,
    ) -> Result<(), StreamsError> {
        let found = self.nodes[from]
            .children
            .iter()
            .copied()
            .find(|&c| &*self.nodes[c].name == child);
        match found {
            Some(c) => {
                self.deliver(c, value);
                Ok(())
            }
            None => Err(StreamsError::UnknownChild {
                processor: self.nodes[from].name.to_string(),
                child: child.to_string(),
            }),
        }
    }

    /// Calls `punctuation` on node `node`.
    pub(crate) fn punctuate(&mut self, node: usize, punctuation: Punctuation) {
        let Some(mut n) = self.nodes[node].node.take() else {
            return;
        };
        if let Err(e) = n.punctuate(punctuation, self, node) {
            self.fail_at(node, e);
        }
        self.nodes[node].node = Some(n);
    }

    /// The index of the store called `name` among those node `node` may use.
    pub(crate) fn store_of(&self, node: usize, name: &str) -> Option<usize> {
        self.nodes[node]
            .stores
            .iter()
            .copied()
            .find(|&s| self.state.stores[s].definition.name() == name)
    }
}

/// How often, in ms of wall-clock time, processors whose emissions Kafka throttles may emit:
/// Kafka's internal settings, 1 s by default in an application and 0 in its
/// `TopologyTestDriver`, so that tests see every emission at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmitIntervals {
    /// Final results of windowed aggregations (emit-on-window-close):
    /// `__emit.interval.ms.kstreams.windowed.aggregation__`.
    pub windowed_aggregation_ms: i64,
    /// Records of a left or outer stream join left without a partner:
    /// `__emit.interval.ms.kstreams.outer.join.spurious.results.fix__`.
    pub outer_join_ms: i64,
}

impl EmitIntervals {
    /// The setting of the windowed aggregations' interval.
    pub const WINDOWED_AGGREGATION_KEY: &'static str =
        "__emit.interval.ms.kstreams.windowed.aggregation__";
    /// The setting of the outer joins' interval.
    pub const OUTER_JOIN_KEY: &'static str =
        "__emit.interval.ms.kstreams.outer.join.spurious.results.fix__";

    /// No throttle: every emission at once, as Kafka's `TopologyTestDriver` has it.
    pub const NONE: Self = Self {
        windowed_aggregation_ms: 0,
        outer_join_ms: 0,
    };
}

impl Default for EmitIntervals {
    /// Kafka's defaults in an application: 1 s each.
    fn default() -> Self {
        Self {
            windowed_aggregation_ms: 1000,
            outer_join_ms: 1000,
        }
    }
}
