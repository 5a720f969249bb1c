//! A streams application's internal topics on a real broker (embedded, or the one
//! `EDDY_TEST_BOOTSTRAP` names: the compatibility suite runs this against Apache Kafka too):
//! created at start with Kafka Streams' partitions and configs, left alone when they are
//! right, refused when they are not; missing source topics and joined topics with other
//! partition counts are clear errors. And the plan they come from (`eddy::app::topics::plan`),
//! worked out without a broker from partition counts as a cluster would answer them.

use std::time::Duration;

use eddy::app::topics::{plan, InternalTopicSpec, TopicPlan};
use eddy::app::{create_internal_topics, StartError, StreamsConfig, TopicError};
use eddy::client::{Admin, NewTopic};
use eddy::serde::{I64Serde, Nullable, StringSerde};
use eddy::streams::internals::InternalTopicKind;
use eddy::streams::windows::{JoinWindows, TimeWindows};
use eddy::streams::{
    Consumed, Grouped, Joined, Materialized, Produced, StreamJoined, StreamsBuilder, Topology,
};
use eddy_tests::TestBroker;

fn strings() -> Consumed<String, String> {
    Consumed::with(StringSerde, StringSerde)
}

/// Clicks counted per page after a re-key, and per user in minute windows.
fn counts(clicks: &str) -> Topology {
    let builder = StreamsBuilder::new();
    let stream = builder.stream(clicks, strings());
    stream
        .clone()
        .select_key(|_user: &String, page: &String| page.clone())
        .group_by_key(Grouped::with(StringSerde, StringSerde))
        .count(Materialized::named("per-page"))
        .to_stream()
        .to(
            "page-counts",
            Produced::with(StringSerde, Nullable(I64Serde)),
        );
    stream
        .group_by_key(Grouped::with(StringSerde, StringSerde))
        .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_secs(60)).unwrap())
        .count(Materialized::named("per-minute"));
    builder.build().unwrap()
}

/// `orders` joined with `payments` within 5 s: inputs that must be co-partitioned.
fn paid(orders: &str, payments: &str) -> Topology {
    let builder = StreamsBuilder::new();
    let windows = JoinWindows::of_time_difference_with_no_grace(Duration::from_secs(5)).unwrap();
    builder
        .stream(orders, strings())
        .join(
            builder.stream(payments, strings()),
            |o: &String, p: &String| format!("{o}{p}"),
            windows,
            StreamJoined::with(StringSerde, StringSerde, StringSerde),
        )
        .to("paid", Produced::with(StringSerde, StringSerde));
    builder.build().unwrap()
}

async fn partitions(admin: &Admin, topic: &str) -> usize {
    admin.describe_topics(&[topic]).await.unwrap()[0]
        .partitions
        .len()
}

#[tokio::test]
async fn internal_topics_are_created_with_kafka_streams_partitions_and_configs() {
    let broker = TestBroker::start().await;
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    let clicks = broker.unique("clicks");
    admin
        .create_topics(&[NewTopic::new(&clicks, 3)])
        .await
        .unwrap();
    let app = broker.unique("counts-app");
    let config = StreamsConfig::new(&app);
    let topology = counts(&clicks);
    let plan = create_internal_topics(&admin, &topology, &config)
        .await
        .unwrap();
    assert_eq!(plan.internal.len(), 3, "{:?}", plan.internal);
    for spec in &plan.internal {
        assert_eq!(partitions(&admin, &spec.name).await, 3, "{}", spec.name);
    }
    let changelog = admin
        .describe_topic_configs(&format!("{app}-per-page-changelog"))
        .await
        .unwrap();
    assert_eq!(
        changelog.get("cleanup.policy").map(String::as_str),
        Some("compact"),
        "{changelog:?}"
    );
    let windowed = admin
        .describe_topic_configs(&format!("{app}-per-minute-changelog"))
        .await
        .unwrap();
    assert_eq!(windowed["cleanup.policy"], "compact,delete");
    assert_eq!(windowed["retention.ms"], "86460000");
    let repartition = plan
        .internal
        .iter()
        .find(|t| t.name.ends_with("-repartition"))
        .unwrap();
    let configs = admin
        .describe_topic_configs(&repartition.name)
        .await
        .unwrap();
    assert_eq!(configs["cleanup.policy"], "delete");
    assert_eq!(configs["retention.ms"], "-1");

    // A second start finds them as they should be.
    let again = create_internal_topics(&admin, &topology, &config)
        .await
        .unwrap();
    assert_eq!(again, plan);
}

