//! Running a compiled pattern over one key's events, as Flink CEP's `NFA` runs it: each
//! partial match (a computation state) takes, ignores or proceeds past each event, branching
//! under new Dewey versions; completed matches leave in the order the after-match skip
//! strategy allows; time passing times partial matches out.

use std::cell::OnceCell;
use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use super::automaton::{Action, Kind, Nfa};
use super::buffer::{EventId, NodeId, Path, SharedBuffer};
use super::builder::AfterMatchSkip;
use super::condition::Context;
use super::heap::{HeapOrder, JavaHeap};
use super::output::{MatchedEvent, PatternMatch};
use super::version::Version;
use crate::log::Timestamp;

/// A partial match: the state it is in, the last event it took, its version, and when it
/// started (Flink's `ComputationState`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Computation {
    pub(crate) state: u16,
    pub(crate) previous: Option<NodeId>,
    pub(crate) version: Version,
    pub(crate) start_timestamp: Timestamp,
    pub(crate) previous_timestamp: Timestamp,
    pub(crate) start_event: Option<EventId>,
}

impl Computation {
    fn start(state: u16, version: Version) -> Self {
        Computation {
            state,
            previous: None,
            version,
            start_timestamp: -1,
            previous_timestamp: -1,
            start_event: None,
        }
    }
}

impl HeapOrder for Computation {
    /// By the start event's timestamp, then its place; a start state last.
    fn heap_cmp(&self, other: &Self) -> Ordering {
        let key = |c: &Computation| match c.start_event {
            Some(e) => (e.timestamp, i64::from(e.seq.number())),
            None => (i64::MAX, i64::from(i32::MAX)),
        };
        key(self).cmp(&key(other))
    }
}

/// A match or timed-out partial match read from the buffer: the events of each step.
type Found = Path;

/// What moving time yields: matches completed, and timed-out partial matches with the time
/// they timed out at.
pub(crate) type Advanced<V> = (Vec<PatternMatch<V>>, Vec<(PatternMatch<V>, Timestamp)>);

/// One key's automaton state: its partial matches, matches waiting for earlier partial
/// matches to finish (under a skip strategy), and the shared buffer of their events.
pub(crate) struct KeyNfa<V> {
    pub(crate) partial: JavaHeap<Computation>,
    pub(crate) completed: JavaHeap<Computation>,
    pub(crate) buffer: SharedBuffer<V>,
}

/// Vectors the automaton reuses from event to event instead of allocating them anew.
#[derive(Default)]
pub(crate) struct Scratch {
    edges: Vec<(usize, usize)>,
    stack: Vec<usize>,
    next: Vec<Computation>,
    /// The room of the queue an event replaced, for the queue of the next event.
    queue: Vec<Computation>,
}

/// The event being processed, registered in the buffer the first time a step takes it.
struct Incoming<'e, V> {
    value: &'e V,
    timestamp: Timestamp,
    id: Option<EventId>,
}

fn index(state: usize) -> u16 {
    u16::try_from(state).unwrap_or(u16::MAX)
}

impl<V: Clone> KeyNfa<V> {
    /// A key's state before its first event: the start state alone.
    pub(crate) fn new(nfa: &Nfa<V>) -> Self {
        let mut partial = JavaHeap::default();
        partial.push(Computation::start(index(nfa.start()), Version::new(1)));
        KeyNfa {
            partial,
            completed: JavaHeap::default(),
            buffer: SharedBuffer::default(),
        }
    }

    /// Back to the state before the first event, the vectors' room kept.
    pub(crate) fn reset(&mut self, nfa: &Nfa<V>) {
        let mut partial = std::mem::take(&mut self.partial).into_emptied();
        partial.push(Computation::start(index(nfa.start()), Version::new(1)));
        self.partial = JavaHeap::from_array(partial);
        self.completed = JavaHeap::from_array(std::mem::take(&mut self.completed).into_emptied());
        self.buffer.clear();
    }

    /// Whether the key holds nothing but the start state (its state can go).
    pub(crate) fn is_idle(&self, nfa: &Nfa<V>) -> bool {
        self.completed.is_empty()
            && self.partial.len() == 1
            && self
                .partial
                .peek()
                .is_some_and(|c| nfa.states[usize::from(c.state)].kind == Kind::Start)
    }

    /// When the earliest partial match times out, if the pattern has a window (matches
    /// waiting on partial matches go when those do).
    pub(crate) fn deadline(&self, nfa: &Nfa<V>) -> Option<Timestamp> {
        if nfa.window <= 0 {
            return None;
        }
        self.partial
            .iter()
            .filter(|c| nfa.states[usize::from(c.state)].kind != Kind::Start)
            .map(|c| c.start_timestamp.saturating_add(nfa.window))
            .min()
    }

