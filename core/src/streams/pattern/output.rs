//! What a pattern yields: a match (or a timed-out partial match) — the events each step
//! took, steps in the order of their first event, each event with its timestamp.

use crate::log::Timestamp;

/// An event a step took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatchedEvent<V> {
    /// The event.
    pub value: V,
    /// Its record timestamp.
    pub timestamp: Timestamp,
}

/// The events of one match, by step: steps in the order of their first event, each step's
/// events oldest first. A timed-out partial match has the steps it reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatternMatch<V> {
    /// The steps, with the events each took.
    pub steps: Vec<(String, Vec<MatchedEvent<V>>)>,
}

impl<V> PatternMatch<V> {
    /// The events the step `name` took; empty when it took none.
    pub fn events(&self, name: &str) -> &[MatchedEvent<V>] {
        self.steps
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, e)| e.as_slice())
            .unwrap_or_default()
    }

    /// The timestamp of the match's first event.
    pub fn first_timestamp(&self) -> Option<Timestamp> {
        self.all().map(|e| e.timestamp).min()
    }

    /// The timestamp of the match's last event.
    pub fn last_timestamp(&self) -> Option<Timestamp> {
        self.all().map(|e| e.timestamp).max()
    }

    /// Every event of the match, step by step.
    pub fn all(&self) -> impl Iterator<Item = &MatchedEvent<V>> {
        self.steps.iter().flat_map(|(_, e)| e.iter())
    }
}
