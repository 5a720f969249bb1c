//! A pattern running for real on a broker, exactly once: the fraud job's hold-release pattern
//! over the catalog's orders, its state wiped half-way through the input and rebuilt from the
//! store's changelog, finds exactly the matches an uninterrupted run through the `TestDriver`
//! finds.

use std::time::Duration;

use eddy::app::{Bootstrap, ProcessingGuarantee, State, Streams, StreamsConfig};
use eddy::client::{Producer, ProducerConfig, ProducerRecord};
use eddy::serde::StringSerde;
use eddy::streams::pattern::PatternMatch;
use eddy::streams::{Consumed, Materialized, Produced, StreamsBuilder, Topology};
use eddy::testing::TestDriver;
use eddy_tests::cep_catalog::{catalog, hold_release, read_events, Event};
use eddy_tests::{wait_for_state, wait_until, TestBroker};

fn detecting(input: &str, output: &str) -> Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream(input, Consumed::with(StringSerde, StringSerde))
        .match_pattern(hold_release(), Materialized::named("holds"))
        .map_values(|m: PatternMatch<String>| {
            m.all()
                .map(|e| format!("{}@{}", e.value, e.timestamp))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .to(output, Produced::with(StringSerde, StringSerde));
    builder.build().unwrap()
}

/// What an uninterrupted run finds, sorted.
fn uninterrupted(events: &[Event]) -> Vec<(String, String)> {
    let driver = TestDriver::new(detecting("events", "alerts")).unwrap();
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic("alerts", StringSerde, StringSerde);
    for e in events {
        input
            .pipe_input_at(e.key.clone(), e.kind.clone(), e.at)
            .unwrap();
    }
    let mut found = output.read_key_values_to_list();
    found.sort();
    found
}

async fn produce(broker: &TestBroker, topic: &str, events: &[Event]) {
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    for e in events {
        producer
            .send(
                ProducerRecord::new(topic, e.kind.clone())
                    .key(e.key.clone())
                    .timestamp(e.at),
            )
            .await
            .unwrap();
    }
    producer.flush().await.unwrap();
}

/// Reads `topic` (committed records only) until it holds `count` records.
async fn read(broker: &TestBroker, topic: &str, count: usize) -> Vec<(String, String)> {
    let mut consumer = broker.committed_reader(topic).await;
    let mut found = Vec::new();
    wait_until(
        Duration::from_secs(60),
        format!("not {count} records"),
        async || {
            for r in consumer.poll(Duration::from_millis(200)).await.unwrap() {
                let text =
                    |b: Option<bytes::Bytes>| String::from_utf8(b.unwrap().to_vec()).unwrap();
                found.push((text(r.key), text(r.value)));
            }
            found.len() >= count
        },
    )
    .await;
    // Anything more would be a duplicate: give it a moment to show.
    for r in consumer.poll(Duration::from_millis(500)).await.unwrap() {
        let text = |b: Option<bytes::Bytes>| String::from_utf8(b.unwrap().to_vec()).unwrap();
        found.push((text(r.key), text(r.value)));
    }
    found.sort();
    found
}

async fn running(input: &str, output: &str, config: StreamsConfig) -> Streams {
    let mut streams = Streams::new(detecting(input, output), config).unwrap();
    streams.start().await.unwrap();
    wait_for_state(&streams, State::Running).await;
    streams
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pattern_restored_from_its_changelog_mid_stream_finds_what_an_uninterrupted_run_finds() {
    let events = read_events(&catalog().join("many-keys").join("input.jsonl"));
    let expected = uninterrupted(&events);
    assert!(expected.len() >= 10, "{expected:?}");
    let (first, second) = events.split_at(events.len() / 2);
    let before = uninterrupted(first);
    assert!(
        !before.is_empty() && before.len() < expected.len(),
        "the split falls among matches"
    );

    let broker = TestBroker::start().await;
    let input = broker.create_topic(&broker.unique("order-events"), 2).await;
    let output = broker.create_topic(&broker.unique("fraud-alerts"), 2).await;
    let app = broker.unique("patterns");
    let state = tempfile::tempdir().unwrap();
    let config = || {
        let mut config = StreamsConfig::new(&app);
        config.processing_guarantee = ProcessingGuarantee::ExactlyOnceV2;
        config.bootstrap = Bootstrap::Servers(vec![broker.bootstrap().to_string()]);
        config.state_dir = state.path().to_path_buf();
        config.commit_interval_ms = Some(Duration::from_millis(100));
        config
    };

    let mut streams = running(&input, &output, config()).await;
    produce(&broker, &input, first).await;
    assert_eq!(read(&broker, &output, before.len()).await, before);
    streams.close(Duration::from_secs(30)).await.unwrap();

    // The state directory gone, the partial matches come back from the changelog.
    streams.cleanup().unwrap();
    let mut streams = running(&input, &output, config()).await;
    produce(&broker, &input, second).await;
    assert_eq!(read(&broker, &output, expected.len()).await, expected);
    let figures = streams.metrics();
    assert!(figures.records_restored > 0, "{figures:?}");
    streams.close(Duration::from_secs(30)).await.unwrap();
}