    /// Feeds one event; the matches it completes, in the order they leave.
    pub(crate) fn process(
        &mut self,
        nfa: &Nfa<V>,
        scratch: &mut Scratch,
        event: &V,
        timestamp: Timestamp,
    ) -> Vec<PatternMatch<V>> {
        let mut incoming = Incoming {
            value: event,
            timestamp,
            id: None,
        };
        let mut partials = JavaHeap::from_array(std::mem::take(&mut scratch.queue));
        let mut potential = JavaHeap::default();
        let current = std::mem::take(&mut self.partial);
        let mut next = std::mem::take(&mut scratch.next);
        for computation in current.iter() {
            self.compute_next_states(nfa, scratch, computation, &mut incoming, &mut next);
            // A path reaching a stop state is discarded whole: its other states released
            // rather than kept.
            let kind = |c: &Computation| nfa.states[usize::from(c.state)].kind;
            let discard = next.iter().any(|c| kind(c) == Kind::Stop);
            for state in next.drain(..) {
                match kind(&state) {
                    Kind::Final => potential.push(state),
                    _ if discard => {
                        if let Some(previous) = state.previous {
                            self.buffer.release_node(previous, &state.version);
                        }
                    }
                    _ => partials.push(state),
                }
            }
        }
        scratch.next = next;
        let mut result = Vec::new();
        self.complete(nfa, potential, &mut partials, &mut result);
        self.partial = partials;
        scratch.queue = current.into_emptied();
        if let Some(id) = incoming.id {
            self.buffer.release_event(id);
        }
        result
    }

    /// Moves time to `timestamp`: partial matches whose window has passed time out (and a
    /// pending state waiting for its window completes). Returns the matches completed and,
    /// when `timeouts`, the timed-out partial matches with the time they timed out at.
    pub(crate) fn advance_time(
        &mut self,
        nfa: &Nfa<V>,
        timestamp: Timestamp,
        timeouts: bool,
    ) -> Advanced<V> {
        let mut timed_out = Vec::new();
        let expires = |c: &Computation| {
            nfa.window > 0
                && nfa.states[usize::from(c.state)].kind != Kind::Start
                && timestamp.saturating_sub(c.start_timestamp) >= nfa.window
        };
        if !self.partial.iter().any(expires) {
            // Nothing times out: the queue stays as it is (rebuilding it would give the same
            // array, as every item would be pushed back in order).
            return (Vec::new(), timed_out);
        }
        let mut partials = JavaHeap::default();
        let mut potential = JavaHeap::default();
        let current = std::mem::take(&mut self.partial);
        for computation in current.iter() {
            let kind = nfa.states[usize::from(computation.state)].kind;
            let expired = kind != Kind::Start
                && nfa.window > 0
                && timestamp.saturating_sub(computation.start_timestamp) >= nfa.window;
            if !expired {
                partials.push(computation.clone());
                continue;
            }
            if kind == Kind::Pending {
                potential.push(computation.clone());
                continue;
            }
            if timeouts {
                let found = self.materialize(nfa, &self.current_match(computation));
                timed_out.push((found, computation.start_timestamp + nfa.window));
            }
            if let Some(previous) = computation.previous {
                self.buffer.release_node(previous, &computation.version);
            }
        }
        let mut result = Vec::new();
        self.complete(nfa, potential, &mut partials, &mut result);
        self.partial = partials;
        (result, timed_out)
    }

    /// The events of a path, read before the buffer lets them go.
    fn materialize(&self, nfa: &Nfa<V>, path: &Found) -> PatternMatch<V> {
        let steps = path
            .iter()
            .map(|(page, ids)| {
                let name = nfa
                    .names
                    .get(usize::from(*page))
                    .cloned()
                    .unwrap_or_default();
                let events = ids
                    .iter()
                    .filter_map(|&id| {
                        self.buffer.event(id).map(|v| MatchedEvent {
                            value: v.clone(),
                            timestamp: id.timestamp,
                        })
                    })
                    .collect();
                (name, events)
            })
            .collect();
        PatternMatch { steps }
    }

    fn current_match(&self, computation: &Computation) -> Found {
        let Some(previous) = computation.previous else {
            return Vec::new();
        };
        self.buffer
            .extract(previous, &computation.version)
            .into_iter()
            .next()
            .unwrap_or_default()
    }

