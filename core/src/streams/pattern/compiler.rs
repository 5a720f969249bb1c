//! Compiles a [`Pattern`] into the states and transitions of a non-deterministic automaton,
//! state for state and transition for transition as Flink CEP's `NFACompiler` does (so that
//! the Dewey versions of branches, and with them the matches and their order, are Flink's):
//! the pattern is walked from its last step back to its first, each step becoming states
//! that take, ignore or proceed past events, with stop states for negations.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::automaton::{Action, Guard, Kind, Nfa, State, Transition};
use super::builder::{AfterMatchSkip, Contiguity, Count, Pattern, Step};

const ENDING_STATE_NAME: &str = "$endState$";

/// Compiles `pattern`; the error is Flink's message for a pattern it refuses.
pub(crate) fn compile<V>(pattern: &Pattern<V>) -> Result<Nfa<V>, String> {
    if let Some(e) = &pattern.error {
        return Err(e.clone());
    }
    let mut c = Compiler {
        states: Vec::new(),
        names: Vec::new(),
        used: HashSet::new(),
        stop_states: HashMap::new(),
        window: None,
        group: None,
        first_of_loop: HashMap::new(),
        current: Cursor {
            steps: &pattern.steps,
            index: pattern.steps.len() - 1,
        },
        following: None,
        originals: HashMap::new(),
    };
    c.check_names(pattern)?;
    c.check_skip(pattern)?;
    let last = c.current;
    let sink = c.create_ending_state();
    let sink = c.create_middle_states(sink);
    let start = c.convert_pattern(sink);
    c.states[start].kind = Kind::Start;
    let window = c.window.unwrap_or(0);
    if last.step().quantifier.contiguity == Contiguity::NotFollowedBy && window == 0 {
        return Err(
            "NotFollowedBy is not supported without windowTime as a last part of a Pattern!"
                .to_string(),
        );
    }
    Ok(Nfa {
        states: c.states,
        names: c.names,
        window,
        skip: pattern.skip.clone(),
    })
}

/// A step of a pattern's list (Flink's pattern, whose `previous` is the step before).
struct Cursor<'p, V> {
    steps: &'p [Step<V>],
    index: usize,
}

impl<V> Clone for Cursor<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V> Copy for Cursor<'_, V> {}

impl<'p, V> Cursor<'p, V> {
    fn step(&self) -> &'p Step<V> {
        &self.steps[self.index]
    }

    fn previous(&self) -> Option<Cursor<'p, V>> {
        (self.index > 0).then(|| Cursor {
            steps: self.steps,
            index: self.index - 1,
        })
    }

    fn last_of(pattern: &'p Pattern<V>) -> Cursor<'p, V> {
        Cursor {
            steps: &pattern.steps,
            index: pattern.steps.len() - 1,
        }
    }
}

struct Compiler<'p, V> {
    states: Vec<State<V>>,
    names: Vec<String>,
    used: HashSet<String>,
    stop_states: HashMap<String, usize>,
    window: Option<i64>,
    /// The group step being compiled.
    group: Option<&'p Step<V>>,
    first_of_loop: HashMap<*const Step<V>, bool>,
    current: Cursor<'p, V>,
    following: Option<Cursor<'p, V>>,
    originals: HashMap<String, usize>,
}

impl<'p, V> Compiler<'p, V> {
    fn check_names(&mut self, pattern: &Pattern<V>) -> Result<(), String> {
        let mut seen = HashSet::from([ENDING_STATE_NAME.to_string()]);
        fn walk<V>(steps: &[Step<V>], seen: &mut HashSet<String>) -> Result<(), String> {
            for step in steps.iter().rev() {
                match &step.group {
                    Some(group) => walk(&group.steps, seen)?,
                    None => {
                        if !seen.insert(step.name.clone()) {
                            return Err(format!(
                                "Duplicate pattern name: {}. Names must be unique.",
                                step.name
                            ));
                        }
                    }
                }
            }
            Ok(())
        }
        walk(&pattern.steps, &mut seen)
    }

    fn check_skip(&self, pattern: &Pattern<V>) -> Result<(), String> {
        let name = match &pattern.skip {
            AfterMatchSkip::SkipToFirst(n) | AfterMatchSkip::SkipToLast(n) => n,
            _ => return Ok(()),
        };
        if pattern.steps.iter().any(|s| &s.name == name) {
            Ok(())
        } else {
            Err("The pattern name specified in AfterMatchSkipStrategy can not be found in the given Pattern".to_string())
        }
    }

