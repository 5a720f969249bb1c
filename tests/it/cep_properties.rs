//! eddy's pattern matching against a brute-force enumerator: for random event sequences of a
//! few keys and random patterns from a small grammar (steps with a condition, a contiguity and
//! a quantifier, and an optional window), the matches eddy finds are exactly the event
//! sequences the enumerator finds by trying every choice of events — what the contiguities
//! mean written out directly, with no automaton.

use std::time::Duration;

use eddy::serde::StringSerde;
use eddy::streams::pattern::{Pattern, PatternMatch};
use eddy::streams::{Consumed, Materialized, Produced, StreamsBuilder};
use eddy::testing::TestDriver;
use proptest::prelude::*;

#[derive(Clone, Copy, Debug)]
enum Cond {
    Is(char),
    Either(char, char),
    Not(char),
}

impl Cond {
    fn holds(self, e: char) -> bool {
        match self {
            Cond::Is(c) => e == c,
            Cond::Either(a, b) => e == a || e == b,
            Cond::Not(c) => e != c,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Contiguity {
    Strict,
    Relaxed,
    Any,
}

#[derive(Clone, Copy, Debug)]
struct Step {
    cond: Cond,
    contiguity: Contiguity,
    /// `times(2)` with this inner contiguity.
    twice: Option<Contiguity>,
}

fn cond() -> impl Strategy<Value = Cond> {
    let c = || prop_oneof![Just('a'), Just('b'), Just('c')];
    prop_oneof![
        c().prop_map(Cond::Is),
        (c(), c()).prop_map(|(a, b)| Cond::Either(a, b)),
        c().prop_map(Cond::Not),
    ]
}

fn contiguity() -> impl Strategy<Value = Contiguity> {
    prop_oneof![
        Just(Contiguity::Strict),
        Just(Contiguity::Relaxed),
        Just(Contiguity::Any)
    ]
}

fn step() -> impl Strategy<Value = Step> {
    (
        cond(),
        contiguity(),
        proptest::option::weighted(0.3, contiguity()),
    )
        .prop_map(|(cond, contiguity, twice)| Step {
            cond,
            contiguity,
            twice,
        })
}

fn names(i: usize) -> String {
    format!("s{i}")
}

fn pattern(steps: &[Step], within: Option<i64>) -> Pattern<String> {
    let mut p: Option<Pattern<String>> = None;
    for (i, s) in steps.iter().enumerate() {
        let name = names(i);
        let next = match p {
            None => Pattern::begin(&name),
            Some(p) => match s.contiguity {
                Contiguity::Strict => p.next(&name),
                Contiguity::Relaxed => p.followed_by(&name),
                Contiguity::Any => p.followed_by_any(&name),
            },
        };
        let c = s.cond;
        let mut next = next.where_(move |e: &String| e.chars().next().is_some_and(|e| c.holds(e)));
        if let Some(inner) = s.twice {
            next = next.times(2);
            next = match inner {
                Contiguity::Strict => next.consecutive(),
                Contiguity::Relaxed => next,
                Contiguity::Any => next.allow_combinations(),
            };
        }
        p = Some(next);
    }
    let p = p.expect("a step");
    match within {
        Some(w) => p.within(Duration::from_millis(w.unsigned_abs())),
        None => p,
    }
}

/// The steps one event at a time: `times(2)` is its step twice, the second time with the
/// inner contiguity.
fn expanded(steps: &[Step]) -> Vec<(usize, Cond, Contiguity)> {
    let mut out = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        out.push((i, s.cond, s.contiguity));
        if let Some(inner) = s.twice {
            out.push((i, s.cond, inner));
        }
    }
    out
}

/// Every match among one key's events (indices into `events`), found by trying every choice.
fn brute_force(steps: &[Step], within: Option<i64>, events: &[(char, i64)]) -> Vec<Vec<usize>> {
    let plan = expanded(steps);
    let mut found = Vec::new();
    fn extend(
        plan: &[(usize, Cond, Contiguity)],
        events: &[(char, i64)],
        within: Option<i64>,
        chosen: &mut Vec<usize>,
        found: &mut Vec<Vec<usize>>,
    ) {
        let j = chosen.len();
        if j == plan.len() {
            found.push(chosen.clone());
            return;
        }
        let (_, cond, contiguity) = plan[j];
        let start = events[chosen[0]].1;
        let in_window = |k: usize| within.is_none_or(|w| events[k].1 - start < w);
        let last = chosen[j - 1];
        let candidates: Vec<usize> = match contiguity {
            Contiguity::Strict => (last + 1..events.len().min(last + 2)).collect(),
            Contiguity::Relaxed => (last + 1..events.len())
                .find(|&k| cond.holds(events[k].0))
                .into_iter()
                .collect(),
            Contiguity::Any => (last + 1..events.len()).collect(),
        };
        for k in candidates {
            if cond.holds(events[k].0) && in_window(k) {
                chosen.push(k);
                extend(plan, events, within, chosen, found);
                chosen.pop();
            }
        }
    }
    for start in 0..events.len() {
        if plan[0].1.holds(events[start].0) {
            let mut chosen = vec![start];
            extend(&plan, events, within, &mut chosen, &mut found);
        }
    }
    found
}

/// What eddy finds, as indices of each key's events, per key.
fn eddy(
    steps: &[Step],
    within: Option<i64>,
    keyed: &[(usize, char, i64)],
    keys: usize,
) -> Vec<Vec<Vec<usize>>> {
    let builder = StreamsBuilder::new();
    builder
        .stream("events", Consumed::with(StringSerde, StringSerde))
        .match_pattern(pattern(steps, within), Materialized::named("p"))
        .map_values(|m: PatternMatch<String>| {
            // Each event's value carries its index among its key's events.
            m.all()
                .map(|e| e.value[1..].to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .to("found", Produced::with(StringSerde, StringSerde));
    let driver = TestDriver::new(builder.build().expect("valid")).expect("driver");
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic("found", StringSerde, StringSerde);
    let mut seen = vec![0usize; keys];
    for &(key, kind, at) in keyed {
        input
            .pipe_input_at(format!("k{key}"), format!("{kind}{}", seen[key]), at)
            .expect("piped");
        seen[key] += 1;
    }
    let mut per_key = vec![Vec::new(); keys];
    for (key, found) in output.read_key_values_to_list() {
        let k: usize = key[1..].parse().expect("a key number");
        per_key[k].push(
            found
                .split(',')
                .map(|i| i.parse().expect("an index"))
                .collect(),
        );
    }
    per_key
}

fn input() -> impl Strategy<Value = Vec<(usize, char, i64)>> {
    proptest::collection::vec(
        (
            0usize..3,
            prop_oneof![Just('a'), Just('b'), Just('c')],
            0i64..4,
        ),
        1..28,
    )
    .prop_map(|events| {
        let mut t = 0;
        events
            .into_iter()
            .map(|(k, c, gap)| {
                t += gap;
                (k, c, t)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn eddy_finds_exactly_the_matches_an_enumerator_finds(
        steps in proptest::collection::vec(step(), 1..4),
        within in proptest::option::of(1i64..12),
        keyed in input(),
    ) {
        let per_key = eddy(&steps, within, &keyed, 3);
        for (key, found) in per_key.into_iter().enumerate() {
            let events: Vec<(char, i64)> = keyed
                .iter()
                .filter(|e| e.0 == key)
                .map(|e| (e.1, e.2))
                .collect();
            let mut expected = brute_force(&steps, within, &events);
            let mut found = found;
            // Matches in order of their last event, then of their events.
            let order = |m: &Vec<usize>| (m.last().copied(), m.clone());
            expected.sort_by_key(order);
            found.sort_by_key(order);
            prop_assert_eq!(found, expected, "key {} events {:?}", key, events);
        }
    }
}
