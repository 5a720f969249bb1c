//! The Flink CEP reference catalog (`tests/reference/cep/catalog`) on eddy's side: every
//! scenario's pattern declared with eddy's pattern API ([`scenario`]), and a runner that pipes
//! a scenario's `input.jsonl` (`{"key", "type", "at"}` per line) through eddy's `TestDriver`
//! and writes the matches and timed-out partial matches as the catalog's JSON lines. The
//! catalog test compares them with `expected.jsonl`; `.ci/run` checks with Flink CEP itself
//! that `expected.jsonl` is what Flink gives.
//!
//! The lines are normalized the same way on both sides: grouped by key (keys in order), each
//! key's matches in the order they came out, then its timed-out partial matches sorted (the
//! moment a timeout leaves is not part of either engine's contract).

mod scenarios;

use std::path::{Path, PathBuf};
use std::time::Duration;

use eddy::serde::StringSerde;
use eddy::streams::pattern::PatternMatch;
use eddy::streams::{Consumed, Matching, Materialized, Produced, StreamsBuilder};
use eddy::testing::TestDriver;
use serde_json::{json, Value};

pub use crate::streams_catalog::{read_lines, show_lines};
pub use scenarios::{hold_release, scenario, Scenario};

/// The catalog's folder.
pub fn catalog() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("reference/cep/catalog")
}

/// The names of the catalog's scenarios, sorted.
pub fn scenarios() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(catalog())
        .expect("the catalog folder")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("input.jsonl").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// One event of an input file.
pub struct Event {
    /// The key the pattern runs under.
    pub key: String,
    /// What the pattern's conditions look at.
    pub kind: String,
    /// The record timestamp.
    pub at: i64,
}

/// The events of an `input.jsonl`.
pub fn read_events(path: &Path) -> Vec<Event> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a JSON line");
            Event {
                key: v["key"].as_str().expect("key").to_string(),
                kind: v["type"].as_str().expect("type").to_string(),
                at: v["at"].as_i64().expect("at"),
            }
        })
        .collect()
}

fn found_json(found: &PatternMatch<String>) -> Value {
    Value::Array(
        found
            .steps
            .iter()
            .map(|(name, events)| {
                let events: Vec<Value> = events
                    .iter()
                    .map(|e| json!([e.value, e.timestamp]))
                    .collect();
                json!([name, events])
            })
            .collect(),
    )
}

/// The key no input uses, whose one record moves stream time past every window at the end
/// of the input, as Flink's final watermark does.
const END: &str = "\u{0}end";

/// Runs scenario `name` over its `input.jsonl` through the `TestDriver`; the normalized
/// lines.
pub fn run(name: &str) -> Vec<Value> {
    let events = read_events(&catalog().join(name).join("input.jsonl"));
    run_events(name, &events)
}

/// Runs scenario `name` over `events`; the normalized lines.
pub fn run_events(name: &str, events: &[Event]) -> Vec<Value> {
    let scenario = scenario(name).unwrap_or_else(|| panic!("no scenario {name}"));
    let builder = StreamsBuilder::new();
    let matching = Matching::with(Materialized::named("cep"))
        .allowed_lateness(Duration::from_millis(scenario.lateness_ms))
        .with_timeouts();
    let streams = builder
        .stream("events", Consumed::with(StringSerde, StringSerde))
        .match_pattern_with(scenario.pattern, matching);
    let as_text = |kind: &'static str| {
        move |found: PatternMatch<String>| {
            json!({"kind": kind, "steps": found_json(&found)}).to_string()
        }
    };
    streams
        .matches
        .map_values(as_text("match"))
        .to("found", Produced::with(StringSerde, StringSerde));
    streams
        .timeouts
        .expect("asked for")
        .map_values(as_text("timeout"))
        .to("found", Produced::with(StringSerde, StringSerde));
    let topology = builder.build().expect("a valid scenario");
    let driver = TestDriver::new(topology).expect("a driver");
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic("found", StringSerde, StringSerde);
    let mut last = 0;
    for e in events {
        input
            .pipe_input_at(e.key.clone(), e.kind.clone(), e.at)
            .expect("piped");
        last = last.max(e.at);
    }
    input
        .pipe_input_at(END.to_string(), "end".to_string(), last + 1_000_000_000_000)
        .expect("piped");
    let found: Vec<(String, Value)> = output
        .read_key_values_to_list()
        .into_iter()
        .filter(|(k, _)| k != END)
        .map(|(k, v)| (k, serde_json::from_str(&v).expect("JSON")))
        .collect();
    normalize(found)
}

/// Groups lines by key (keys sorted), matches in order, then timeouts sorted.
pub fn normalize(found: Vec<(String, Value)>) -> Vec<Value> {
    let mut keys: Vec<&String> = found.iter().map(|(k, _)| k).collect();
    keys.sort();
    keys.dedup();
    let mut lines = Vec::new();
    for key in keys {
        let of = |kind: &str| -> Vec<Value> {
            found
                .iter()
                .filter(|(k, v)| k == key && v["kind"] == kind)
                .map(|(_, v)| json!({"key": key, "kind": v["kind"], "steps": v["steps"]}))
                .collect()
        };
        lines.extend(of("match"));
        let mut timeouts = of("timeout");
        timeouts.sort_by_key(|v| v.to_string());
        lines.extend(timeouts);
    }
    lines
}
