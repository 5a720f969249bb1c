//! The fraud job's hold-release pattern as a user snapshots it: `describe()` of its topology
//! (a filter to an order's holds and releases, the pattern with its store, matches and
//! timed-out partial matches to topics of their own) and what it gives for the catalog's
//! hold-release orders. A change in either shows as a diff.

use eddy::serde::StringSerde;
use eddy::streams::pattern::PatternMatch;
use eddy::streams::{Consumed, Matching, Materialized, Produced, StreamsBuilder, Topology};
use eddy::testing::TestDriver;
use eddy_tests::cep_catalog::{catalog, hold_release, read_events};

fn topology() -> Topology {
    let builder = StreamsBuilder::new();
    let found = builder
        .stream("order-events", Consumed::with(StringSerde, StringSerde))
        .filter(|_, kind| kind == "held" || kind == "released")
        .match_pattern_with(
            hold_release(),
            Matching::with(Materialized::named("hold-release")).with_timeouts(),
        );
    let text = |m: PatternMatch<String>| {
        m.steps
            .iter()
            .map(|(step, events)| {
                let events: Vec<String> = events
                    .iter()
                    .map(|e| format!("{}@{}", e.value, e.timestamp))
                    .collect();
                format!("{step}=[{}]", events.join(" "))
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    found
        .matches
        .map_values(text)
        .to("fraud-alerts", Produced::with(StringSerde, StringSerde));
    found
        .timeouts
        .expect("asked for")
        .map_values(text)
        .to("partial-holds", Produced::with(StringSerde, StringSerde));
    builder.build().unwrap()
}

#[test]
fn the_hold_release_topology_is_described_as_its_snapshot() {
    insta::assert_snapshot!(topology().describe().to_string());
}

#[test]
fn the_hold_release_outputs_are_their_snapshot() {
    let driver = TestDriver::new(topology()).unwrap();
    let input = driver.create_input_topic("order-events", StringSerde, StringSerde);
    let alerts = driver.create_output_topic("fraud-alerts", StringSerde, StringSerde);
    let partial = driver.create_output_topic("partial-holds", StringSerde, StringSerde);
    let events = read_events(&catalog().join("hold-release").join("input.jsonl"));
    for e in &events {
        input
            .pipe_input_at(e.key.clone(), e.kind.clone(), e.at)
            .unwrap();
    }
    // An order's event long after the rest moves stream time past every window.
    let end = events.iter().map(|e| e.at).max().unwrap_or(0) + 3_600_000;
    input
        .pipe_input_at("end".into(), "confirmed".into(), end)
        .unwrap();
    let lines = |records: Vec<eddy::testing::TestRecord<String, String>>| {
        records
            .into_iter()
            .map(|r| format!("{} @{} {}", r.key, r.timestamp, r.value))
            .collect::<Vec<_>>()
            .join("\n")
    };
    insta::assert_snapshot!("alerts", lines(alerts.read_records_to_list()));
    insta::assert_snapshot!("partial-holds", lines(partial.read_records_to_list()));
}
