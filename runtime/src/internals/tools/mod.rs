//! The operator commands of the `eddy` tool, as functions that return the text to print, so
//! they can be tested (and snapshot-tested) without a process.

pub mod console;
pub mod groups;
mod time;
pub mod topics;
pub mod transactions;

pub use time::parse_datetime;
