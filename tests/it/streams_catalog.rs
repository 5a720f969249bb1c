//! eddy's streams engine held to Kafka Streams' own results: every scenario of the reference
//! catalog (`tests/reference/streams/catalog`) is declared here with eddy's DSL, run through
//! eddy's `TestDriver` on the scenario's `input.jsonl`, and must give exactly the records of
//! its `expected.jsonl` (key, value, timestamp, headers, order) and exactly the text of its
//! `describe.txt`. `.ci/run` checks, with Kafka Streams' `TopologyTestDriver`, that those two
//! files are what Kafka Streams 4.4 gives for the same topology, so the comparison is with
//! Kafka itself.

use eddy_tests::streams_catalog::{catalog, read_lines, run, scenario, scenarios, show_lines};

/// Scenarios whose operations eddy does not have yet; each must be named here on purpose.
const NOT_YET: &[&str] = &[];

#[test]
fn every_catalog_scenario_gives_kafkas_records() {
    let mut failures = Vec::new();
    for name in scenarios()
        .iter()
        .filter(|n| !NOT_YET.contains(&n.as_str()))
    {
        let expected = read_lines(&catalog().join(name).join("expected.jsonl"));
        let actual = run(name, 1);
        if actual != expected {
            failures.push(format!(
                "{name}\n--- Kafka Streams\n{}\n--- eddy\n{}",
                show_lines(&expected),
                show_lines(&actual)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_catalog_scenario_is_described_as_kafka_describes_it() {
    let mut failures = Vec::new();
    for name in scenarios()
        .iter()
        .filter(|n| !NOT_YET.contains(&n.as_str()))
    {
        let expected = std::fs::read_to_string(catalog().join(name).join("describe.txt"))
            .expect("describe.txt");
        let actual = scenario(name).topology.describe().to_string();
        if actual != expected {
            failures.push(format!(
                "{name}\n--- Kafka Streams\n{expected}--- eddy\n{actual}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
