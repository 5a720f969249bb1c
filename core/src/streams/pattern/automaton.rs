//! The automaton a pattern compiles to, as Flink CEP's `State` and `StateTransition` make it:
//! states (start, normal, final, pending, stop), each with transitions that take, ignore or
//! proceed past an event when their condition holds.

use super::builder::AfterMatchSkip;
use super::condition::{Condition, Context};

/// A transition's condition.
pub(crate) enum Guard<V> {
    True,
    Holds(Condition<V>),
    Not(Box<Guard<V>>),
    And(Box<Guard<V>>, Box<Guard<V>>),
}

impl<V> Clone for Guard<V> {
    fn clone(&self) -> Self {
        match self {
            Guard::True => Guard::True,
            Guard::Holds(c) => Guard::Holds(c.clone()),
            Guard::Not(g) => Guard::Not(g.clone()),
            Guard::And(a, b) => Guard::And(a.clone(), b.clone()),
        }
    }
}

impl<V> Guard<V> {
    pub(crate) fn holds(&self, event: &V, ctx: &Context<'_, V>) -> bool {
        match self {
            Guard::True => true,
            Guard::Holds(c) => c.holds(event, ctx),
            Guard::Not(g) => !g.holds(event, ctx),
            Guard::And(a, b) => a.holds(event, ctx) && b.holds(event, ctx),
        }
    }

    /// Whether the guard looks at the event alone.
    pub(crate) fn is_simple(&self) -> bool {
        match self {
            Guard::True => true,
            Guard::Holds(c) => c.is_simple(),
            Guard::Not(g) => g.is_simple(),
            Guard::And(a, b) => a.is_simple() && b.is_simple(),
        }
    }

    /// Whether a guard that [is simple](Self::is_simple) holds for `event`.
    pub(crate) fn holds_simple(&self, event: &V) -> bool {
        match self {
            Guard::True => true,
            Guard::Holds(c) => c.holds_simple(event),
            Guard::Not(g) => !g.holds_simple(event),
            Guard::And(a, b) => a.holds_simple(event) && b.holds_simple(event),
        }
    }

    pub(crate) fn not(self) -> Guard<V> {
        Guard::Not(Box::new(self))
    }

    pub(crate) fn and(self, other: Guard<V>) -> Guard<V> {
        Guard::And(Box::new(self), Box::new(other))
    }
}

/// What a transition does with the event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Take,
    Ignore,
    Proceed,
}

pub(crate) struct Transition<V> {
    pub(crate) action: Action,
    pub(crate) target: usize,
    pub(crate) guard: Guard<V>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Start,
    Normal,
    Final,
    /// Waits for its window to end (a trailing `not_followed_by`).
    Pending,
    /// Reached when a negation is violated: the partial match is dropped.
    Stop,
}

pub(crate) struct State<V> {
    /// Unique among the automaton's states, as Flink names them (`name`, `name:0`, ...).
    pub(crate) name: String,
    /// The step's own name.
    pub(crate) base: String,
    /// The index of the step's name among [`Nfa::names`].
    pub(crate) page: u16,
    pub(crate) kind: Kind,
    pub(crate) transitions: Vec<Transition<V>>,
}

/// A compiled pattern.
pub(crate) struct Nfa<V> {
    pub(crate) states: Vec<State<V>>,
    /// The step names events are grouped by in matches.
    pub(crate) names: Vec<String>,
    /// The smallest `within`, 0 for none.
    pub(crate) window: i64,
    pub(crate) skip: AfterMatchSkip,
}

impl<V> Nfa<V> {
    pub(crate) fn start(&self) -> usize {
        self.states
            .iter()
            .position(|s| s.kind == Kind::Start)
            .unwrap_or(0)
    }
}