    /// Flink's `processMatchesAccordingToSkipStrategy`.
    fn complete(
        &mut self,
        nfa: &Nfa<V>,
        potential: JavaHeap<Computation>,
        partials: &mut JavaHeap<Computation>,
        result: &mut Vec<PatternMatch<V>>,
    ) {
        let mut potential = potential;
        for state in potential.drain() {
            self.completed.push(state);
        }
        let skips = nfa.skip != AfterMatchSkip::NoSkip;
        while let Some(earliest) = self.completed.peek() {
            if skips {
                if let Some(partial) = partials.peek() {
                    if earliest.heap_cmp(partial) == Ordering::Greater {
                        break;
                    }
                }
            }
            let Some(earliest) = self.completed.pop() else {
                break;
            };
            let paths = match earliest.previous {
                Some(previous) => self.buffer.extract(previous, &earliest.version),
                None => Vec::new(),
            };
            if skips {
                if let Some(pruning) = pruning_id(nfa, &paths) {
                    self.prune(nfa, partials, pruning);
                    let mut completed = std::mem::take(&mut self.completed);
                    self.prune(nfa, &mut completed, pruning);
                    self.completed = completed;
                }
            }
            if let Some(path) = paths.first() {
                result.push(self.materialize(nfa, path));
            }
            if let Some(previous) = earliest.previous {
                self.buffer.release_node(previous, &earliest.version);
            }
        }
    }

    fn prune(&mut self, nfa: &Nfa<V>, matches: &mut JavaHeap<Computation>, pruning: EventId) {
        let whole_match = matches!(
            nfa.skip,
            AfterMatchSkip::SkipToNext | AfterMatchSkip::SkipPastLastEvent
        );
        let prune = |c: &Computation| {
            c.start_event.is_some_and(|start| {
                if whole_match {
                    start <= pruning
                } else {
                    start < pruning
                }
            })
        };
        for c in matches.iter().filter(|c| prune(c)) {
            if let Some(previous) = c.previous {
                self.buffer.release_node(previous, &c.version);
            }
        }
        matches.remove_where(prune);
    }

    /// The partial matches `computation` becomes with the event, into `result`.
    fn compute_next_states(
        &mut self,
        nfa: &Nfa<V>,
        scratch: &mut Scratch,
        computation: &Computation,
        incoming: &mut Incoming<'_, V>,
        result: &mut Vec<Computation>,
    ) {
        let state = usize::from(computation.state);
        let is_start = nfa.states[state].kind == Kind::Start;
        let mut edges = std::mem::take(&mut scratch.edges);
        let (takes, ignores) = {
            let ctx = self.context(nfa, computation, incoming.timestamp);
            decision_graph(
                nfa,
                state,
                incoming.value,
                &ctx,
                &mut edges,
                &mut scratch.stack,
            )
        };
        let mut takes_to_visit = takes.saturating_sub(1);
        let mut ignores_to_visit = ignores;
        let takes_to_skip = takes.saturating_sub(1);
        for &(from, t) in &edges {
            let transition = &nfa.states[from].transitions[t];
            match transition.action {
                Action::Ignore => {
                    if is_start {
                        continue;
                    }
                    let version = if transition.target == state {
                        computation.version.increase(self_increase(ignores, takes))
                    } else {
                        let v = computation
                            .version
                            .increase(takes_to_skip + ignores_to_visit)
                            .add_stage();
                        ignores_to_visit = ignores_to_visit.saturating_sub(1);
                        v
                    };
                    self.add_state(
                        result,
                        Computation {
                            state: index(transition.target),
                            version,
                            ..computation.clone()
                        },
                    );
                }
                Action::Take => {
                    let current_version = computation.version.increase(takes_to_visit);
                    let next_version = current_version.add_stage();
                    takes_to_visit = takes_to_visit.saturating_sub(1);
                    let event = match incoming.id {
                        Some(id) => id,
                        None => {
                            let id = self
                                .buffer
                                .register_event(incoming.value.clone(), incoming.timestamp);
                            incoming.id = Some(id);
                            id
                        }
                    };
                    let page = nfa.states[from].page;
                    let entry =
                        self.buffer
                            .put(page, event, computation.previous, &current_version);
                    let (start_timestamp, start_event) = if is_start {
                        (incoming.timestamp, Some(event))
                    } else {
                        (computation.start_timestamp, computation.start_event)
                    };
                    let next = Computation {
                        state: index(transition.target),
                        previous: Some(entry),
                        version: next_version,
                        start_timestamp,
                        previous_timestamp: incoming.timestamp,
                        start_event,
                    };
                    let target = transition.target;
                    self.add_state(result, next.clone());
                    let ctx = self.context(nfa, computation, incoming.timestamp);
                    let end =
                        final_after_proceed(nfa, target, incoming.value, &ctx, &mut scratch.stack);
                    drop(ctx);
                    if let Some(end) = end {
                        self.add_state(
                            result,
                            Computation {
                                state: index(end),
                                ..next
                            },
                        );
                    }
                }
                Action::Proceed => {}
            }
        }
        if is_start {
            let version = computation.version.increase(self_increase(ignores, takes));
            result.push(Computation::start(computation.state, version));
        }
        if let Some(previous) = computation.previous {
            self.buffer.release_node(previous, &computation.version);
        }
        edges.clear();
        scratch.edges = edges;
    }

