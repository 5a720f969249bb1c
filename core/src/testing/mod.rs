//! Testing a topology without a broker: [`TestDriver`] runs it on the same task engine the
//! runtime uses, with input and output topics in memory and a clock the test moves.
//!
//! Unlike Kafka Streams' `TopologyTestDriver`, which runs the whole topology as one task on
//! partition 0, the driver gives every topic partitions (one by default, like Kafka's; more
//! with [`TestDriverBuilder::partitions`]), routes records with the producer's partitioner
//! (murmur2 of the serialized key), and runs one task per sub-topology and partition, so that
//! a topology that re-keys behaves as it does in production: a repartition topic really moves
//! records between tasks, and a store is split by partition.
//!
//! ```
//! use eddy_core::serde::{I64Serde, Nullable, StringSerde};
//! use eddy_core::streams::{Consumed, Grouped, Materialized, Produced, StreamsBuilder};
//! use eddy_core::testing::TestDriver;
//!
//! let builder = StreamsBuilder::new();
//! builder
//!     .stream("clicks", Consumed::with(StringSerde, StringSerde))
//!     .group_by_key(Grouped::default())
//!     .count(Materialized::named("clicks-per-user"))
//!     .to_stream()
//!     .to("counts", Produced::default());
//! let driver = TestDriver::new(builder.build().unwrap()).unwrap();
//! let clicks = driver.create_input_topic("clicks", StringSerde, StringSerde);
//! let counts = driver.create_output_topic("counts", StringSerde, Nullable(I64Serde));
//! clicks.pipe_input("alice".to_string(), "/home".to_string()).unwrap();
//! clicks.pipe_input("alice".to_string(), "/cart".to_string()).unwrap();
//! assert_eq!(counts.read_values_to_list(), [Some(1), Some(2)]);
//! ```

mod driver;
mod stores;
mod topics;

pub use driver::{TestDriver, TestDriverBuilder};
pub use stores::{TestSessionStore, TestWindowStore};
pub use topics::{TestInputTopic, TestKeyValueStore, TestOutputTopic, TestRecord};