    fn page(&mut self, base: &str) -> u16 {
        match self.names.iter().position(|n| n == base) {
            Some(i) => u16::try_from(i).unwrap_or(u16::MAX),
            None => {
                self.names.push(base.to_string());
                u16::try_from(self.names.len() - 1).unwrap_or(u16::MAX)
            }
        }
    }

    fn create_named(&mut self, base: &str, kind: Kind) -> usize {
        let page = self.page(base);
        self.create_on_page(base, page, kind)
    }

    fn create_on_page(&mut self, base: &str, page: u16, kind: Kind) -> usize {
        let mut name = base.to_string();
        let mut counter = 0;
        while self.used.contains(&name) {
            name = format!("{base}:{counter}");
            counter += 1;
        }
        self.used.insert(name.clone());
        self.states.push(State {
            name,
            base: base.to_string(),
            page,
            kind,
            transitions: Vec::new(),
        });
        self.states.len() - 1
    }

    fn create_state(&mut self, kind: Kind) -> usize {
        let name = self.current.step().name.clone();
        self.create_named(&name, kind)
    }

    fn add(&mut self, from: usize, action: Action, to: usize, guard: Guard<V>) {
        self.states[from].transitions.push(Transition {
            action,
            target: to,
            guard,
        });
    }

    fn create_ending_state(&mut self) -> usize {
        let end = self.create_named(ENDING_STATE_NAME, Kind::Final);
        self.window = self.current.step().window;
        end
    }

    fn create_middle_states(&mut self, sink: usize) -> usize {
        let mut last_sink = sink;
        while let Some(previous) = self.current.previous() {
            let step = self.current.step();
            match step.quantifier.contiguity {
                Contiguity::NotFollowedBy => {
                    if self.window.unwrap_or(0) > 0 && self.states[last_sink].kind == Kind::Final {
                        let not_follow = self.create_state(Kind::Pending);
                        let not = self.take_condition(self.current);
                        let stop = self.create_stop_state(&not, &step.name);
                        self.add(not_follow, Action::Proceed, stop, not.clone());
                        self.add(not_follow, Action::Ignore, not_follow, not.not());
                        last_sink = not_follow;
                    }
                }
                Contiguity::NotNext => {
                    let not_next = self.create_state(Kind::Normal);
                    let not = self.take_condition(self.current);
                    let stop = self.create_stop_state(&not, &step.name);
                    if self.states[last_sink].kind == Kind::Final {
                        self.add(not_next, Action::Ignore, last_sink, not.clone().not());
                    } else {
                        self.add(not_next, Action::Proceed, last_sink, not.clone().not());
                    }
                    self.add(not_next, Action::Proceed, stop, not);
                    last_sink = not_next;
                }
                _ => last_sink = self.convert_pattern(last_sink),
            }
            self.following = Some(self.current);
            self.current = previous;
            if let Some(w) = self.current.step().window {
                if w < self.window.unwrap_or(i64::MAX) {
                    self.window = Some(w);
                }
            }
        }
        last_sink
    }

    fn convert_pattern(&mut self, sink: usize) -> usize {
        let step = self.current.step();
        let times = step.times.unwrap_or((1, 1));
        let last_sink = match step.quantifier.count {
            Count::Looping => {
                self.set_first_of_loop(false);
                let s = self.copy_without_transitive_nots(sink);
                let looping = self.create_looping(s);
                self.set_first_of_loop(true);
                self.create_times_state(looping, sink, times)
            }
            Count::Times => self.create_times_state(sink, sink, times),
            Count::Single => self.create_singleton_state(sink),
        };
        self.add_stop_states(last_sink);
        last_sink
    }

    fn current_not_conditions(&self) -> Vec<(Guard<V>, String)> {
        let mut nots = Vec::new();
        let mut cursor = self.current;
        while let Some(previous) = cursor.previous() {
            let q = previous.step().quantifier;
            if !(q.optional || q.contiguity == Contiguity::NotFollowedBy) {
                break;
            }
            cursor = previous;
            if q.contiguity == Contiguity::NotFollowedBy {
                nots.push((self.take_condition(cursor), cursor.step().name.clone()));
            }
        }
        nots
    }

