//! The streams engine, as Kafka Streams defines it, with nothing that does I/O:
//!
//! - the DSL ([`StreamsBuilder`], [`KStream`], [`KTable`], grouped streams) and the
//!   [`Topology`] it builds, printed by [`Topology::describe`] in Kafka's exact text;
//! - the Processor API ([`Processor`], [`ProcessorContext`]) for processors of one's own;
//! - the stores ([`store`]) and windows ([`windows`]) stateful operations are built on;
//! - apart, in [`internals`], the task engine ([`internals::StreamTask`]): one sub-topology
//!   for one partition, a deterministic machine that takes input records and yields output
//!   records and changelog records.
//!
//! Inside a sub-topology records pass between processors as typed values; they become bytes
//! only at sinks, repartition topics and stores.

mod dsl;
mod error;
mod graph;
pub mod pattern;
mod processor;
mod record;
mod reuse;
pub mod store;
mod task;
mod topology;
mod windowed;
pub mod windows;

pub use dsl::{
    BranchedKStream, Consumed, GlobalKTable, Grouped, Joined, KGroupedStream, KGroupedTable,
    KStream, KTable, Matching, Materialized, Named, PatternStreams, Produced,
    SessionWindowedKStream, StreamJoined, StreamsBuilder, TimeWindowedKStream,
};
pub use error::{StreamsError, TopologyError};
pub use processor::{
    Data, KeyValueStoreHandle, Processor, ProcessorContext, Punctuation, PunctuationType,
    ScheduleId, SessionStoreHandle, WindowStoreHandle,
};
pub use record::{Change, Record, RecordMetadata};
pub use task::TaskId;
pub use topology::{StreamPartitioner, TimestampExtractor, TopicNameExtractor};
pub use topology::{Topology, TopologyDescription};

/// The engine's own types, apart from what a topology's author uses (as Kafka Streams keeps
/// them in `internals`): the task engine ([`StreamTask`](internals::StreamTask): one
/// sub-topology for one partition, a deterministic machine that takes input records and
/// yields output and changelog records), its settings and outputs, its stores
/// ([`StoreInstance`](internals::StoreInstance)) and the rules of each kind of store
/// ([`KindRules`](internals::KindRules)), and the topology's sub-topologies and internal
/// topics. The streams runtime and the `TestDriver` build on them.
pub mod internals {
    pub use super::store::kind::KindRules;
    pub use super::task::{
        EmitIntervals, ErrorOrigin, FailedRecord, GlobalStores, Output, OutputRecord,
        PartitionCounts, SharedStore, SinkRecord, SinkRecords, StoreInstance, StreamTask,
        TaskConfig,
    };
    pub use super::topology::{InternalTopic, InternalTopicKind, Subtopology};
}
pub use windowed::{SessionWindowedSerde, TimeWindowedSerde, Windowed};
