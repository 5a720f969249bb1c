//! A faster way to run the most common patterns: a sequence of single steps, each the very
//! next event (`begin(..).next(..).next(..)`), on conditions that look at the event alone.
//! The general automaton runs such a pattern with the same results (a property test holds the
//! two together, and the Flink catalog's strict patterns hold this one to Flink): every
//! partial match takes each event or dies, so runs move in step, the one started first is
//! always furthest along, at most one completes per event and none waits on another. A key's
//! state is then its runs and the events each took — no shared buffer, no versions, no
//! locks — a few cache lines instead of a dozen.

use smallvec::SmallVec;

use super::automaton::{Action, Guard, Kind, Nfa};
use super::buffer::{EventId, Seq};
use super::builder::AfterMatchSkip;
use super::nfa::Advanced;
use super::output::{MatchedEvent, PatternMatch};
use crate::log::Timestamp;
use crate::streams::store::small_bytes::SmallValue;

/// A pattern that is a sequence of single strict steps: each step's condition and the index
/// of its name.
pub(crate) struct Sequence<V> {
    steps: Vec<(Guard<V>, u16)>,
}

impl<V> Sequence<V> {
    /// The sequence `nfa` is, if it is one: a chain of states from the start, each with one
    /// take to the next on a condition of the event alone (the start may also ignore, which
    /// a start never does), ending in the final state; no stop or pending states.
    pub(crate) fn of(nfa: &Nfa<V>) -> Option<Sequence<V>> {
        let start = nfa.start();
        let mut state = start;
        let mut steps = Vec::new();
        loop {
            let s = &nfa.states[state];
            match s.kind {
                Kind::Final if s.transitions.is_empty() => break,
                Kind::Start | Kind::Normal => {}
                _ => return None,
            }
            let mut take = None;
            for t in &s.transitions {
                match t.action {
                    Action::Take if take.is_none() => take = Some(t),
                    Action::Ignore if state == start && t.target == start => {}
                    _ => return None,
                }
            }
            let take = take?;
            if !take.guard.is_simple() || steps.len() >= nfa.states.len() {
                return None;
            }
            steps.push((take.guard.clone(), s.page));
            state = take.target;
        }
        (!steps.is_empty()).then_some(Sequence { steps })
    }

    /// The number of steps.
    pub(crate) fn len(&self) -> usize {
        self.steps.len()
    }
}

/// An event a run took: its id, value and serialized form once made (what the store keeps).
pub(crate) struct Taken<V> {
    pub(crate) id: EventId,
    pub(crate) value: V,
    pub(crate) bytes: Option<SmallValue>,
}

/// A partial match: the events it took, one per step so far (its first is where it started).
pub(crate) type Run<V> = SmallVec<[Taken<V>; 3]>;

/// One key's runs, earliest started first, and the number its next event gets.
pub(crate) struct Runs<V> {
    pub(crate) runs: SmallVec<[Run<V>; 2]>,
    pub(crate) next_seq: Seq,
}

impl<V> Default for Runs<V> {
    fn default() -> Self {
        Runs {
            runs: SmallVec::new(),
            next_seq: Seq::FIRST,
        }
    }
}

impl<V: Clone> Runs<V> {
    /// Whether the key holds no partial match.
    pub(crate) fn is_idle(&self) -> bool {
        self.runs.is_empty()
    }

    /// Back to a new key's state, the room kept.
    pub(crate) fn clear(&mut self) {
        self.runs.clear();
        self.next_seq = Seq::FIRST;
    }

    /// When the earliest run times out, if the pattern has a window.
    pub(crate) fn deadline(&self, nfa: &Nfa<V>) -> Option<Timestamp> {
        if nfa.window <= 0 {
            return None;
        }
        self.runs
            .first()
            .and_then(|r| r.first())
            .map(|e| e.id.timestamp.saturating_add(nfa.window))
    }

    /// Moves time to `timestamp`: runs whose window has passed time out, returned (when
    /// `timeouts`) with the time they timed out at, earliest started first.
    pub(crate) fn advance_time(
        &mut self,
        nfa: &Nfa<V>,
        sequence: &Sequence<V>,
        timestamp: Timestamp,
        timeouts: bool,
    ) -> Advanced<V> {
        let mut timed_out = Vec::new();
        if nfa.window <= 0 {
            return (Vec::new(), timed_out);
        }
        let expired = self
            .runs
            .iter()
            .take_while(|r| {
                r.first()
                    .is_some_and(|e| timestamp.saturating_sub(e.id.timestamp) >= nfa.window)
            })
            .count();
        for run in self.runs.drain(..expired) {
            if timeouts {
                let at = run
                    .first()
                    .map_or(0, |e| e.id.timestamp)
                    .saturating_add(nfa.window);
                timed_out.push((materialize(nfa, sequence, &run), at));
            }
        }
        (Vec::new(), timed_out)
    }

