//! A key's automaton as the matcher runs it: the general automaton, or a sequence's runs
//! when the pattern is one (see [`super::sequence`]), behind one interface.

use super::automaton::Nfa;
use super::nfa::{Advanced, Computation, KeyNfa, Scratch};
use super::output::PatternMatch;
use super::sequence::{Runs, Sequence};
use crate::log::Timestamp;

/// A key's automaton: the general one, or a sequence's runs.
pub(crate) enum Automaton<V> {
    General(KeyNfa<V>),
    Sequence(Runs<V>),
}

impl<V: Clone> Automaton<V> {
    /// A new key's automaton: a sequence's runs when the pattern is one.
    pub(crate) fn new(nfa: &Nfa<V>, sequence: Option<&Sequence<V>>) -> Self {
        match sequence {
            Some(_) => Automaton::Sequence(Runs::default()),
            None => Automaton::General(KeyNfa::new(nfa)),
        }
    }

    /// Whether the automaton holds no partial match.
    pub(crate) fn is_idle(&self, nfa: &Nfa<V>) -> bool {
        match self {
            Automaton::General(key) => key.is_idle(nfa),
            Automaton::Sequence(runs) => runs.is_idle(),
        }
    }

    /// When the earliest partial match times out.
    pub(crate) fn deadline(&self, nfa: &Nfa<V>) -> Option<Timestamp> {
        match self {
            Automaton::General(key) => key.deadline(nfa),
            Automaton::Sequence(runs) => runs.deadline(nfa),
        }
    }

    /// Feeds one event; the matches it completes, in the order they leave.
    pub(crate) fn process(
        &mut self,
        nfa: &Nfa<V>,
        sequence: Option<&Sequence<V>>,
        scratch: &mut Scratch,
        event: &V,
        timestamp: Timestamp,
    ) -> Vec<PatternMatch<V>> {
        match (self, sequence) {
            (Automaton::General(key), _) => key.process(nfa, scratch, event, timestamp),
            (Automaton::Sequence(runs), Some(sequence)) => runs
                .process(nfa, sequence, event, timestamp)
                .into_iter()
                .collect(),
            (Automaton::Sequence(_), None) => Vec::new(),
        }
    }

    /// Moves time to `timestamp` (see [`KeyNfa::advance_time`]).
    pub(crate) fn advance_time(
        &mut self,
        nfa: &Nfa<V>,
        sequence: Option<&Sequence<V>>,
        timestamp: Timestamp,
        timeouts: bool,
    ) -> Advanced<V> {
        match (self, sequence) {
            (Automaton::General(key), _) => key.advance_time(nfa, timestamp, timeouts),
            (Automaton::Sequence(runs), Some(sequence)) => {
                runs.advance_time(nfa, sequence, timestamp, timeouts)
            }
            (Automaton::Sequence(_), None) => (Vec::new(), Vec::new()),
        }
    }

    /// Whether a state read back from the store is one this pattern can run: of its kind,
    /// in states it has.
    pub(crate) fn fits(&self, nfa: &Nfa<V>, sequence: Option<&Sequence<V>>) -> bool {
        match (self, sequence) {
            (Automaton::General(key), None) => {
                let known = |c: &Computation| usize::from(c.state) < nfa.states.len();
                key.partial.iter().all(known) && key.completed.iter().all(known)
            }
            (Automaton::Sequence(runs), Some(sequence)) => runs
                .runs
                .iter()
                .all(|r| !r.is_empty() && r.len() < sequence.len()),
            _ => false,
        }
    }
}
