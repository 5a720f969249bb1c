//! eddy's streams engine held to Kafka Streams on random inputs: for every catalog scenario,
//! seeded inputs ([`generate`]) run through Kafka Streams' `TopologyTestDriver`
//! ([`mod@reference`]) and through eddy's `TestDriver`, and the two outputs must be the same
//! records (key, value, timestamp, headers) in the same order. A disagreement is shrunk
//! ([`shrink`]) to a small input that still disagrees, ready to join the catalog.
//!
//! The command is `cargo run -p eddy-tests --bin streams-differential`; `.ci/run` runs a fixed
//! range of seeds, and `--seeds`/`--first-seed` run as many more as one likes.

pub mod generate;
pub mod reference;
pub mod shrink;

use std::fmt;
use std::io;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::streams_catalog::{catalog, read_lines, try_run_lines};
use generate::{seed_of, Vocabulary};
use reference::KafkaStreamsReference;

/// What a driver gave for an input: its output lines, or the error it stopped with.
pub type Outcome = Result<Vec<Value>, String>;

/// Whether two outcomes agree: the same output lines in the same order, or both drivers
/// refused the input.
pub fn agree(kafka: &Outcome, eddy: &Outcome) -> bool {
    match (kafka, eddy) {
        (Ok(kafka), Ok(eddy)) => kafka == eddy,
        (Err(_), Err(_)) => true,
        _ => false,
    }
}

/// eddy's outcome for `input`, with one partition per topic as Kafka's driver has; a panic in
/// the engine is an outcome too (an error), so it is shrunk and reported like any other
/// disagreement.
pub fn eddy_outcome(name: &str, input: &[Value]) -> Outcome {
    catch_unwind(AssertUnwindSafe(|| try_run_lines(name, input, 1))).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("a panic");
        Err(format!("panicked: {message}"))
    })
}

/// The vocabulary of scenario `name`: its fixed input's.
pub fn vocabulary(name: &str) -> Vocabulary {
    Vocabulary::of(&read_lines(&catalog().join(name).join("input.jsonl")))
}

/// A seed on which the drivers disagree, with the shrunk input.
#[derive(Debug)]
pub struct Disagreement {
    /// The scenario.
    pub scenario: String,
    /// The first seed found that disagrees.
    pub seed: u64,
    /// How many seeds of the scenario disagree.
    pub seeds_disagreeing: usize,
    /// The seed's input, shrunk.
    pub input: Vec<Value>,
    /// Kafka Streams' outcome for the shrunk input.
    pub kafka: Outcome,
    /// eddy's outcome for the shrunk input.
    pub eddy: Outcome,
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} seed {} ({} of the seeds run disagree); shrunk input, {} lines:",
            self.scenario,
            self.seed,
            self.seeds_disagreeing,
            self.input.len()
        )?;
        for line in &self.input {
            writeln!(f, "  {line}")?;
        }
        for (driver, outcome) in [("Kafka Streams", &self.kafka), ("eddy", &self.eddy)] {
            writeln!(f, "--- {driver}")?;
            match outcome {
                Ok(lines) => {
                    for line in lines {
                        writeln!(f, "  {line}")?;
                    }
                }
                Err(error) => writeln!(f, "  error: {error}")?,
            }
        }
        if let (Ok(kafka), Ok(eddy)) = (&self.kafka, &self.eddy) {
            let at = kafka
                .iter()
                .zip(eddy)
                .position(|(k, e)| k != e)
                .unwrap_or(kafka.len().min(eddy.len()));
            writeln!(f, "first difference at output line {}", at + 1)?;
        }
        Ok(())
    }
}