    /// Feeds one event; the match it completes, if any.
    pub(crate) fn process(
        &mut self,
        nfa: &Nfa<V>,
        sequence: &Sequence<V>,
        event: &V,
        timestamp: Timestamp,
    ) -> Option<PatternMatch<V>> {
        let id = EventId {
            timestamp,
            seq: self.next_seq,
        };
        let mut taken = false;
        let last = sequence.len().saturating_sub(1);
        let mut completed = None;
        // Each run takes the event for its next step or dies; the first can complete.
        let mut i = 0;
        while i < self.runs.len() {
            let step = self.runs[i].len();
            let takes = sequence
                .steps
                .get(step)
                .is_some_and(|(guard, _)| guard.holds_simple(event));
            if takes {
                taken = true;
                self.runs[i].push(Taken {
                    id,
                    value: event.clone(),
                    bytes: None,
                });
                if step == last {
                    completed = Some(self.runs.remove(i));
                    continue;
                }
                i += 1;
            } else {
                self.runs.remove(i);
            }
        }
        // The start takes it into a new run, or completes a one-step pattern.
        let starts = sequence
            .steps
            .first()
            .is_some_and(|(guard, _)| guard.holds_simple(event));
        if starts {
            taken = true;
            let mut run = Run::new();
            run.push(Taken {
                id,
                value: event.clone(),
                bytes: None,
            });
            if last == 0 {
                completed = Some(run);
            } else {
                self.runs.push(run);
            }
        }
        if taken {
            self.next_seq = self.next_seq.next();
        }
        let run = completed?;
        if let Some(pruning) = pruning(nfa, sequence, &run) {
            let whole = matches!(
                nfa.skip,
                AfterMatchSkip::SkipToNext | AfterMatchSkip::SkipPastLastEvent
            );
            self.runs.retain(|r| {
                r.first().is_none_or(|start| {
                    if whole {
                        start.id > pruning
                    } else {
                        start.id >= pruning
                    }
                })
            });
        }
        Some(materialize(nfa, sequence, &run))
    }
}

/// The event runs are pruned against after `run` matched, by the skip strategy (as the
/// general automaton finds it).
fn pruning<V>(nfa: &Nfa<V>, sequence: &Sequence<V>, run: &Run<V>) -> Option<EventId> {
    let event_of = |name: &str| {
        let page = nfa.names.iter().position(|n| n == name)?;
        sequence
            .steps
            .iter()
            .zip(run.iter())
            .find(|((_, p), _)| usize::from(*p) == page)
            .map(|(_, e)| e.id)
    };
    match &nfa.skip {
        AfterMatchSkip::NoSkip => None,
        AfterMatchSkip::SkipToNext => run.first().map(|e| e.id),
        AfterMatchSkip::SkipPastLastEvent => run.last().map(|e| e.id),
        AfterMatchSkip::SkipToFirst(name) | AfterMatchSkip::SkipToLast(name) => event_of(name),
    }
}

