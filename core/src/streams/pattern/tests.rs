//! The builder's refusals (Flink's messages) and the engine on small inputs through the
//! `TestDriver`: state deleted when a key is back to its start, restored state matching as an
//! uninterrupted run does.

use std::time::Duration;

use super::{AfterMatchSkip, Pattern, PatternMatch};
use crate::serde::StringSerde;
use crate::streams::{Consumed, Matching, Materialized, Produced, StreamsBuilder};
use crate::testing::TestDriver;

fn is(kind: &'static str) -> impl Fn(&String) -> bool + Send + Sync + 'static {
    move |e: &String| e == kind
}

fn refusal(p: Pattern<String>) -> String {
    p.validate().expect_err("refused")
}

#[test]
fn patterns_flink_refuses_are_refused_with_its_message() {
    let ab = || Pattern::<String>::begin("a").where_(is("a"));
    assert_eq!(
        refusal(ab().not_followed_by("b").where_(is("b"))),
        "NotFollowedBy is not supported without windowTime as a last part of a Pattern!"
    );
    assert!(ab()
        .not_followed_by("b")
        .where_(is("b"))
        .within(Duration::from_secs(1))
        .validate()
        .is_ok());
    assert_eq!(
        refusal(ab().next("a")),
        "Duplicate pattern name: a. Names must be unique."
    );
    assert_eq!(
        refusal(ab().times(0)),
        "You should give a positive number greater than 0."
    );
    assert_eq!(
        refusal(ab().until(is("x"))),
        "The until condition is only applicable to looping states."
    );
    assert_eq!(
        refusal(ab().one_or_more().greedy().next("b").optional()),
        "Optional pattern cannot be preceded by greedy pattern"
    );
    assert_eq!(
        refusal(ab().greedy()),
        "Option not applicable to singleton quantifier"
    );
    assert_eq!(
        refusal(ab().times(2).consecutive().allow_combinations()),
        "You can apply either combinations or consecutive, not both!"
    );
    assert_eq!(
        refusal(ab().optional().not_next("b")),
        "Specifying a pattern with an optional path to NOT condition is not supported yet. You can simulate such pattern with two independent patterns, one with and the other without the optional part."
    );
    assert_eq!(
        refusal(Pattern::<String>::begin_with("a", AfterMatchSkip::SkipToLast("z".into())).next("b")),
        "The pattern name specified in AfterMatchSkipStrategy can not be found in the given Pattern"
    );
    assert!(refusal(ab().times(2).times(3)).starts_with("Already applied quantifier"));
}

#[test]
fn a_refused_pattern_fails_the_topology_with_its_message() {
    let builder = StreamsBuilder::new();
    builder
        .stream("events", Consumed::with(StringSerde, StringSerde))
        .match_pattern(
            Pattern::begin("a").where_(is("a")).times(0),
            Materialized::named("p"),
        )
        .foreach(|_, _| {});
    let error = builder.build().expect_err("refused").to_string();
    assert!(error.contains("positive number"), "{error}");
}

/// A topology matching `pattern` on `events`, forwarding matches as text to `found`.
fn topology(pattern: Pattern<String>) -> crate::streams::Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream("events", Consumed::with(StringSerde, StringSerde))
        .match_pattern_with(pattern, Matching::with(Materialized::named("p")))
        .matches
        .map_values(|m: PatternMatch<String>| {
            m.all()
                .map(|e| format!("{}@{}", e.value, e.timestamp))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .to("found", Produced::with(StringSerde, StringSerde));
    builder.build().expect("a topology")
}

fn abc() -> Pattern<String> {
    Pattern::begin("a")
        .where_(is("a"))
        .followed_by("b")
        .where_(is("b"))
        .followed_by("c")
        .where_(is("c"))
        .within(Duration::from_secs(10))
}

#[test]
fn a_key_back_at_its_start_leaves_nothing_in_the_store() {
    let driver = TestDriver::new(topology(abc())).unwrap();
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic("found", StringSerde, StringSerde);
    let store = driver.key_value_store::<bytes::Bytes, bytes::Bytes>("p");
    input.pipe_input_at("k".into(), "x".into(), 1).unwrap();
    assert_eq!(
        store.all().unwrap().len(),
        0,
        "an event no step takes keeps nothing"
    );
    input.pipe_input_at("k".into(), "a".into(), 2).unwrap();
    input.pipe_input_at("k".into(), "b".into(), 3).unwrap();
    assert_eq!(store.all().unwrap().len(), 1);
    input.pipe_input_at("k".into(), "c".into(), 4).unwrap();
    assert_eq!(
        output.read_key_values_to_list(),
        vec![("k".to_string(), "a@2 b@3 c@4".to_string())]
    );
    assert_eq!(
        store.all().unwrap().len(),
        0,
        "the match took the partial match"
    );
    input.pipe_input_at("k".into(), "a".into(), 5).unwrap();
    assert_eq!(store.all().unwrap().len(), 1);
    input
        .pipe_input_at("other".into(), "x".into(), 10_005)
        .unwrap();
    assert_eq!(
        store.all().unwrap().len(),
        0,
        "timed out, the key's state is deleted"
    );
}

#[test]
fn late_records_are_dropped_and_counted() {
    let driver = TestDriver::new(topology(abc())).unwrap();
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic("found", StringSerde, StringSerde);
    input.pipe_input_at("k".into(), "a".into(), 100).unwrap();
    input.pipe_input_at("k".into(), "b".into(), 99).unwrap();
    input.pipe_input_at("k".into(), "c".into(), 101).unwrap();
    assert!(output.read_key_values_to_list().is_empty());
    assert_eq!(driver.dropped_records().values().sum::<u64>(), 1);
}

mod buffer_release {
    use proptest::prelude::*;

    use super::super::compile;
    use super::super::nfa::{KeyNfa, Scratch};
    use super::*;

    fn patterns() -> Vec<Pattern<String>> {
        vec![
            abc(),
            Pattern::begin("a")
                .where_(is("a"))
                .followed_by_any("b")
                .where_(is("b"))
                .one_or_more()
                .followed_by("c")
                .where_(is("c"))
                .within(Duration::from_millis(50)),
            Pattern::begin_with("a", AfterMatchSkip::SkipPastLastEvent)
                .where_(is("a"))
                .next("b")
                .where_(is("b"))
                .optional()
                .followed_by("c")
                .where_(is("c"))
                .within(Duration::from_millis(30)),
        ]
    }

    proptest! {
        /// Events and nodes are reference counted as Flink counts them: whenever a key is back
        /// to its start state its buffer is empty, so deleting the key's state loses nothing.
        #[test]
        fn a_key_back_at_its_start_holds_no_events(
            kinds in proptest::collection::vec(0u8..4, 1..60),
            gaps in proptest::collection::vec(0i64..20, 60),
        ) {
            for pattern in patterns() {
                let nfa = compile(&pattern).unwrap();
                let mut key = KeyNfa::new(&nfa);
                let mut scratch = Scratch::default();
                let mut t = 0;
                for (kind, gap) in kinds.iter().zip(&gaps) {
                    t += gap;
                    let event = ["a", "b", "c", "x"][usize::from(*kind)].to_string();
                    key.advance_time(&nfa, t, true);
                    key.process(&nfa, &mut scratch, &event, t);
                    if key.is_idle(&nfa) {
                        prop_assert!(key.buffer.is_empty());
                    }
                }
                key.advance_time(&nfa, t + 1_000_000, true);
                prop_assert!(key.is_idle(&nfa) || nfa.window == 0);
                if key.is_idle(&nfa) {
                    prop_assert!(key.buffer.is_empty());
                }
            }
        }
    }
}