/// What a run of many seeds compared.
#[derive(Debug, Default)]
pub struct Report {
    /// Scenarios run.
    pub scenarios: usize,
    /// Inputs run through both drivers.
    pub inputs: usize,
    /// Their lines (records and wall-clock steps).
    pub input_lines: usize,
    /// Output records compared (Kafka's count, where the drivers agree).
    pub records: usize,
    /// Inputs both drivers refused (they agree on that, and nothing is compared).
    pub refused: usize,
    /// One disagreement per scenario that has any.
    pub disagreements: Vec<Disagreement>,
    /// Time spent.
    pub elapsed: Duration,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} scenarios, {} inputs ({} input lines), {} output records compared, \
             {} inputs refused by both drivers, {} scenarios disagreeing, in {:.1} s",
            self.scenarios,
            self.inputs,
            self.input_lines,
            self.records,
            self.refused,
            self.disagreements.len(),
            self.elapsed.as_secs_f64()
        )
    }
}

/// Runs the seeds `seeds` of every scenario in `scenarios` through both drivers.
pub fn run(
    reference: &mut KafkaStreamsReference,
    scenarios: &[String],
    seeds: Range<u64>,
) -> io::Result<Report> {
    let started = Instant::now();
    let mut report = Report::default();
    for name in scenarios {
        let words = vocabulary(name);
        let inputs: Vec<Vec<Value>> = seeds
            .clone()
            .map(|seed| words.generate(seed_of(name, seed)))
            .collect();
        // eddy's side runs beside the JVM's.
        let (kafka, eddy) = std::thread::scope(|scope| {
            let eddy = scope.spawn(|| {
                inputs
                    .iter()
                    .map(|input| eddy_outcome(name, input))
                    .collect::<Vec<_>>()
            });
            let kafka = reference.run_many(name, &inputs);
            (kafka, eddy.join().expect("eddy's outcomes are caught"))
        });
        let kafka = kafka?;
        report.scenarios += 1;
        let mut first_disagreeing = None;
        let mut seeds_disagreeing = 0;
        for ((seed, input), (k, e)) in seeds.clone().zip(&inputs).zip(kafka.iter().zip(&eddy)) {
            report.inputs += 1;
            report.input_lines += input.len();
            if !agree(k, e) {
                seeds_disagreeing += 1;
                first_disagreeing.get_or_insert((seed, input));
            } else if let Ok(lines) = k {
                report.records += lines.len();
            } else {
                report.refused += 1;
            }
        }
        if let Some((seed, input)) = first_disagreeing {
            let mut failure = None;
            let shrunk = shrink::shrink(input.clone(), |candidate| {
                match reference.run(name, candidate) {
                    Ok(kafka) => !agree(&kafka, &eddy_outcome(name, candidate)),
                    Err(e) => {
                        failure.get_or_insert(e);
                        false
                    }
                }
            });
            if let Some(e) = failure {
                return Err(e);
            }
            report.disagreements.push(Disagreement {
                scenario: name.clone(),
                seed,
                seeds_disagreeing,
                kafka: reference.run(name, &shrunk)?,
                eddy: eddy_outcome(name, &shrunk),
                input: shrunk,
            });
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::streams_catalog::scenarios;
    use serde_json::json;

    #[test]
    fn a_seed_names_one_input_and_seeds_differ() {
        let words = vocabulary("stream-join-outer");
        let a = words.generate(seed_of("stream-join-outer", 7));
        assert_eq!(a, words.generate(seed_of("stream-join-outer", 7)));
        let distinct: std::collections::BTreeSet<String> = (0..20)
            .map(|s| serde_json::to_string(&words.generate(seed_of("stream-join-outer", s))))
            .map(Result::unwrap)
            .collect();
        assert_eq!(distinct.len(), 20, "twenty seeds, twenty inputs");
        assert_ne!(seed_of("word-count", 1), seed_of("stateless-chain", 1));
    }

    #[test]
    fn inputs_hold_what_the_generator_promises() {
        let mut seen = std::collections::BTreeSet::new();
        for name in [
            "stream-join-outer",
            "table-filter",
            "event-time-in-value",
            "word-count",
        ] {
            let words = vocabulary(name);
            for seed in 0..200 {
                for line in words.generate(seed_of(name, seed)) {
                    if line.get("advance_wall_clock_ms").is_some() {
                        seen.insert("wall clock");
                        continue;
                    }
                    assert!(line["timestamp"].as_i64().is_some_and(|t| t >= 0), "{line}");
                    for (what, field) in [("null key", "key"), ("null value", "value")] {
                        if line[field].is_null() {
                            seen.insert(what);
                        }
                    }
                    if line.get("headers").is_some() {
                        seen.insert("headers");
                    }
                    if name == "event-time-in-value" {
                        let value = line["value"].as_str().expect("a string value");
                        let (at, _) = value.split_once('|').expect("time|tag");
                        at.parse::<i64>().expect("an event time");
                    }
                    if name == "table-filter" && !line["value"].is_null() {
                        line["value"].as_i64().expect("a long value");
                    }
                }
            }
        }
        let all = ["headers", "null key", "null value", "wall clock"];
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), all);
    }

    #[test]
    fn keys_include_neighbours_in_byte_order() {
        let words = Vocabulary::of(&[
            json!({"topic": "t", "key": "alice", "value": "v", "timestamp": 0}),
            json!({"topic": "t", "key": "bob", "value": "v", "timestamp": 0}),
            json!({"topic": "t", "key": "zoe", "value": "v", "timestamp": 0}),
        ]);
        let keys: std::collections::BTreeSet<String> = (0..200)
            .flat_map(|s| words.generate(s))
            .filter_map(|l| l["key"].as_str().map(str::to_string))
            .collect();
        // The first two keys get neighbours: "zoe" is only itself.
        let expected = ["alic", "alice", "alicex", "bo", "bob", "bobx", "zoe"];
        assert_eq!(keys.into_iter().collect::<Vec<_>>(), expected);
    }

    /// The runner panics on a line it cannot read (a topic the scenario does not read, a
    /// value its codec cannot write): generated inputs have none.
    #[test]
    fn every_scenario_reads_its_generated_inputs() {
        for name in scenarios() {
            let words = vocabulary(&name);
            for seed in 0..3 {
                let input = words.generate(seed_of(&name, seed));
                if let Err(e) = eddy_outcome(&name, &input) {
                    assert!(!e.starts_with("panicked"), "{name} seed {seed}: {e}");
                }
            }
        }
    }

    #[test]
    fn shrinking_keeps_only_what_the_failure_needs() {
        let line = |key: &str, n: i64| json!({"topic": "t", "key": key, "value": "v", "timestamp": n, "headers": {"h": "x"}});
        let input: Vec<Value> = (0..40)
            .map(|n| line(["a", "b", "c"][(n % 3) as usize], n))
            .collect();
        // Fails while some "b" comes after a "c" at time 30 or later.
        let fails = |lines: &[Value]| {
            let c = lines
                .iter()
                .position(|l| l["key"] == "c" && l["timestamp"].as_i64() >= Some(30));
            c.is_some_and(|at| lines[at + 1..].iter().any(|l| l["key"] == "b"))
        };
        let shrunk = shrink::shrink(input, fails);
        assert_eq!(shrunk.len(), 2, "{shrunk:?}");
        assert!(fails(&shrunk));
        assert!(shrunk.iter().all(|l| l.get("headers").is_none()));
    }

    #[test]
    fn outcomes_agree_on_equal_records_or_two_refusals() {
        let a = json!({"topic": "t", "key": "k", "value": 1, "timestamp": 0});
        let b = json!({"topic": "t", "key": "k", "value": 2, "timestamp": 0});
        assert!(agree(&Ok(vec![a.clone()]), &Ok(vec![a.clone()])));
        assert!(!agree(&Ok(vec![a.clone()]), &Ok(vec![b.clone()])));
        assert!(!agree(&Ok(vec![a.clone(), b.clone()]), &Ok(vec![b, a])));
        assert!(agree(&Err("x".into()), &Err("y".into())));
        assert!(!agree(&Ok(vec![]), &Err("y".into())));
    }
}
