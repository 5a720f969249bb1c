//! The pattern builder: a sequence of named steps, each with a condition, a contiguity to the
//! step before it, a quantifier and optionally a stop condition, as Flink CEP's `Pattern`
//! builds them. A misuse Flink refuses when the call is made is recorded and reported when the
//! pattern is compiled (when the topology is built), with Flink's message.

use std::sync::Arc;
use std::time::Duration;

use super::condition::{Condition, Context};

/// How a step relates to the events before it (Flink's `ConsumingStrategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Contiguity {
    /// `next`: the very next event.
    Strict,
    /// `followed_by`: the next event that matches, skipping others.
    Relaxed,
    /// `followed_by_any`: any later event that matches, each starting its own branch.
    NonDeterministic,
    /// `not_next`: the next event must not match.
    NotNext,
    /// `not_followed_by`: no later event (before the following step) may match.
    NotFollowedBy,
}

/// How many events a step takes (Flink's `Quantifier`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Count {
    /// One event.
    Single,
    /// `times(n)` or `times_range(from, to)`.
    Times,
    /// `one_or_more()` or `times_or_more(n)`.
    Looping,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Quantifier {
    pub(crate) count: Count,
    pub(crate) contiguity: Contiguity,
    /// Between the events of a quantified step: relaxed unless `consecutive()` (strict) or
    /// `allow_combinations()` (non-deterministic).
    pub(crate) inner: Contiguity,
    pub(crate) optional: bool,
    pub(crate) greedy: bool,
}

impl Quantifier {
    fn one(contiguity: Contiguity) -> Self {
        Quantifier {
            count: Count::Single,
            contiguity,
            inner: Contiguity::Relaxed,
            optional: false,
            greedy: false,
        }
    }

    fn describe(&self) -> String {
        let mut properties = vec![match self.count {
            Count::Single => "SINGLE",
            Count::Times => "TIMES",
            Count::Looping => "LOOPING",
        }];
        if self.optional {
            properties.push("OPTIONAL");
        }
        if self.greedy {
            properties.push("GREEDY");
        }
        format!(
            "Quantifier{{properties=[{}], consumingStrategy={}, innerConsumingStrategy={}}}",
            properties.join(", "),
            strategy(self.contiguity),
            strategy(self.inner)
        )
    }
}

fn strategy(c: Contiguity) -> &'static str {
    match c {
        Contiguity::Strict => "STRICT",
        Contiguity::Relaxed => "SKIP_TILL_NEXT",
        Contiguity::NonDeterministic => "SKIP_TILL_ANY",
        Contiguity::NotFollowedBy => "NOT_FOLLOW",
        Contiguity::NotNext => "NOT_NEXT",
    }
}

/// One step of a pattern: an event step, or a group of steps quantified as one.
pub(crate) struct Step<V> {
    pub(crate) name: String,
    pub(crate) condition: Option<Condition<V>>,
    pub(crate) quantifier: Quantifier,
    /// `(from, to)` of a quantified step (`(n, n)` for a looping one: `n` or more).
    pub(crate) times: Option<(u32, u32)>,
    pub(crate) until: Option<Condition<V>>,
    pub(crate) window: Option<i64>,
    pub(crate) group: Option<Arc<Pattern<V>>>,
}

impl<V> Clone for Step<V> {
    fn clone(&self) -> Self {
        Step {
            name: self.name.clone(),
            condition: self.condition.clone(),
            quantifier: self.quantifier,
            times: self.times,
            until: self.until.clone(),
            window: self.window,
            group: self.group.clone(),
        }
    }
}

/// Where matching resumes after a match (Flink's `AfterMatchSkipStrategy`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum AfterMatchSkip {
    /// Every match is emitted; partial matches are kept.
    #[default]
    NoSkip,
    /// Partial matches that started with the match's first event are dropped.
    SkipToNext,
    /// Partial matches that started at or before the match's last event are dropped.
    SkipPastLastEvent,
    /// Partial matches that started before the first event the named step took are dropped.
    SkipToFirst(String),
    /// Partial matches that started before the last event the named step took are dropped.
    SkipToLast(String),
}

