//! Snapshots of topologies, as users keep them: `describe()` of a dozen topologies of the
//! reference catalog (stateless chains, re-keying before aggregation, windowed aggregations,
//! each kind of join, a global table), and what each gives for its scripted input when every
//! topic has four partitions, where eddy's driver, unlike Kafka's, runs a task per partition
//! and moves re-keyed records through repartition topics. A change in either shows as a diff.

use eddy_tests::streams_catalog::{run, scenario};

const SNAPSHOTTED: &[&str] = &[
    "stateless-chain",
    "split-merge",
    "word-count",
    "repartition-count",
    "named-chain",
    "windowed-count",
    "hopping-count",
    "sliding-total",
    "session-count",
    "stream-join-outer",
    "stream-table-join-left",
    "table-join-outer",
    "table-group-reduce",
    "suppress-window-close",
    "global-join-left",
    "first-seen",
];

#[test]
fn topologies_are_described_as_their_snapshots() {
    for name in SNAPSHOTTED {
        let text = scenario(name).topology.describe().to_string();
        insta::assert_snapshot!(format!("describe-{name}"), text);
    }
}

#[test]
fn outputs_with_four_partitions_are_their_snapshots() {
    for name in SNAPSHOTTED {
        let lines: Vec<String> = run(name, 4).iter().map(|v| v.to_string()).collect();
        insta::assert_snapshot!(format!("four-partitions-{name}"), lines.join("\n"));
    }
}
