//! A streams application's internal topics on a real broker (embedded, or the one
//! `EDDY_TEST_BOOTSTRAP` names: the compatibility suite runs this against Apache Kafka too):
//! created at start with Kafka Streams' partitions and configs, left alone when they are
//! right, refused when they are not; missing source topics and joined topics with other
//! partition counts are clear errors.

use std::time::Duration;

use eddy::app::{create_internal_topics, StartError, StreamsConfig, TopicError};
use eddy::client::{Admin, NewTopic};
use eddy::serde::{I64Serde, Nullable, StringSerde};
use eddy::streams::windows::{JoinWindows, TimeWindows};
use eddy::streams::{
    Consumed, Grouped, Materialized, Produced, StreamJoined, StreamsBuilder, Topology,
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
    let builder = StreamsBuilder::new();
    let windows = JoinWindows::of_time_difference_with_no_grace(Duration::from_secs(5)).unwrap();
    builder
        .stream(&orders, strings())
        .join(
            builder.stream(&payments, strings()),
            |o: &String, p: &String| format!("{o}{p}"),
            windows,
            StreamJoined::with(StringSerde, StringSerde, StringSerde),
        )
        .to("paid", Produced::with(StringSerde, StringSerde));
    let app = broker.unique("join-app");
    let error =
        create_internal_topics(&admin, &builder.build().unwrap(), &StreamsConfig::new(&app))
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