/// A pattern of events to find among the events of each key, as Flink CEP declares one:
/// named steps with conditions, how each follows the one before, how many events each takes,
/// and the time a whole match may span.
///
/// ```
/// use std::time::Duration;
/// use eddy_core::streams::pattern::Pattern;
///
/// let holds_and_releases = Pattern::<String>::begin("hold")
///     .where_(|e| e == "held")
///     .followed_by("release")
///     .where_(|e| e == "released")
///     .within(Duration::from_secs(600));
/// assert!(holds_and_releases.validate().is_ok());
/// ```
pub struct Pattern<V> {
    pub(crate) steps: Vec<Step<V>>,
    pub(crate) skip: AfterMatchSkip,
    /// The first misuse of the builder, as Flink words it.
    pub(crate) error: Option<String>,
}

impl<V> Clone for Pattern<V> {
    fn clone(&self) -> Self {
        Pattern {
            steps: self.steps.clone(),
            skip: self.skip.clone(),
            error: self.error.clone(),
        }
    }
}

impl<V> std::fmt::Debug for Pattern<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.steps.iter().map(|s| s.name.as_str()).collect();
        f.debug_struct("Pattern")
            .field("steps", &names)
            .field("skip", &self.skip)
            .finish()
    }
}

impl<V> Pattern<V> {
    /// A pattern whose first step is `name`, emitting every match.
    pub fn begin(name: &str) -> Self {
        Self::begin_with(name, AfterMatchSkip::NoSkip)
    }

    /// A pattern whose first step is `name`, resuming after each match as `skip` says.
    pub fn begin_with(name: &str, skip: AfterMatchSkip) -> Self {
        Pattern {
            steps: vec![Self::step(name, Contiguity::Strict)],
            skip,
            error: None,
        }
    }

    /// A pattern whose first step is the group `group` (a pattern quantified as one step).
    pub fn begin_group(group: Pattern<V>) -> Self {
        Self::begin_group_with(group, AfterMatchSkip::NoSkip)
    }

    /// A pattern whose first step is the group `group`, resuming after each match as `skip`
    /// says.
    pub fn begin_group_with(group: Pattern<V>, skip: AfterMatchSkip) -> Self {
        let error = group.error.clone();
        Pattern {
            steps: vec![Self::group_step(group, Contiguity::Strict)],
            skip,
            error,
        }
    }

    fn step(name: &str, contiguity: Contiguity) -> Step<V> {
        Step {
            name: name.to_string(),
            condition: None,
            quantifier: Quantifier::one(contiguity),
            times: None,
            until: None,
            window: None,
            group: None,
        }
    }

    fn group_step(group: Pattern<V>, contiguity: Contiguity) -> Step<V> {
        Step {
            group: Some(Arc::new(group)),
            ..Self::step("GroupPattern", contiguity)
        }
    }

    fn last(&mut self) -> &mut Step<V> {
        self.steps.last_mut().expect("a pattern has a first step")
    }

    fn fail(mut self, message: impl Into<String>) -> Self {
        if self.error.is_none() {
            self.error = Some(message.into());
        }
        self
    }

    fn then(mut self, name: &str, contiguity: Contiguity) -> Self {
        self.steps.push(Self::step(name, contiguity));
        self
    }

    fn then_group(mut self, group: Pattern<V>, contiguity: Contiguity) -> Self {
        if let Some(e) = &group.error {
            self = self.fail(e.clone());
        }
        self.steps.push(Self::group_step(group, contiguity));
        self
    }

    fn add_condition(mut self, condition: Condition<V>, or: bool) -> Self {
        if self.last().group.is_some() {
            let what = if or { "or" } else { "where" };
            return self.fail(format!("GroupPattern does not support {what} clause."));
        }
        let step = self.last();
        step.condition = Some(match step.condition.take() {
            None => condition,
            Some(c) if or => c.or(condition),
            Some(c) => c.and(condition),
        });
        self
    }

    /// The current step takes events for which `predicate` holds (conditions given one after
    /// another must all hold).
    pub fn where_(self, predicate: impl Fn(&V) -> bool + Send + Sync + 'static) -> Self {
        self.add_condition(Condition::Simple(Arc::new(predicate)), false)
    }

    /// The current step also takes events for which `predicate` holds.
    pub fn or(self, predicate: impl Fn(&V) -> bool + Send + Sync + 'static) -> Self {
        self.add_condition(Condition::Simple(Arc::new(predicate)), true)
    }

