//! The log's vocabulary: where a record lives ([`TopicPartition`], [`Offset`]), what it holds
//! ([`Record`], [`Header`], [`Timestamp`]) and how a producer picks its partition
//! ([`murmur2`], [`partition_for_key`], [`StickyPartitioner`]).

mod partitioner;
mod record;

pub use partitioner::{murmur2, partition_for_key, StickyPartitioner};
pub use record::{Header, Offset, Record, Timestamp, TopicPartition};
