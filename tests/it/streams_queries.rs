//! Interactive queries across two instances of an application (on the embedded broker, or
//! the one `EDDY_TEST_BOOTSTRAP` names): each instance reads the keys of the tasks it runs
//! from its own stores, and `query_metadata_for_key` tells both where every key lives.

use std::collections::BTreeMap;
use std::time::Duration;

use eddy::app::{Bootstrap, ProcessingGuarantee, QueryError, State, Streams, StreamsConfig};
use eddy::client::{Producer, ProducerConfig, ProducerRecord};
use eddy::serde::{I64Serde, Nullable, StringSerde};
use eddy::streams::windows::TimeWindows;
use eddy::streams::{
    Consumed, Grouped, Materialized, Produced, StreamsBuilder, TimeWindowedSerde, Topology,
};
use eddy_tests::{wait_for_state, wait_until, TestBroker};

/// Clicks counted per user, in all and per 10-second window.
fn topology(input: &str, totals: &str, windows: &str) -> Topology {
    let builder = StreamsBuilder::new();
    let clicks = builder.stream(input, Consumed::with(StringSerde, StringSerde));
    let grouped = || {
        clicks
            .clone()
            .group_by_key(Grouped::with(StringSerde, StringSerde))
    };
    grouped()
        .count(Materialized::named("clicks"))
        .to_stream()
        .to(totals, Produced::with(StringSerde, Nullable(I64Serde)));
    grouped()
        .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_secs(10)).unwrap())
        .count(Materialized::named("clicks-per-window"))
        .to_stream()
        .to(
            windows,
            Produced::with(
                TimeWindowedSerde::new(StringSerde, 10_000),
                Nullable(I64Serde),
            ),
        );
    builder.build().unwrap()
}

fn config(app: &str, broker: &TestBroker, state: &std::path::Path, host: &str) -> StreamsConfig {
    let mut config = StreamsConfig::new(app);
    config.processing_guarantee = ProcessingGuarantee::ExactlyOnceV2;
    config.bootstrap = Bootstrap::Servers(vec![broker.bootstrap().to_string()]);
    config.state_dir = state.to_path_buf();
    config.application_server = Some(host.to_string());
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_answer_for_their_keys_and_agree_where_each_key_lives() {
    let broker = TestBroker::start().await;
    let input = broker.create_topic(&broker.unique("clicks"), 4).await;
    let totals = broker.create_topic(&broker.unique("totals"), 4).await;
    let windows = broker.create_topic(&broker.unique("windows"), 4).await;
    let app = broker.unique("query-app");
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let hosts = ["node-a:8080", "node-b:8080"];
    let mut instances = Vec::new();
    for (state, host) in [(&a, hosts[0]), (&b, hosts[1])] {
        let mut streams = Streams::new(
            topology(&input, &totals, &windows),
            config(&app, &broker, state.path(), host),
        )
        .unwrap();
        streams.start().await.unwrap();
        instances.push(streams);
    }
    for streams in &instances {
        wait_for_state(streams, State::Running).await;
    }
    // Twelve users, user-i clicking i + 1 times, all at 5 s.
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    let mut expected = BTreeMap::new();
    for i in 0..12 {
        let user = format!("user-{i}");
        for _ in 0..=i {
            producer
                .send(
                    ProducerRecord::new(&input, "click")
                        .key(user.clone())
                        .timestamp(5_000),
                )
                .await
                .unwrap();
        }
        expected.insert(user, i64::from(i) + 1);
    }
    producer.flush().await.unwrap();

    // Each key answered by the one instance the metadata names, and only there.
    let what = "the instances did not agree on where each key lives, or the stores did not reach \
                the counts";
    wait_until(Duration::from_secs(60), what, async || {
        if let Some(i) = instances.iter().position(|s| s.state() == State::Error) {
            let error = instances[i]
                .close(Duration::from_secs(30))
                .await
                .unwrap_err();
            panic!("instance {i} failed: {error}");
        }
        let mut settled = true;
        for (user, count) in &expected {
            let metadata = instances[0]
                .query_metadata_for_key("clicks", user, &StringSerde)
                .unwrap();
            let elsewhere = instances[1]
                .query_metadata_for_key("clicks", user, &StringSerde)
                .unwrap();
            if metadata != elsewhere {
                // A new assignment reaches the instances one after the other: they agree
                // once both have it.
                settled = false;
                continue;
            }
            let Some(active) = &metadata.active else {
                settled = false;
                continue;
            };
            let at = hosts
                .iter()
                .position(|h| h == active)
                .expect("a known host");
            let here = instances[at]
                .key_value_store::<String, i64>("clicks")
                .unwrap();
            let there = instances[1 - at]
                .key_value_store::<String, i64>("clicks")
                .unwrap();
            settled &= here.get(user).unwrap() == Some(*count);
            assert_eq!(
                there.get(user).unwrap(),
                None,
                "{user} read at the other instance"
            );
            let windows = instances[at]
                .window_store::<String, i64>("clicks-per-window")
                .unwrap();
            settled &= windows.fetch(user, 0, 9_999).unwrap() == [(0, *count)];
        }
        settled
    })
    .await;
    // Between them the instances hold every key once.
    let mut all: Vec<(String, i64)> = Vec::new();
    for streams in &instances {
        all.extend(
            streams
                .key_value_store::<String, i64>("clicks")
                .unwrap()
                .all()
                .unwrap(),
        );
    }
    all.sort();
    let mut wanted: Vec<(String, i64)> = expected.into_iter().collect();
    wanted.sort();
    assert_eq!(all, wanted);
    // Wrong names and types are errors, not empty answers.
    assert!(matches!(
        instances[0].key_value_store::<String, i64>("nope"),
        Err(QueryError::UnknownStore(_))
    ));
    assert!(matches!(
        instances[0].key_value_store::<String, String>("clicks"),
        Err(QueryError::WrongType { .. })
    ));
    assert!(matches!(
        instances[0].window_store::<String, i64>("clicks"),
        Err(QueryError::WrongType { .. })
    ));
    for mut streams in instances {
        streams.close(Duration::from_secs(30)).await.unwrap();
        assert!(matches!(
            streams.key_value_store::<String, i64>("clicks"),
            Err(QueryError::NotRunning(_))
        ));
    }
}