    /// Like [`where_`](Self::where_), with a predicate that also sees the events the partial
    /// match has taken so far.
    pub fn where_iterative(
        self,
        predicate: impl Fn(&V, &Context<'_, V>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.add_condition(Condition::Iterative(Arc::new(predicate)), false)
    }

    /// Like [`or`](Self::or), with a predicate that also sees the events already taken.
    pub fn or_iterative(
        self,
        predicate: impl Fn(&V, &Context<'_, V>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.add_condition(Condition::Iterative(Arc::new(predicate)), true)
    }

    /// A looping step stops taking events at the first event for which `predicate` holds.
    pub fn until(self, predicate: impl Fn(&V) -> bool + Send + Sync + 'static) -> Self {
        self.add_until(Condition::Simple(Arc::new(predicate)))
    }

    /// Like [`until`](Self::until), with a predicate that also sees the events taken.
    pub fn until_iterative(
        self,
        predicate: impl Fn(&V, &Context<'_, V>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.add_until(Condition::Iterative(Arc::new(predicate)))
    }

    fn add_until(mut self, condition: Condition<V>) -> Self {
        if self.last().until.is_some() {
            return self.fail("Only one until condition can be applied.");
        }
        if self.last().quantifier.count != Count::Looping {
            return self.fail("The until condition is only applicable to looping states.");
        }
        self.last().until = Some(condition);
        self
    }

    /// The next step, which must take the very next event (strict contiguity).
    pub fn next(self, name: &str) -> Self {
        self.then(name, Contiguity::Strict)
    }

    /// The next step, which takes the next matching event, skipping others (relaxed).
    pub fn followed_by(self, name: &str) -> Self {
        self.then(name, Contiguity::Relaxed)
    }

    /// The next step, which takes any later matching event, each in a match of its own
    /// (non-deterministic relaxed contiguity).
    pub fn followed_by_any(self, name: &str) -> Self {
        self.then(name, Contiguity::NonDeterministic)
    }

    /// A step that the very next event must not match.
    pub fn not_next(mut self, name: &str) -> Self {
        if self.last().quantifier.optional {
            return self
                .fail(NOT_AFTER_OPTIONAL)
                .then(name, Contiguity::NotNext);
        }
        self.then(name, Contiguity::NotNext)
    }

    /// A step that no event between the step before and the step after may match.
    pub fn not_followed_by(mut self, name: &str) -> Self {
        if self.last().quantifier.optional {
            return self
                .fail(NOT_AFTER_OPTIONAL)
                .then(name, Contiguity::NotFollowedBy);
        }
        self.then(name, Contiguity::NotFollowedBy)
    }

    /// The group `group` as the next step, strictly contiguous.
    pub fn next_group(self, group: Pattern<V>) -> Self {
        self.then_group(group, Contiguity::Strict)
    }

    /// The group `group` as the next step, relaxed.
    pub fn followed_by_group(self, group: Pattern<V>) -> Self {
        self.then_group(group, Contiguity::Relaxed)
    }

    /// The group `group` as the next step, non-deterministic relaxed.
    pub fn followed_by_any_group(self, group: Pattern<V>) -> Self {
        self.then_group(group, Contiguity::NonDeterministic)
    }

    fn quantify(mut self, count: Count, from: u32, to: u32) -> Self {
        let q = self.last().quantifier;
        if matches!(
            q.contiguity,
            Contiguity::NotNext | Contiguity::NotFollowedBy
        ) {
            return self.fail("Option not applicable to NOT pattern");
        }
        if q.count != Count::Single {
            let message = format!(
                "Already applied quantifier to this Pattern. Current quantifier is: {}",
                q.describe()
            );
            return self.fail(message);
        }
        let step = self.last();
        step.quantifier = Quantifier {
            count,
            ..Quantifier::one(q.contiguity)
        };
        step.times = Some((from, to));
        self
    }

    /// The step takes exactly `n` events.
    pub fn times(self, n: u32) -> Self {
        if n == 0 {
            return self.fail("You should give a positive number greater than 0.");
        }
        self.quantify(Count::Times, n, n)
    }

    /// The step takes from `from` to `to` events (`from` 0 makes it optional).
    pub fn times_range(self, from: u32, to: u32) -> Self {
        let mut this = self.quantify(Count::Times, from.max(1), to);
        if from == 0 {
            this.last().quantifier.optional = true;
        }
        if to < from.max(1) {
            let message = format!(
                "The to should be a number greater than or equal to from: {}.",
                from.max(1)
            );
            return this.fail(message);
        }
        this
    }

    /// The step takes one or more events.
    pub fn one_or_more(self) -> Self {
        self.quantify(Count::Looping, 1, 1)
    }

    /// The step takes `n` or more events.
    pub fn times_or_more(self, n: u32) -> Self {
        if n == 0 {
            return self.fail("The from should be a positive number greater than 0.");
        }
        self.quantify(Count::Looping, n, n)
    }

    /// The step may take no event.
    pub fn optional(mut self) -> Self {
        let n = self.steps.len();
        if n > 1 && self.steps[n - 2].quantifier.greedy {
            return self.fail("Optional pattern cannot be preceded by greedy pattern");
        }
        let q = self.last().quantifier;
        if q.optional {
            return self.fail("Optional already applied!");
        }
        if matches!(
            q.contiguity,
            Contiguity::NotNext | Contiguity::NotFollowedBy
        ) {
            return self.fail("NOT pattern cannot be optional");
        }
        self.last().quantifier.optional = true;
        self
    }

    /// A quantified step takes as many events as it can before the next step may start.
    pub fn greedy(mut self) -> Self {
        let q = self.last().quantifier;
        if matches!(
            q.contiguity,
            Contiguity::NotNext | Contiguity::NotFollowedBy
        ) {
            return self.fail("Option not applicable to NOT pattern");
        }
        if self.last().group.is_some() {
            return self.fail("Option not applicable to group pattern");
        }
        if q.inner == Contiguity::NonDeterministic {
            return self.fail("Option not applicable to FollowedByAny pattern");
        }
        if q.count == Count::Single {
            return self.fail("Option not applicable to singleton quantifier");
        }
        self.last().quantifier.greedy = true;
        self
    }

    /// The events of a quantified step must follow one another strictly.
    pub fn consecutive(mut self) -> Self {
        let q = self.last().quantifier;
        if q.count == Count::Single {
            return self.fail(format!("Consecutive not applicable to {}!", q.describe()));
        }
        if q.inner == Contiguity::NonDeterministic {
            return self.fail("You can apply either combinations or consecutive, not both!");
        }
        if q.inner == Contiguity::Strict {
            return self.fail("Consecutive already applied!");
        }
        self.last().quantifier.inner = Contiguity::Strict;
        self
    }

    /// The events of a quantified step may be any combination of the matching events.
    pub fn allow_combinations(mut self) -> Self {
        let q = self.last().quantifier;
        if q.count == Count::Single {
            return self.fail(format!("Combinations not applicable to {}!", q.describe()));
        }
        if q.inner == Contiguity::Strict {
            return self.fail("You can apply either combinations or consecutive, not both!");
        }
        if q.inner == Contiguity::NonDeterministic {
            return self.fail("Combinations already applied!");
        }
        self.last().quantifier.inner = Contiguity::NonDeterministic;
        self
    }

    /// A match must span less than `window` from its first to its last event (the smallest
    /// `within` of a pattern counts).
    pub fn within(mut self, window: Duration) -> Self {
        let ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
        self.last().window = Some(ms);
        self
    }

    /// The names of the event steps, in order (those inside groups included).
    pub fn step_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        for step in &self.steps {
            match &step.group {
                Some(group) => names.extend(group.step_names()),
                None => names.push(step.name.clone()),
            }
        }
        names
    }

    /// The after-match skip strategy.
    pub fn skip(&self) -> &AfterMatchSkip {
        &self.skip
    }

    /// Whether the pattern is one Flink CEP accepts; the error says why not, with Flink's
    /// message.
    pub fn validate(&self) -> Result<(), String> {
        super::compiler::compile(self).map(|_| ())
    }
}

const NOT_AFTER_OPTIONAL: &str = "Specifying a pattern with an optional path to NOT condition is not supported yet. You can simulate such pattern with two independent patterns, one with and the other without the optional part.";
