//! The low-level topology API: what it builds and describes, and what it refuses.

use super::*;
use crate::serde::{I64Serde, StringSerde};
use crate::streams::{ProcessorContext, Record, StreamsError};

/// Forwards each value's length.
struct Lengths;

impl Processor<String, String, String, i64> for Lengths {
    fn process(
        &mut self,
        r: Record<String, String>,
        ctx: &mut ProcessorContext<'_, String, i64>,
    ) -> Result<(), StreamsError> {
        let n = r.value.len() as i64;
        ctx.forward(r.with_value(n));
        Ok(())
    }
}

fn lengths() -> Topology {
    let mut t = Topology::new();
    t.add_source("in", &["words"], StringSerde, StringSerde)
        .unwrap()
        .add_processor("len", || Lengths, &["in"])
        .unwrap()
        .add_sink("out", "lengths", StringSerde, I64Serde, &["len"])
        .unwrap();
    t
}

#[test]
fn the_low_level_api_builds_and_describes_a_topology() {
    assert_eq!(
        lengths().describe().to_string(),
        "Topologies:\n   Sub-topology: 0\n    Source: in (topics: [words])\n      --> len\n    \
         Processor: len (stores: [])\n      --> out\n      <-- in\n    Sink: out (topic: lengths)\n      \
         <-- len\n\n"
    );
}

#[test]
fn a_child_that_takes_another_type_is_refused() {
    let mut t = lengths();
    // `len` forwards i64 values; a sink of strings cannot follow it.
    let err = t
        .add_sink("bad", "x", StringSerde, StringSerde, &["len"])
        .unwrap_err();
    assert!(matches!(err, TopologyError::TypeMismatch { .. }), "{err}");
}

#[test]
fn names_topics_and_parents_are_checked() {
    let mut t = lengths();
    assert!(matches!(
        t.add_source("in", &["other"], StringSerde, StringSerde),
        Err(TopologyError::Duplicate {
            what: "processor",
            ..
        })
    ));
    assert!(matches!(
        t.add_source("in2", &["words"], StringSerde, StringSerde),
        Err(TopologyError::Duplicate { what: "topic", .. })
    ));
    assert!(matches!(
        t.add_processor("p", || Lengths, &["nowhere"]),
        Err(TopologyError::BadConnection { .. })
    ));
    assert!(matches!(
        t.add_processor("p", || Lengths, &["out"]),
        Err(TopologyError::BadConnection { .. })
    ));
}

#[test]
fn processors_sharing_a_store_are_one_sub_topology() {
    let mut t = Topology::new();
    t.add_source("a", &["ta"], StringSerde, StringSerde)
        .unwrap();
    t.add_source("b", &["tb"], StringSerde, StringSerde)
        .unwrap();
    t.add_processor("pa", || Lengths, &["a"]).unwrap();
    t.add_processor("pb", || Lengths, &["b"]).unwrap();
    assert_eq!(t.subtopologies().len(), 2);
    t.add_state_store(
        crate::streams::store::StoreBuilder::key_value("shared", StringSerde, I64Serde),
        &["pa", "pb"],
    )
    .unwrap();
    let subs = t.subtopologies();
    assert_eq!(subs.len(), 1);
    assert_eq!(subs[0].source_topics, ["ta", "tb"]);
    assert_eq!(subs[0].stores, ["shared"]);
    assert_eq!(t.internal_topics()[0].name, "shared-changelog");
}

#[test]
fn the_inputs_of_joins_are_copartitioned_and_no_others() {
    use crate::streams::windows::JoinWindows;
    use crate::streams::{Consumed, Joined, Materialized, Produced, StreamJoined, StreamsBuilder};
    let builder = StreamsBuilder::new();
    let strings = || Consumed::with(StringSerde, StringSerde);
    let orders = builder.stream("orders", strings());
    let payments = builder.stream("payments", strings());
    let windows =
        JoinWindows::of_time_difference_with_no_grace(std::time::Duration::from_secs(5)).unwrap();
    orders
        .join(
            payments,
            |o: &String, p: &String| format!("{o}{p}"),
            windows,
            StreamJoined::with(StringSerde, StringSerde, StringSerde),
        )
        .to("paid", Produced::with(StringSerde, StringSerde));
    let users = builder.table("users", strings(), Materialized::named("users"));
    builder
        .stream("clicks", strings())
        .select_key(|_k: &String, v: &String| v.clone())
        .join_table(
            &users,
            |c: &String, u: &String| format!("{c}{u}"),
            Joined::with(StringSerde, StringSerde),
        )
        .to("enriched", Produced::with(StringSerde, StringSerde));
    builder
        .stream("lonely", strings())
        .to("out", Produced::with(StringSerde, StringSerde));
    let topology = builder.build().unwrap();
    let groups = topology.copartition_groups();
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert_eq!(groups[1], ["orders", "payments"]);
    // The clicks are re-keyed first: their repartition topic meets the table's topic.
    assert_eq!(groups[0].len(), 2);
    assert!(groups[0][0].ends_with("-repartition"), "{groups:?}");
    assert_eq!(groups[0][1], "users");
    let repartition = &groups[0][0];
    let writer = topology
        .subtopologies()
        .into_iter()
        .find(|s| s.sink_topics.contains(repartition))
        .expect("a sub-topology writes the repartition topic");
    assert_eq!(writer.source_topics, ["clicks"]);
}