    fn create_stop_state(&mut self, not: &Guard<V>, name: &str) -> usize {
        if let Some(&stop) = self.stop_states.get(name) {
            return stop;
        }
        let stop = self.create_named(name, Kind::Stop);
        self.add(stop, Action::Take, stop, not.clone());
        self.stop_states.insert(name.to_string(), stop);
        stop
    }

    fn copy_without_transitive_nots(&mut self, sink: usize) -> usize {
        let nots = self.current_not_conditions();
        if nots.is_empty() || !self.current.step().quantifier.optional {
            return sink;
        }
        let name = self.states[sink].name.clone();
        let kind = self.states[sink].kind;
        let page = self.states[sink].page;
        let copy = self.create_on_page(&name, page, kind);
        self.states[copy].base = self.states[sink].base.clone();
        let count = self.states[sink].transitions.len();
        for i in 0..count {
            let (action, target, guard) = {
                let t = &self.states[sink].transitions[i];
                (t.action, t.target, t.guard.clone())
            };
            if action == Action::Proceed {
                let mut to = target;
                let mut remove = false;
                if self.states[target].kind == Kind::Stop {
                    remove = nots.iter().any(|(_, n)| &self.states[target].name == n);
                } else {
                    to = self.copy_without_transitive_nots(target);
                }
                if !remove {
                    self.add(copy, action, to, guard);
                }
            } else {
                let to = if target == sink { copy } else { target };
                self.add(copy, action, to, guard);
            }
        }
        copy
    }

    fn copy(&mut self, state: usize) -> usize {
        let base = self.states[state].base.clone();
        let (page, kind) = (self.states[state].page, self.states[state].kind);
        let copy = self.create_on_page(&base, page, kind);
        let count = self.states[state].transitions.len();
        for i in 0..count {
            let t = &self.states[state].transitions[i];
            let (action, target, guard) = (t.action, t.target, t.guard.clone());
            let to = if target == state { copy } else { target };
            self.add(copy, action, to, guard);
        }
        copy
    }

    fn add_stop_states(&mut self, state: usize) {
        for (not, name) in self.current_not_conditions() {
            let stop = self.create_stop_state(&not, &name);
            self.add(state, Action::Proceed, stop, not);
        }
    }

    fn add_stop_state_to_looping(&mut self, state: usize) {
        let Some(following) = self.following else {
            return;
        };
        if following.step().quantifier.contiguity == Contiguity::NotFollowedBy {
            let not = self.take_condition(following);
            let stop = self.create_stop_state(&not, &following.step().name);
            self.add(state, Action::Proceed, stop, not);
        }
    }

    fn create_times_state(&mut self, sink: usize, proceed: usize, (from, to): (u32, u32)) -> usize {
        let mut last_sink = sink;
        self.set_first_of_loop(false);
        let step = self.current.step();
        let until = step.until.clone().map(Guard::Holds);
        let inner_ignore = extend(self.inner_ignore_condition(self.current), &until, false);
        let take =
            extend(Some(self.take_condition(self.current)), &until, true).unwrap_or(Guard::True);
        if step.quantifier.greedy && from != to {
            if until.is_some() {
                let copy = self.copy(sink);
                let name = self.states[sink].name.clone();
                self.originals.insert(name, copy);
            }
            self.update_with_greedy_condition(sink, &take);
        }
        for _ in from..to {
            last_sink = self.create_singleton_full(
                last_sink,
                Some(proceed),
                take.clone(),
                inner_ignore.clone(),
                true,
            );
            self.add_stop_state_to_looping(last_sink);
        }
        for _ in 0..from.saturating_sub(1) {
            last_sink = self.create_singleton_full(
                last_sink,
                None,
                take.clone(),
                inner_ignore.clone(),
                false,
            );
            self.add_stop_state_to_looping(last_sink);
        }
        self.set_first_of_loop(true);
        let ignore = self.ignore_condition(self.current);
        let optional = step.quantifier.optional;
        self.create_singleton_full(last_sink, Some(proceed), take, ignore, optional)
    }

    fn set_first_of_loop(&mut self, first: bool) {
        let step = self.current.step();
        if step.group.is_some() {
            self.first_of_loop.insert(step as *const Step<V>, first);
        }
    }

