//! Keyed pattern detection, after Flink CEP: a [`Pattern`] of named steps is compiled into an
//! automaton that runs per key over a stream's events in event-time order, and each match
//! comes out as a [`PatternMatch`] — the events of each step, in order, with their
//! timestamps. [`KStream::match_pattern`](crate::streams::KStream::match_pattern) adds it to
//! a topology; its state (partial matches and the events they share) is kept per key in a
//! changelogged key-value store, so restore, standbys and exactly-once cover it like any
//! other state.
//!
//! The automaton, its branching versions, the after-match skip strategies and the order in
//! which matches leave are Flink CEP's, and are held to it by a reference catalog run beside
//! Flink. A pattern that is a plain sequence of strict single steps runs on a leaner engine
//! with the same results (the `sequence` module).

mod automaton;
mod buffer;
mod builder;
mod compiler;
mod condition;
mod engine;
mod heap;
mod matcher;
mod nfa;
mod output;
mod sequence;
mod state;
#[cfg(test)]
mod tests;
mod timeline;
mod version;

pub use builder::{AfterMatchSkip, Pattern};
pub use condition::Context;
pub use output::{MatchedEvent, PatternMatch};

pub(crate) use compiler::compile;
pub(crate) use matcher::{Matcher, Outputs};
