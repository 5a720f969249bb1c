//! The streams application: a topology running as members of a consumer group, its tasks'
//! state in stores on disk. So far its settings ([`StreamsConfig`]) and the topics it needs
//! ([`topics::plan`]), created at start ([`create_internal_topics`]).

pub mod assignor;
mod config;
#[cfg(test)]
mod fixtures;
mod setup;
pub mod topics;

pub use config::{Bootstrap, ConfigError, ErrorHandling, ProcessingGuarantee, StreamsConfig};
pub use setup::{create_internal_topics, StartError};
pub use topics::{InternalTopicSpec, TopicError, TopicPlan};
