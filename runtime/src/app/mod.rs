//! The streams application: a topology running as members of a consumer group, its tasks'
//! state in stores on disk. So far its settings ([`StreamsConfig`]).

mod config;

pub use config::{Bootstrap, ConfigError, ErrorHandling, ProcessingGuarantee, StreamsConfig};