#[tokio::test]
async fn an_internal_topic_with_other_partitions_is_refused() {
    let broker = TestBroker::start().await;
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    let clicks = broker.unique("clicks");
    admin
        .create_topics(&[NewTopic::new(&clicks, 2)])
        .await
        .unwrap();
    let app = broker.unique("stale-app");
    let changelog = format!("{app}-per-page-changelog");
    admin
        .create_topics(&[NewTopic::new(&changelog, 5)])
        .await
        .unwrap();
    let error = create_internal_topics(&admin, &counts(&clicks), &StreamsConfig::new(&app))
        .await
        .unwrap_err();
    match &error {
        StartError::InternalTopicPartitions {
            topic,
            expected,
            actual,
        } => assert_eq!((topic, *expected, *actual), (&changelog, 2, 5)),
        other => panic!("{other}"),
    }
    assert!(error.to_string().contains("has 5 partitions"), "{error}");
}

#[tokio::test]
async fn missing_and_mismatched_source_topics_are_clear_errors() {
    let broker = TestBroker::start().await;
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    let missing = broker.unique("never-created");
    let error = create_internal_topics(
        &admin,
        &counts(&missing),
        &StreamsConfig::new(broker.unique("app")),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&error, StartError::Topics(TopicError::MissingSources(t)) if t == std::slice::from_ref(&missing)),
        "{error}"
    );

    let orders = broker.unique("orders");
    let payments = broker.unique("payments");
    admin
        .create_topics(&[NewTopic::new(&orders, 2), NewTopic::new(&payments, 3)])
        .await
        .unwrap();
    let app = broker.unique("join-app");
    let error =
        create_internal_topics(&admin, &paid(&orders, &payments), &StreamsConfig::new(&app))
            .await
            .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "topics joined with one another must have as many partitions each: {orders} has 2, \
             {payments} has 3"
        )
    );
    // Nothing was created for the application that could not start.
    let topics = admin.list_topics(false).await.unwrap();
    assert!(!topics.iter().any(|t| t.starts_with(&app)), "{topics:?}");
}

// The plan itself, without a broker: partition counts as the cluster would answer them.

fn spec<'a>(plan: &'a TopicPlan, name: &str) -> &'a InternalTopicSpec {
    plan.internal
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", plan.internal))
}

fn value<'a>(topic: &'a InternalTopicSpec, key: &str) -> &'a str {
    &topic.configs.iter().find(|(k, _)| k == key).unwrap().1
}

#[test]
fn the_plan_gives_internal_topics_kafka_streams_partitions_and_configs() {
    let topology = counts("clicks");
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
    let per_page = spec(&plan, "app-per-page-changelog");
    assert_eq!(per_page.partitions, 6);
    assert_eq!(value(per_page, "cleanup.policy"), "compact");
    let per_minute = spec(&plan, "app-per-minute-changelog");
    assert_eq!(value(per_minute, "cleanup.policy"), "compact,delete");
    // The store's retention (the window, no grace) and a day.
    assert_eq!(value(per_minute, "retention.ms"), "86460000");
    assert!(plan.tasks.iter().all(|(_, n)| *n == 6), "{:?}", plan.tasks);
    assert_eq!(plan.tasks.len(), topology.subtopologies().len());

    let error = plan_of(&counts("clicks"), |_| None).unwrap_err();
    assert_eq!(error, TopicError::MissingSources(vec!["clicks".into()]));
    assert!(error.to_string().contains("source topics missing: clicks"));
}

fn plan_of(
    topology: &Topology,
    counts: impl Fn(&str) -> Option<i32>,
) -> Result<TopicPlan, TopicError> {
    plan(topology, "app", counts)
}

#[test]
fn the_plan_refuses_joined_topics_with_other_partition_counts() {
    let counts = |t: &str| match t {
        "orders" => Some(4),
        "payments" => Some(3),
        _ => None,
    };
    let error = plan_of(&paid("orders", "payments"), counts).unwrap_err();
    assert_eq!(
        error,
        TopicError::NotCopartitioned(vec![("orders".into(), 4), ("payments".into(), 3)])
    );
    let plan = plan_of(&paid("orders", "payments"), |_| Some(4)).unwrap();
    assert_eq!(plan.tasks, [(0, 4)]);
    // The join's window stores are logged with their retention and a day.
    assert!(plan
        .internal
        .iter()
        .all(|t| t.partitions == 4 && value(t, "cleanup.policy") == "compact,delete"));
}

#[test]
fn the_plan_sizes_a_rekeyed_side_of_a_join_to_the_other() {
    let builder = StreamsBuilder::new();
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
    let topology = builder.build().unwrap();
    let counts = |t: &str| match t {
        "clicks" => Some(8),
        "users" => Some(2),
        _ => None,
    };
    let plan = plan_of(&topology, counts).unwrap();
    let repartition = plan
        .internal
        .iter()
        .find(|t| t.kind == InternalTopicKind::Repartition)
        .unwrap();
    // Eight partitions upstream, but the table it joins has two.
    assert_eq!(repartition.partitions, 2);
    assert_eq!(spec(&plan, "app-users-changelog").partitions, 2);
}
