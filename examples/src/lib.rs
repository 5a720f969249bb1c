//! Examples of eddy live in `examples/`; run one from the workspace root with
//! `cargo run --example NAME`.

pub mod fraud;
pub mod on_broker;
pub mod order_events;
pub mod partition_skew;
pub mod windowed_join;
pub mod word_count;