/// A run's events by step, as a match or a timed-out partial match.
fn materialize<V: Clone>(nfa: &Nfa<V>, sequence: &Sequence<V>, run: &Run<V>) -> PatternMatch<V> {
    let mut steps: Vec<(String, Vec<MatchedEvent<V>>)> = Vec::with_capacity(run.len());
    for (taken, (_, page)) in run.iter().zip(&sequence.steps) {
        let name = nfa
            .names
            .get(usize::from(*page))
            .cloned()
            .unwrap_or_default();
        let event = MatchedEvent {
            value: taken.value.clone(),
            timestamp: taken.id.timestamp,
        };
        match steps.iter_mut().find(|(n, _)| *n == name) {
            Some((_, events)) => events.push(event),
            None => steps.push((name, vec![event])),
        }
    }
    PatternMatch { steps }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::{Runs, Sequence};
    use crate::streams::pattern::nfa::{KeyNfa, Scratch};
    use crate::streams::pattern::{compile, AfterMatchSkip, Pattern, PatternMatch};

    /// What a key's automaton gives out, in order.
    #[derive(Debug, PartialEq)]
    enum Out {
        Match(PatternMatch<u8>),
        Timeout(PatternMatch<u8>, i64),
    }

    /// A sequence of `conditions.len()` strict steps `s0`, `s1`, ...: each takes events equal
    /// to its number, or (numbers of 4 and up) any event but `n - 4`.
    fn chain(conditions: &[u8], skip: AfterMatchSkip, window: Option<i64>) -> Pattern<u8> {
        let condition = |c: u8| move |v: &u8| if c < 4 { *v == c } else { *v != c - 4 };
        let mut pattern = Pattern::begin_with("s0", skip).where_(condition(conditions[0]));
        for (i, c) in conditions.iter().enumerate().skip(1) {
            pattern = pattern.next(&format!("s{i}")).where_(condition(*c));
        }
        match window {
            Some(w) => pattern.within(Duration::from_millis(w.unsigned_abs())),
            None => pattern,
        }
    }

    fn skip(kind: u8, step: usize) -> AfterMatchSkip {
        match kind {
            0 => AfterMatchSkip::NoSkip,
            1 => AfterMatchSkip::SkipToNext,
            2 => AfterMatchSkip::SkipPastLastEvent,
            3 => AfterMatchSkip::SkipToFirst(format!("s{step}")),
            _ => AfterMatchSkip::SkipToLast(format!("s{step}")),
        }
    }

    #[test]
    fn only_strict_sequences_of_plain_conditions_are_sequences() {
        let nfa = |p: Pattern<u8>| compile(&p).unwrap();
        let strict = chain(&[0, 1, 0, 1], AfterMatchSkip::SkipPastLastEvent, Some(600));
        assert_eq!(Sequence::of(&nfa(strict)).map(|s| s.len()), Some(4));
        let relaxed = Pattern::begin("a")
            .where_(|v: &u8| *v == 0)
            .followed_by("b")
            .where_(|v: &u8| *v == 1);
        assert!(Sequence::of(&nfa(relaxed)).is_none());
        let looping = Pattern::begin("a")
            .where_(|v: &u8| *v == 0)
            .next("b")
            .where_(|v: &u8| *v == 1)
            .one_or_more();
        assert!(Sequence::of(&nfa(looping)).is_none());
        let iterative = Pattern::begin("a")
            .where_(|v: &u8| *v == 0)
            .next("b")
            .where_iterative(|v: &u8, ctx| ctx.events_for("a").any(|a| a == v));
        assert!(Sequence::of(&nfa(iterative)).is_none());
        let negated = Pattern::begin("a")
            .where_(|v: &u8| *v == 0)
            .not_next("b")
            .where_(|v: &u8| *v == 1)
            .next("c")
            .where_(|v: &u8| *v == 2);
        assert!(Sequence::of(&nfa(negated)).is_none());
    }

    proptest! {
        /// A sequence runs as the general automaton runs it: the same matches and timed-out
        /// partial matches in the same order, the same deadlines, idle at the same times.
        #[test]
        fn a_sequence_runs_as_the_general_automaton_does(
            conditions in proptest::collection::vec(0u8..7, 1..5),
            skip_kind in 0u8..5,
            skip_step in 0usize..4,
            window in proptest::option::of(1i64..12),
            events in proptest::collection::vec((0u8..4, 0i64..4), 1..80),
        ) {
            let pattern = chain(&conditions, skip(skip_kind, skip_step), window);
            let Ok(nfa) = compile(&pattern) else {
                // A skip to a step the pattern does not have: refused, as Flink refuses it.
                return Ok(());
            };
            let sequence = Sequence::of(&nfa).expect("a strict chain is a sequence");
            let mut general = KeyNfa::new(&nfa);
            let mut scratch = Scratch::default();
            let mut runs = Runs::default();
            let (mut theirs, mut ours) = (Vec::new(), Vec::new());
            let mut t = 0;
            for (value, gap) in events {
                t += gap;
                let (m, timeouts) = general.advance_time(&nfa, t, true);
                theirs.extend(m.into_iter().map(Out::Match));
                theirs.extend(timeouts.into_iter().map(|(m, at)| Out::Timeout(m, at)));
                let (m, timeouts) = runs.advance_time(&nfa, &sequence, t, true);
                ours.extend(m.into_iter().map(Out::Match));
                ours.extend(timeouts.into_iter().map(|(m, at)| Out::Timeout(m, at)));
                theirs.extend(general.process(&nfa, &mut scratch, &value, t).into_iter().map(Out::Match));
                ours.extend(runs.process(&nfa, &sequence, &value, t).map(Out::Match));
                prop_assert_eq!(&ours, &theirs);
                prop_assert_eq!(runs.is_idle(), general.is_idle(&nfa));
                prop_assert_eq!(runs.deadline(&nfa), general.deadline(&nfa));
            }
        }
    }
}
