//! The streams application: a topology running as members of a consumer group, its tasks'
//! state in stores on disk. [`Streams`] is the entry point; its settings are a
//! [`StreamsConfig`]; it creates the topics it needs at start ([`topics::plan`],
//! [`create_internal_topics`]), spreads its tasks over the group's members as Kafka
//! Streams' assignor does, and runs them on stream threads, at-least-once or exactly-once,
//! restoring their stores from changelogs and keeping standby copies beside processing.

pub(crate) mod assignor;
mod config;
pub mod metrics;
mod progress;
pub mod query;
mod restore;
mod setup;
mod streams;
mod supervisor;
mod thread;
pub mod topics;

pub use config::{
    Bootstrap, ConfigError, ErrorHandling, ProcessingGuarantee, StateMemory, StreamsConfig,
};
pub use metrics::{MetricsSnapshot, ThreadTime};
pub use progress::{grouped, Progress};
pub use query::{KeyQueryMetadata, KeyValueView, QueryError, WindowView};
pub use restore::RestoreError;
pub use setup::{create_internal_topics, StartError};
pub use streams::{CloseError, State, StateListener, Streams};
pub use supervisor::{ThreadResponse, UncaughtErrorHandler};
pub use thread::ThreadError;
pub use topics::{InternalTopicSpec, TopicError, TopicPlan};