    fn group_first_of_loop(&self) -> bool {
        self.group
            .and_then(|g| self.first_of_loop.get(&(g as *const Step<V>)).copied())
            .unwrap_or(true)
    }

    fn head_of_group(&self, cursor: Cursor<'p, V>) -> bool {
        self.group.is_some() && cursor.previous().is_none()
    }

    fn head_of_optional_group(&self, cursor: Cursor<'p, V>) -> bool {
        self.head_of_group(cursor)
            && self.group_first_of_loop()
            && self.group.is_some_and(|g| g.quantifier.optional)
    }

    fn create_singleton_state(&mut self, sink: usize) -> usize {
        let take = self.take_condition(self.current);
        let ignore = self.ignore_condition(self.current);
        let optional = self.current.step().quantifier.optional;
        self.create_singleton_full(sink, Some(sink), take, ignore, optional)
    }

    fn create_singleton_full(
        &mut self,
        sink: usize,
        proceed: Option<usize>,
        take: Guard<V>,
        ignore: Option<Guard<V>>,
        optional: bool,
    ) -> usize {
        let step = self.current.step();
        if let Some(group) = &step.group {
            return self.create_group_state(step, group, sink, proceed, optional);
        }
        let singleton = self.create_state(Kind::Normal);
        let s = self.copy_without_transitive_nots(sink);
        self.add(singleton, Action::Take, s, take.clone());
        let proceed_condition = self.true_condition();
        if optional {
            if let Some(proceed) = proceed {
                if step.quantifier.greedy {
                    let until = step.until.clone().map(Guard::Holds);
                    if let Some(until) = &until {
                        let name = &self.states[proceed].name;
                        if let Some(&original) = self.originals.get(name) {
                            let guard = proceed_condition.clone().and(until.clone());
                            self.add(singleton, Action::Proceed, original, guard);
                        }
                    }
                    let guard = match until {
                        Some(until) => proceed_condition.and(until.not()),
                        None => proceed_condition,
                    };
                    self.add(singleton, Action::Proceed, proceed, guard);
                } else {
                    self.add(singleton, Action::Proceed, proceed, proceed_condition);
                }
            }
        }
        if let Some(ignore) = ignore {
            let ignore_state = if optional || self.head_of_optional_group(self.current) {
                let state = self.create_state(Kind::Normal);
                self.add(state, Action::Take, s, take);
                self.add(state, Action::Ignore, state, ignore.clone());
                self.add_stop_states(state);
                state
            } else {
                singleton
            };
            self.add(singleton, Action::Ignore, ignore_state, ignore);
        }
        singleton
    }

    /// Compiles the steps of a group before `sink`, as the group being compiled.
    fn compile_group(
        &mut self,
        step: &'p Step<V>,
        group: &'p Arc<Pattern<V>>,
        sink: usize,
    ) -> usize {
        let saved = (self.current, self.following, self.group);
        self.group = Some(step);
        self.current = Cursor::last_of(group);
        let last_sink = self.create_middle_states(sink);
        let last_sink = self.convert_pattern(last_sink);
        (self.current, self.following, self.group) = saved;
        last_sink
    }

    fn create_group_state(
        &mut self,
        step: &'p Step<V>,
        group: &'p Arc<Pattern<V>>,
        sink: usize,
        proceed: Option<usize>,
        optional: bool,
    ) -> usize {
        let proceed_condition = self.true_condition();
        let last_sink = self.compile_group(step, group, sink);
        if let Some(proceed) = proceed.filter(|_| optional) {
            self.add(last_sink, Action::Proceed, proceed, proceed_condition);
        }
        last_sink
    }

    fn create_looping_group_state(
        &mut self,
        step: &'p Step<V>,
        group: &'p Arc<Pattern<V>>,
        sink: usize,
    ) -> usize {
        let proceed_condition = self.true_condition();
        let dummy = self.create_state(Kind::Normal);
        let last_sink = self.compile_group(step, group, dummy);
        self.add(last_sink, Action::Proceed, sink, proceed_condition.clone());
        self.add(dummy, Action::Proceed, last_sink, proceed_condition);
        last_sink
    }

