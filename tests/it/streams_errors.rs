//! Error handlers of a streams application on a broker (embedded, or the one
//! `EDDY_TEST_BOOTSTRAP` names): records that fail to deserialize, to be processed or to be
//! produced stop the application by default; with the `continue` handlers they are
//! skipped, and with a dead-letter topic they land there as KIP-1034 writes them (raw key
//! and value, the error and the input's origin in `__streams.errors.*` headers), inside the
//! exactly-once transaction.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eddy::app::{Bootstrap, ProcessingGuarantee, State, Streams, StreamsConfig, ThreadResponse};
use eddy::client::{
    Consumer, ConsumerConfig, ConsumerRecord, IsolationLevel, OffsetReset, Producer,
    ProducerConfig, ProducerRecord,
};
use eddy::serde::{I64Serde, StringSerde};
use eddy::streams::{
    Consumed, Processor, ProcessorContext, Produced, Record, StreamsBuilder, StreamsError, Topology,
};
use eddy_tests::{wait_for_state, wait_until, TestBroker};

/// Fails on negative values, forwards the others.
struct NoNegatives;

impl Processor<String, i64, String, i64> for NoNegatives {
    fn process(
        &mut self,
        record: Record<String, i64>,
        ctx: &mut ProcessorContext<'_, String, i64>,
    ) -> Result<(), StreamsError> {
        if record.value < 0 {
            return Err(StreamsError::processor(
                "no-negatives",
                format!("{} is negative", record.value),
            ));
        }
        ctx.forward(record);
        Ok(())
    }
}

/// Longs in, longs out; values of 1,000 or more become a 4 KiB string.
fn topology(input: &str, output: &str) -> Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream(input, Consumed::with(StringSerde, I64Serde))
        .process(|| NoNegatives, &[])
        .map_values(|v: i64| {
            if v >= 1_000 {
                "x".repeat(4_096)
            } else {
                v.to_string()
            }
        })
        .to(output, Produced::with(StringSerde, StringSerde));
    builder.build().unwrap()
}

fn config(app: &str, broker: &TestBroker, state: &std::path::Path) -> StreamsConfig {
    let mut config = StreamsConfig::new(app);
    config.processing_guarantee = ProcessingGuarantee::ExactlyOnceV2;
    config.bootstrap = Bootstrap::Servers(vec![broker.bootstrap().to_string()]);
    config.state_dir = state.to_path_buf();
    config
}

async fn produce(broker: &TestBroker, topic: &str, values: &[Bytes]) {
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    for value in values {
        producer
            .send(
                ProducerRecord::new(topic, value.clone())
                    .key("k")
                    .partition(0),
            )
            .await
            .unwrap();
    }
    producer.flush().await.unwrap();
}

fn long(v: i64) -> Bytes {
    Bytes::copy_from_slice(&v.to_be_bytes())
}

/// Reads `topic` (one partition) with read_committed until it holds `n` records, or up to
/// its committed end with `n` = 0.
async fn read(broker: &TestBroker, topic: &str, n: usize) -> Vec<ConsumerRecord> {
    let mut consumer = Consumer::new(
        ConsumerConfig::new(broker.bootstrap())
            .auto_offset_reset(OffsetReset::Earliest)
            .isolation_level(IsolationLevel::ReadCommitted),
    )
    .unwrap();
    let tp = eddy::log::TopicPartition::new(topic, 0);
    consumer.assign(std::slice::from_ref(&tp)).unwrap();
    consumer
        .seek_to_beginning(std::slice::from_ref(&tp))
        .await
        .unwrap();
    let end = consumer
        .end_offsets(std::slice::from_ref(&tp))
        .await
        .unwrap()[&tp];
    let mut records = Vec::new();
    wait_until(Duration::from_secs(60), "not all read", async || {
        let at = consumer.position(&tp).await.unwrap();
        if (n == 0 && at >= end) || (n > 0 && records.len() >= n) {
            return true;
        }
        records.extend(consumer.poll(Duration::from_millis(200)).await.unwrap());
        false
    })
    .await;
    records
}

