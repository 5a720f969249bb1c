//! Conditions of a pattern's steps: simple predicates on an event, and iterative ones that
//! also see the events a partial match has already taken ([`Context`]), combined with `and` and
//! `or` as Flink CEP's `where` and `or` combine them.

use std::cell::OnceCell;
use std::sync::Arc;

use super::buffer::{NodeId, SharedBuffer};
use super::version::Version;
use crate::log::Timestamp;

/// A predicate on an event alone.
pub(crate) type SimpleFn<V> = Arc<dyn Fn(&V) -> bool + Send + Sync>;
/// A predicate on an event and the partial match it would extend.
pub(crate) type IterativeFn<V> = Arc<dyn Fn(&V, &Context<'_, V>) -> bool + Send + Sync>;

/// A step's condition as the user wrote it.
pub(crate) enum Condition<V> {
    Simple(SimpleFn<V>),
    Iterative(IterativeFn<V>),
    And(Arc<Condition<V>>, Arc<Condition<V>>),
    Or(Arc<Condition<V>>, Arc<Condition<V>>),
}

impl<V> Clone for Condition<V> {
    fn clone(&self) -> Self {
        match self {
            Condition::Simple(f) => Condition::Simple(f.clone()),
            Condition::Iterative(f) => Condition::Iterative(f.clone()),
            Condition::And(a, b) => Condition::And(a.clone(), b.clone()),
            Condition::Or(a, b) => Condition::Or(a.clone(), b.clone()),
        }
    }
}

impl<V> Condition<V> {
    pub(crate) fn holds(&self, event: &V, ctx: &Context<'_, V>) -> bool {
        match self {
            Condition::Simple(f) => f(event),
            Condition::Iterative(f) => f(event, ctx),
            Condition::And(a, b) => a.holds(event, ctx) && b.holds(event, ctx),
            Condition::Or(a, b) => a.holds(event, ctx) || b.holds(event, ctx),
        }
    }

    /// Whether the condition looks at the event alone (no iterative part).
    pub(crate) fn is_simple(&self) -> bool {
        match self {
            Condition::Simple(_) => true,
            Condition::Iterative(_) => false,
            Condition::And(a, b) | Condition::Or(a, b) => a.is_simple() && b.is_simple(),
        }
    }

    /// Whether a condition that [is simple](Self::is_simple) holds for `event` (an
    /// iterative part, which needs a partial match to look at, holds for none).
    pub(crate) fn holds_simple(&self, event: &V) -> bool {
        match self {
            Condition::Simple(f) => f(event),
            Condition::Iterative(_) => false,
            Condition::And(a, b) => a.holds_simple(event) && b.holds_simple(event),
            Condition::Or(a, b) => a.holds_simple(event) || b.holds_simple(event),
        }
    }

    /// `self` and then `other` (Flink's `where` after a `where`).
    pub(crate) fn and(self, other: Condition<V>) -> Condition<V> {
        Condition::And(Arc::new(self), Arc::new(other))
    }

    /// `self` or `other`.
    pub(crate) fn or(self, other: Condition<V>) -> Condition<V> {
        Condition::Or(Arc::new(self), Arc::new(other))
    }
}

/// What an iterative condition sees besides the event: the events the partial match it
/// would extend has taken so far, by step name, and the event's timestamp (Flink CEP's
/// `IterativeCondition.Context`).
pub struct Context<'a, V> {
    pub(crate) buffer: &'a SharedBuffer<V>,
    pub(crate) entry: Option<NodeId>,
    pub(crate) version: &'a Version,
    pub(crate) timestamp: Timestamp,
    pub(crate) names: &'a [String],
    pub(crate) matched: OnceCell<Vec<(u16, Vec<&'a V>)>>,
}

impl<'a, V> Context<'a, V> {
    /// The events the partial match has taken for the step `name`, oldest first; none when it
    /// took none (or there is no such step).
    pub fn events_for(&self, name: &str) -> impl Iterator<Item = &V> + '_ {
        let matched = self.matched.get_or_init(|| {
            let Some(entry) = self.entry else {
                return Vec::new();
            };
            let paths = self.buffer.extract(entry, self.version);
            let Some(path) = paths.into_iter().next() else {
                return Vec::new();
            };
            path.into_iter()
                .map(|(page, events)| {
                    let values = events
                        .into_iter()
                        .filter_map(|id| self.buffer.event(id))
                        .collect();
                    (page, values)
                })
                .collect()
        });
        let page = self.names.iter().position(|n| n == name);
        matched
            .iter()
            .filter(move |(p, _)| Some(usize::from(*p)) == page)
            .flat_map(|(_, events)| events.iter().copied())
    }

    /// The timestamp of the event the condition is asked about.
    pub fn timestamp(&self) -> Timestamp {
        self.timestamp
    }
}