    fn create_looping(&mut self, sink: usize) -> usize {
        let step = self.current.step();
        if let Some(group) = &step.group {
            return self.create_looping_group_state(step, group, sink);
        }
        let until = step.until.clone().map(Guard::Holds);
        let ignore = extend(self.inner_ignore_condition(self.current), &until, false);
        let take =
            extend(Some(self.take_condition(self.current)), &until, true).unwrap_or(Guard::True);
        let proceed_condition = self.true_condition();
        let looping = self.create_state(Kind::Normal);
        if step.quantifier.greedy {
            if let Some(until) = &until {
                let copy = self.copy(sink);
                let guard = proceed_condition.clone().and(until.clone());
                self.add(looping, Action::Proceed, copy, guard);
                let name = self.states[sink].name.clone();
                self.originals.insert(name, copy);
            }
            let guard = match &until {
                Some(until) => proceed_condition.and(until.clone().not()),
                None => proceed_condition,
            };
            self.add(looping, Action::Proceed, sink, guard);
            let plain_take = self.take_condition(self.current);
            self.update_with_greedy_condition(sink, &plain_take);
        } else {
            self.add(looping, Action::Proceed, sink, proceed_condition);
        }
        self.add(looping, Action::Take, looping, take.clone());
        self.add_stop_state_to_looping(looping);
        if let Some(ignore) = ignore {
            let ignore_state = self.create_state(Kind::Normal);
            self.add(ignore_state, Action::Take, looping, take);
            self.add(ignore_state, Action::Ignore, ignore_state, ignore.clone());
            self.add(looping, Action::Ignore, ignore_state, ignore);
            self.add_stop_state_to_looping(ignore_state);
        }
        looping
    }

    fn group_until(&self) -> Option<Guard<V>> {
        self.group.and_then(|g| g.until.clone()).map(Guard::Holds)
    }

    fn strategy_condition(
        &self,
        contiguity: Contiguity,
        cursor: Cursor<'p, V>,
    ) -> Option<Guard<V>> {
        let ignore = match contiguity {
            Contiguity::Strict => None,
            Contiguity::Relaxed => Some(condition_of(cursor.step()).not()),
            Contiguity::NonDeterministic => Some(Guard::True),
            Contiguity::NotNext | Contiguity::NotFollowedBy => None,
        };
        extend(ignore, &self.group_until(), false)
    }

    fn inner_ignore_condition(&self, cursor: Cursor<'p, V>) -> Option<Guard<V>> {
        let mut contiguity = cursor.step().quantifier.inner;
        if self.head_of_group(cursor) {
            if let Some(g) = self.group {
                contiguity = g.quantifier.inner;
            }
        }
        self.strategy_condition(contiguity, cursor)
    }

    fn ignore_condition(&self, cursor: Cursor<'p, V>) -> Option<Guard<V>> {
        let mut contiguity = cursor.step().quantifier.contiguity;
        if self.head_of_group(cursor) {
            if let Some(g) = self.group {
                contiguity = if self.group_first_of_loop() {
                    g.quantifier.contiguity
                } else {
                    g.quantifier.inner
                };
            }
        }
        self.strategy_condition(contiguity, cursor)
    }

    fn take_condition(&self, cursor: Cursor<'p, V>) -> Guard<V> {
        extend(Some(condition_of(cursor.step())), &self.group_until(), true).unwrap_or(Guard::True)
    }

    fn true_condition(&self) -> Guard<V> {
        extend(Some(Guard::True), &self.group_until(), true).unwrap_or(Guard::True)
    }

    fn update_with_greedy_condition(&mut self, state: usize, take: &Guard<V>) {
        for t in &mut self.states[state].transitions {
            let guard = std::mem::replace(&mut t.guard, Guard::True);
            t.guard = guard.and(take.clone().not());
        }
    }
}

/// A step's condition: true when it has none.
fn condition_of<V>(step: &Step<V>) -> Guard<V> {
    step.condition
        .clone()
        .map(Guard::Holds)
        .unwrap_or(Guard::True)
}

/// Flink's `extendWithUntilCondition`.
fn extend<V>(
    condition: Option<Guard<V>>,
    until: &Option<Guard<V>>,
    take: bool,
) -> Option<Guard<V>> {
    match (condition, until) {
        (Some(c), Some(u)) => Some(u.clone().not().and(c)),
        (None, Some(u)) if take => Some(u.clone().not()),
        (c, _) => c,
    }
}