fn headers(record: &ConsumerRecord) -> BTreeMap<String, String> {
    record
        .headers
        .iter()
        .map(|h| {
            let value = h.value.as_deref().unwrap_or_default();
            (h.key.clone(), String::from_utf8_lossy(value).into_owned())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_records_go_to_the_dead_letter_topic_with_their_origin() {
    let broker = TestBroker::start().await;
    let input = broker.create_topic(&broker.unique("readings"), 1).await;
    let output = broker.create_topic(&broker.unique("kept"), 1).await;
    let dlq = broker.create_topic(&broker.unique("dead-letters"), 1).await;
    let state = tempfile::tempdir().unwrap();
    let mut config = config(&broker.unique("dlq-app"), &broker, state.path());
    for (key, value) in [
        (
            "deserialization.exception.handler",
            "LogAndContinueExceptionHandler",
        ),
        (
            "processing.exception.handler",
            "LogAndContinueProcessingExceptionHandler",
        ),
        ("errors.dead.letter.queue.topic.name", dlq.as_str()),
    ] {
        config.set(key, value).unwrap();
    }
    let mut streams = Streams::new(topology(&input, &output), config).unwrap();
    streams.start().await.unwrap();
    wait_for_state(&streams, State::Running).await;
    let inputs = [long(1), Bytes::from_static(b"abc"), long(-5), long(2)];
    produce(&broker, &input, &inputs).await;

    let kept = read(&broker, &output, 2).await;
    let values: Vec<&[u8]> = kept.iter().map(|r| r.value.as_deref().unwrap()).collect();
    assert_eq!(values, [&b"1"[..], b"2"]);
    let letters = read(&broker, &dlq, 2).await;
    assert_eq!(letters.len(), 2);
    // The raw bytes as they came, whatever failed.
    assert_eq!(letters[0].value.as_deref(), Some(&b"abc"[..]));
    assert_eq!(letters[1].value.as_deref(), Some(&long(-5)[..]));
    assert_eq!(letters[0].key.as_deref(), Some(&b"k"[..]));
    for (letter, offset) in letters.iter().zip([1, 2]) {
        let h = headers(letter);
        assert_eq!(h["__streams.errors.topic"], input);
        assert_eq!(h["__streams.errors.partition"], "0");
        assert_eq!(h["__streams.errors.offset"], offset.to_string());
        for name in ["exception", "message", "stacktrace"] {
            assert!(!h[&format!("__streams.errors.{name}")].is_empty(), "{h:?}");
        }
    }
    let deser = headers(&letters[0]);
    assert!(
        deser["__streams.errors.exception"].contains("Serde"),
        "{deser:?}"
    );
    let processing = headers(&letters[1]);
    assert!(
        processing["__streams.errors.message"].contains("-5 is negative"),
        "{processing:?}"
    );
    assert_eq!(streams.state(), State::Running);
    streams.close(Duration::from_secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_record_that_cannot_be_read_stops_the_application() {
    let broker = TestBroker::start().await;
    let input = broker.create_topic(&broker.unique("readings"), 1).await;
    let output = broker.create_topic(&broker.unique("kept"), 1).await;
    let state = tempfile::tempdir().unwrap();
    let config = config(&broker.unique("fail-app"), &broker, state.path());
    let mut streams = Streams::new(topology(&input, &output), config).unwrap();
    streams.start().await.unwrap();
    wait_for_state(&streams, State::Running).await;
    produce(
        &broker,
        &input,
        &[long(1), Bytes::from_static(b"abc"), long(2)],
    )
    .await;
    wait_for_state(&streams, State::Error).await;
    let error = streams.close(Duration::from_secs(30)).await.unwrap_err();
    let error = error.to_string();
    assert!(
        error.contains(&format!("{input}-0@1 failed (Deserialization)")),
        "{error}"
    );
    assert!(error.contains("3 bytes where 8 were expected"), "{error}");
    // Exactly-once: nothing after the last commit is visible, the bad record never passed.
    let kept = read(&broker, &output, 0).await;
    assert!(kept.len() <= 1, "{kept:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_the_producer_refuses_is_skipped_with_the_production_handler() {
    let broker = TestBroker::start().await;
    let input = broker.create_topic(&broker.unique("readings"), 1).await;
    let output = broker.create_topic(&broker.unique("kept"), 1).await;
    let state = tempfile::tempdir().unwrap();
    let mut config = config(&broker.unique("production-app"), &broker, state.path());
    config
        .set("production.exception.handler", "continue")
        .unwrap();
    // A 4 KiB output is over the limit; the others are not.
    config.set("producer.max.request.size", "2048").unwrap();
    let mut streams = Streams::new(topology(&input, &output), config).unwrap();
    streams.start().await.unwrap();
    wait_for_state(&streams, State::Running).await;
    produce(&broker, &input, &[long(1), long(5_000), long(3)]).await;
    let kept = read(&broker, &output, 2).await;
    let values: Vec<&[u8]> = kept.iter().map(|r| r.value.as_deref().unwrap()).collect();
    assert_eq!(values, [&b"1"[..], b"3"]);
    assert_eq!(streams.state(), State::Running);
    streams.close(Duration::from_secs(30)).await.unwrap();
}

/// Fails on the first record valued 42 this process sees, forwards everything else.
struct FailsOnceOn42(Arc<AtomicBool>);

impl Processor<String, i64, String, i64> for FailsOnceOn42 {
    fn process(
        &mut self,
        record: Record<String, i64>,
        ctx: &mut ProcessorContext<'_, String, i64>,
    ) -> Result<(), StreamsError> {
        if record.value == 42 && !self.0.swap(true, Ordering::SeqCst) {
            return Err(StreamsError::processor("fails-once", "42, the first time"));
        }
        ctx.forward(record);
        Ok(())
    }
}

fn failing_once(input: &str, output: &str, failed: Arc<AtomicBool>) -> Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream(input, Consumed::with(StringSerde, I64Serde))
        .process(move || FailsOnceOn42(failed.clone()), &[])
        .to(output, Produced::with(StringSerde, I64Serde));
    builder.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_thread_is_replaced_and_the_output_stays_exactly_once() {
    let broker = TestBroker::start().await;
    let input = broker.create_topic(&broker.unique("numbers"), 1).await;
    let output = broker.create_topic(&broker.unique("copied"), 1).await;
    let state = tempfile::tempdir().unwrap();
    let failed = Arc::new(AtomicBool::new(false));
    let config = config(&broker.unique("replace-app"), &broker, state.path());
    let mut streams = Streams::new(failing_once(&input, &output, failed.clone()), config).unwrap();
    let asked = Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
    streams.set_uncaught_error_handler(move |_| {
        count.fetch_add(1, Ordering::SeqCst);
        ThreadResponse::ReplaceThread
    });
    streams.start().await.unwrap();
    wait_for_state(&streams, State::Running).await;
    produce(&broker, &input, &[long(1), long(42), long(3)]).await;
    let copied = read(&broker, &output, 3).await;
    let values: Vec<i64> = copied
        .iter()
        .map(|r| i64::from_be_bytes(r.value.as_deref().unwrap().try_into().unwrap()))
        .collect();
    // The failed thread's transaction was aborted; its replacement processed all three.
    assert_eq!(values, [1, 42, 3]);
    assert!(failed.load(Ordering::SeqCst));
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert_eq!(streams.state(), State::Running);
    streams.close(Duration::from_secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_down_the_application_stops_every_instance() {
    let broker = TestBroker::start().await;
    let input = broker.create_topic(&broker.unique("numbers"), 1).await;
    let output = broker.create_topic(&broker.unique("copied"), 1).await;
    let app = broker.unique("shutdown-app");
    let failed = Arc::new(AtomicBool::new(false));
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut instances = Vec::new();
    for state in [&first, &second] {
        let mut config = config(&app, &broker, state.path());
        config.num_stream_threads = 2;
        let topology = failing_once(&input, &output, failed.clone());
        let mut streams = Streams::new(topology, config).unwrap();
        streams.set_uncaught_error_handler(|_| ThreadResponse::ShutdownApplication);
        streams.start().await.unwrap();
        instances.push(streams);
    }
    for streams in &instances {
        wait_for_state(streams, State::Running).await;
    }
    produce(&broker, &input, &[long(1), long(42)]).await;
    // One instance's thread fails; its other thread carries the request to the group, and
    // both instances stop.
    for streams in &instances {
        wait_for_state(streams, State::Error).await;
    }
    let mut errors = Vec::new();
    for mut streams in instances {
        errors.push(
            streams
                .close(Duration::from_secs(30))
                .await
                .unwrap_err()
                .to_string(),
        );
    }
    errors.sort();
    assert!(
        errors[0].contains("asked it to shut down") || errors[1].contains("asked it to shut down"),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("42, the first time")),
        "{errors:?}"
    );
    // The failed thread left the group; the three that took the order stay until their
    // sessions end, as Kafka Streams' members do, so that none of them starts a rebalance
    // that a member syncing late would get instead of the order.
    let admin = eddy::client::Admin::connect(broker.bootstrap())
        .await
        .unwrap();
    let group = admin.describe_group(&app).await.unwrap();
    assert_eq!(group.state, eddy::client::GroupState::Stable, "{group:?}");
    assert_eq!(group.members.len(), 3, "{group:?}");
}
