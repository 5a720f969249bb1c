//! The catalog's patterns, each declared as `CepReference.java` declares it for Flink CEP.
//! Events are their type (`"a"`, `"b"`, `"held"`, …); conditions look at it.

use std::time::Duration;

use eddy::streams::pattern::{AfterMatchSkip, Pattern};

/// A scenario: its pattern and how late a record may be.
pub struct Scenario {
    /// The pattern.
    pub pattern: Pattern<String>,
    /// The allowed lateness, in milliseconds.
    pub lateness_ms: u64,
}

fn is(kind: &'static str) -> impl Fn(&String) -> bool + Send + Sync + 'static {
    move |e: &String| e == kind
}

fn step(p: Pattern<String>, kind: &'static str) -> Pattern<String> {
    p.where_(is(kind))
}

fn begin(name: &str, kind: &'static str) -> Pattern<String> {
    Pattern::begin(name).where_(is(kind))
}

fn skipping(skip: AfterMatchSkip) -> Pattern<String> {
    Pattern::begin_with("a", skip)
        .where_(is("a"))
        .one_or_more()
        .followed_by("b")
        .where_(is("b"))
}

/// The fraud job's rule: held, released, held, released in a row, within ten minutes.
pub fn hold_release() -> Pattern<String> {
    Pattern::begin_with("hold", AfterMatchSkip::SkipPastLastEvent)
        .where_(is("held"))
        .next("release")
        .where_(is("released"))
        .next("hold-again")
        .where_(is("held"))
        .next("release-again")
        .where_(is("released"))
        .within(Duration::from_secs(600))
}

/// The scenario `name`.
pub fn scenario(name: &str) -> Option<Scenario> {
    let second = Duration::from_secs(1);
    let mut lateness_ms = 0;
    let pattern = match name {
        "strict" => step(begin("a", "a").next("b"), "b"),
        "relaxed" => step(begin("a", "a").followed_by("b"), "b"),
        "any" => step(begin("a", "a").followed_by_any("b"), "b"),
        "times" => step(
            step(begin("a", "a").followed_by("b"), "b")
                .times(2)
                .followed_by("c"),
            "c",
        ),
        "times-consecutive" => step(
            step(begin("a", "a").followed_by("b"), "b")
                .times(2)
                .consecutive()
                .followed_by("c"),
            "c",
        ),
        "times-range" => step(
            step(begin("a", "a").followed_by("b"), "b")
                .times_range(1, 3)
                .followed_by("c"),
            "c",
        ),
        "times-range-greedy" => step(
            step(begin("a", "a").followed_by("b"), "b")
                .times_range(1, 3)
                .greedy()
                .followed_by("c"),
            "c",
        ),
        "one-or-more" => step(
            step(begin("a", "a").followed_by("b"), "b")
                .one_or_more()
                .followed_by("c"),
            "c",
        ),
        "one-or-more-greedy" => step(
            step(begin("a", "a").followed_by("b"), "b")
                .one_or_more()
                .greedy()
                .followed_by("c"),
            "c",
        ),
        "combinations" => step(
            step(begin("a", "a").followed_by("b"), "b")
                .times_or_more(2)
                .allow_combinations()
                .followed_by("c"),
            "c",
        ),
        "optional" => step(
            step(begin("a", "a").followed_by("b"), "b")
                .optional()
                .followed_by("c"),
            "c",
        ),
        "until" => step(
            step(begin("a", "a").followed_by("b"), "b")
                .one_or_more()
                .until(is("x"))
                .followed_by("c"),
            "c",
        ),
        "not-next" => step(
            step(begin("a", "a").not_next("not-b"), "b").followed_by("c"),
            "c",
        ),
        "not-followed-by" => step(
            step(begin("a", "a").not_followed_by("not-b"), "b").followed_by("c"),
            "c",
        ),
        "not-followed-by-end" => step(begin("a", "a").not_followed_by("not-b"), "b").within(second),
        "within" => step(begin("a", "a").followed_by("b"), "b").within(second),
        "skip-none" => skipping(AfterMatchSkip::NoSkip),
        "skip-to-next" => skipping(AfterMatchSkip::SkipToNext),
        "skip-past-last" => skipping(AfterMatchSkip::SkipPastLastEvent),
        "skip-to-first" => skipping(AfterMatchSkip::SkipToFirst("a".to_string())),
        "skip-to-last" => skipping(AfterMatchSkip::SkipToLast("a".to_string())),
        "iterative" => begin("a", "a")
            .followed_by("b")
            .where_iterative(|e, ctx| e == "b" && ctx.events_for("b").count() < 2)
            .one_or_more()
            .followed_by("c")
            .where_(is("c")),
        "group" => Pattern::begin_group(step(begin("g1", "a").next("g2"), "b"))
            .times(2)
            .followed_by("c")
            .where_(is("c")),
        "out-of-order" => {
            lateness_ms = 500;
            step(begin("a", "a").followed_by("b"), "b").within(2 * second)
        }
        "many-keys" | "hold-release" => hold_release(),
        _ => return None,
    };
    Some(Scenario {
        pattern,
        lateness_ms,
    })
}