    fn add_state(&mut self, result: &mut Vec<Computation>, state: Computation) {
        if let Some(previous) = state.previous {
            self.buffer.lock_node(previous, &state.version);
        }
        result.push(state);
    }

    fn context<'a>(
        &'a self,
        nfa: &'a Nfa<V>,
        computation: &'a Computation,
        timestamp: Timestamp,
    ) -> Context<'a, V> {
        Context {
            buffer: &self.buffer,
            entry: computation.previous,
            version: &computation.version,
            timestamp,
            names: &nfa.names,
            matched: OnceCell::new(),
        }
    }
}

/// Flink's `calculateIncreasingSelfState`.
fn self_increase(ignores: u32, takes: u32) -> u32 {
    if takes == 0 && ignores == 0 {
        0
    } else {
        ignores + takes.max(1)
    }
}

/// The take and ignore transitions open to a partial match in `state` for `event`, found
/// by following the proceed transitions whose conditions hold; with the numbers of takes and
/// of ignores that lead elsewhere.
fn decision_graph<V>(
    nfa: &Nfa<V>,
    state: usize,
    event: &V,
    ctx: &Context<'_, V>,
    edges: &mut Vec<(usize, usize)>,
    stack: &mut Vec<usize>,
) -> (u32, u32) {
    let (mut takes, mut ignores) = (0u32, 0u32);
    stack.clear();
    stack.push(state);
    while let Some(current) = stack.pop() {
        for (i, t) in nfa.states[current].transitions.iter().enumerate() {
            if !t.guard.holds(event, ctx) {
                continue;
            }
            match t.action {
                Action::Proceed => stack.push(t.target),
                Action::Ignore | Action::Take => {
                    let self_ignore = t.action == Action::Ignore && t.target == state;
                    if !self_ignore {
                        if t.action == Action::Ignore {
                            ignores += 1;
                        } else {
                            takes += 1;
                        }
                    }
                    edges.push((current, i));
                }
            }
        }
    }
    (takes, ignores)
}

/// The final state reached from `state` by proceed transitions alone, if any.
fn final_after_proceed<V>(
    nfa: &Nfa<V>,
    state: usize,
    event: &V,
    ctx: &Context<'_, V>,
    stack: &mut Vec<usize>,
) -> Option<usize> {
    stack.clear();
    stack.push(state);
    while let Some(current) = stack.pop() {
        for t in &nfa.states[current].transitions {
            if t.action == Action::Proceed && t.guard.holds(event, ctx) {
                if nfa.states[t.target].kind == Kind::Final {
                    return Some(t.target);
                }
                stack.push(t.target);
            }
        }
    }
    None
}

/// The event partial matches are pruned against after a match, by the skip strategy.
fn pruning_id<V>(nfa: &Nfa<V>, paths: &[Found]) -> Option<EventId> {
    let page_of = |name: &str| nfa.names.iter().position(|n| n == name);
    let mut pruning: Option<EventId> = None;
    let max = |a: Option<EventId>, b: EventId| Some(a.map_or(b, |a| a.max(b)));
    for path in paths {
        match &nfa.skip {
            AfterMatchSkip::NoSkip => return None,
            AfterMatchSkip::SkipToNext => {
                for (_, events) in path {
                    if let Some(&first) = events.first() {
                        pruning = Some(pruning.map_or(first, |p| p.min(first)));
                    }
                }
            }
            AfterMatchSkip::SkipPastLastEvent => {
                for (_, events) in path {
                    if let Some(&last) = events.last() {
                        pruning = max(pruning, last);
                    }
                }
            }
            AfterMatchSkip::SkipToFirst(name) | AfterMatchSkip::SkipToLast(name) => {
                let first = matches!(nfa.skip, AfterMatchSkip::SkipToFirst(_));
                let page = page_of(name);
                let events = path
                    .iter()
                    .find(|(p, _)| Some(usize::from(*p)) == page)
                    .map(|(_, e)| e);
                if let Some(events) = events.filter(|e| !e.is_empty()) {
                    let e = if first {
                        events[0]
                    } else {
                        events[events.len() - 1]
                    };
                    pruning = max(pruning, e);
                }
            }
        }
    }
    pruning
}
