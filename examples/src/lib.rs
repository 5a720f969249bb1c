//! Examples of eddy live in `examples/`; run one from the workspace root with
//! `cargo run --example NAME`.

pub mod fraud;
