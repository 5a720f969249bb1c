//! eddy's pattern detection held to Flink CEP's own results: every scenario of the reference
//! catalog (`tests/reference/cep/catalog`) is declared with eddy's pattern API, run through
//! eddy's `TestDriver` on the scenario's `input.jsonl`, and must give exactly the matches of
//! its `expected.jsonl` (key, events per step, order of matches) and the same timed-out
//! partial matches. `.ci/run` checks, with Flink CEP 2.3, that `expected.jsonl` is what Flink
//! gives for the same pattern and input, so the comparison is with Flink itself.

use eddy_tests::cep_catalog::{catalog, read_lines, run, scenario, scenarios, show_lines};

#[test]
fn every_catalog_scenario_gives_flinks_matches() {
    let names = scenarios();
    assert!(
        names.len() >= 20,
        "the catalog has {} scenarios",
        names.len()
    );
    let mut failures = Vec::new();
    for name in &names {
        let expected = read_lines(&catalog().join(name).join("expected.jsonl"));
        let actual = run(name);
        if actual != expected {
            failures.push(format!(
                "{name}\n--- Flink CEP\n{}\n--- eddy\n{}",
                show_lines(&expected),
                show_lines(&actual)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_scenario_has_a_pattern_and_every_pattern_is_valid() {
    for name in scenarios() {
        let s = scenario(&name).unwrap_or_else(|| panic!("{name} has no pattern"));
        assert_eq!(s.pattern.validate(), Ok(()), "{name}");
    }
}
