//! The DSL: [`StreamsBuilder`] starts a topology, [`KStream`] and [`KTable`] carry its
//! operations, [`KGroupedStream`] its aggregations; the option types say how records are read,
//! written, grouped and stored. Each operation adds the nodes Kafka Streams adds, with the
//! names it generates.

mod aggregate;
mod builder;
mod emit_final;
mod getter;
mod global;
mod grouped;
mod grouped_table;
mod kstream;
mod ktable;
mod match_pattern;
mod nulls;
mod ops;
mod options;
mod stream_join;
mod suppress;
mod table_join;
mod window_aggregate;
mod windowed;

pub use builder::StreamsBuilder;
pub use global::GlobalKTable;
pub use grouped::KGroupedStream;
pub use grouped_table::KGroupedTable;
pub use kstream::{BranchedKStream, KStream};
pub use ktable::KTable;
pub use match_pattern::{Matching, PatternStreams};
pub use options::{Consumed, Grouped, Materialized, Named, Produced};
pub use stream_join::StreamJoined;
pub use table_join::Joined;
pub use windowed::{SessionWindowedKStream, TimeWindowedKStream};
