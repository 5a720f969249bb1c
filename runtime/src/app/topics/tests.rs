use std::time::Duration;

use eddy_core::serde::{I64Serde, Nullable, StringSerde};
use eddy_core::streams::windows::TimeWindows;
use eddy_core::streams::{Consumed, Grouped, Materialized, Produced, StreamsBuilder};

use super::*;

fn strings() -> Consumed<String, String> {
    Consumed::with(StringSerde, StringSerde)
}

/// Counts per key after a re-key, and per key in 1-minute windows: a repartition topic, a
/// key-value store and a window store.
fn counts() -> Topology {
    let builder = StreamsBuilder::new();
    let clicks = builder.stream("clicks", strings());
    clicks
        .clone()
        .select_key(|_k: &String, v: &String| v.clone())
        .group_by_key(Grouped::with(StringSerde, StringSerde))
        .count(Materialized::named("per-page"))
        .to_stream()
        .to(
            "page-counts",
            Produced::with(StringSerde, Nullable(I64Serde)),
        );
    clicks
        .group_by_key(Grouped::with(StringSerde, StringSerde))
        .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_secs(60)).unwrap())
        .count(Materialized::named("per-minute"));
    builder.build().unwrap()
}

fn config<'a>(plan: &'a TopicPlan, name: &str) -> &'a InternalTopicSpec {
    plan.internal
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", plan.internal))
}

fn value<'a>(topic: &'a InternalTopicSpec, key: &str) -> &'a str {
    &topic.configs.iter().find(|(k, _)| k == key).unwrap().1
}

#[test]
fn internal_topics_get_partitions_and_configs_as_kafka_streams_gives_them() {
    let topology = counts();
    let plan = plan(&topology, "app", |t| (t == "clicks").then_some(6)).unwrap();
    let repartition = plan
        .internal
        .iter()
        .find(|t| t.kind == InternalTopicKind::Repartition)
        .unwrap();
    assert!(repartition.name.starts_with("app-") && repartition.name.ends_with("-repartition"));
    assert_eq!(repartition.partitions, 6);
    assert_eq!(value(repartition, "cleanup.policy"), "delete");
    assert_eq!(value(repartition, "retention.ms"), "-1");
    let per_page = config(&plan, "app-per-page-changelog");
    assert_eq!(per_page.partitions, 6);
    assert_eq!(value(per_page, "cleanup.policy"), "compact");
    let per_minute = config(&plan, "app-per-minute-changelog");
    assert_eq!(value(per_minute, "cleanup.policy"), "compact,delete");
    // The store's retention (the window, no grace) and a day.
    assert_eq!(value(per_minute, "retention.ms"), "86460000");
    assert!(plan.tasks.iter().all(|(_, n)| *n == 6), "{:?}", plan.tasks);
    assert_eq!(plan.tasks.len(), topology.subtopologies().len());
}

#[test]
fn a_missing_source_topic_is_named() {
    let error = plan(&counts(), "app", |_| None).unwrap_err();
    assert_eq!(error, TopicError::MissingSources(vec!["clicks".into()]));
    assert!(error.to_string().contains("source topics missing: clicks"));
}

fn join() -> Topology {
    let builder = StreamsBuilder::new();
    crate::app::fixtures::orders_joined_with_payments(&builder)
        .to("paid", Produced::with(StringSerde, StringSerde));
    builder.build().unwrap()
}

#[test]
fn joined_topics_with_different_partition_counts_are_refused() {
    let counts = |t: &str| match t {
        "orders" => Some(4),
        "payments" => Some(3),
        _ => None,
    };
    let error = plan(&join(), "app", counts).unwrap_err();
    assert_eq!(
        error,
        TopicError::NotCopartitioned(vec![("orders".into(), 4), ("payments".into(), 3)])
    );
    assert_eq!(
        error.to_string(),
        "topics joined with one another must have as many partitions each: orders has 4, \
         payments has 3"
    );
    let plan = plan(&join(), "app", |_| Some(4)).unwrap();
    assert_eq!(plan.tasks, [(0, 4)]);
    // The join's window stores are logged with their retention and a day.
    assert!(plan
        .internal
        .iter()
        .all(|t| t.partitions == 4 && value(t, "cleanup.policy") == "compact,delete"));
}

#[test]
fn a_rekeyed_side_of_a_join_is_sized_to_the_other() {
    let builder = StreamsBuilder::new();
    let users = builder.table("users", strings(), Materialized::named("users"));
    builder
        .stream("clicks", strings())
        .select_key(|_k: &String, v: &String| v.clone())
        .join_table(
            &users,
            |c: &String, u: &String| format!("{c}{u}"),
            eddy_core::streams::Joined::with(StringSerde, StringSerde),
        )
        .to("enriched", Produced::with(StringSerde, StringSerde));
    let topology = builder.build().unwrap();
    let counts = |t: &str| match t {
        "clicks" => Some(8),
        "users" => Some(2),
        _ => None,
    };
    let plan = plan(&topology, "app", counts).unwrap();
    let repartition = plan
        .internal
        .iter()
        .find(|t| t.kind == InternalTopicKind::Repartition)
        .unwrap();
    // Eight partitions upstream, but the table it joins has two.
    assert_eq!(repartition.partitions, 2);
    assert_eq!(config(&plan, "app-users-changelog").partitions, 2);
}
