//! Timeouts of the client and the stream threads on paused time: the embedded broker runs in
//! the test's own runtime with tokio's clock paused, so Kafka's defaults (a five-minute poll
//! interval, a linger of half a minute, a punctuation a minute) pass in moments, and every
//! deadline is measured on the one clock the client, the stream threads and the broker's
//! coordinators share. A part that read another clock would wait real minutes and fail the
//! bounds asserted here.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use eddy::app::{Bootstrap, ProcessingGuarantee, State, Streams, StreamsConfig};
use eddy::client::{
    Admin, Consumer, ConsumerConfig, NewTopic, OffsetReset, Producer, ProducerConfig,
    ProducerRecord,
};
use eddy::embedded::EmbeddedBroker;
use eddy::serde::{I64Serde, StringSerde};
use eddy::streams::{Consumed, Produced, StreamsBuilder};
use eddy_tests::{wait_for_state, wait_until};
use futures::FutureExt;
use tokio::time::Instant;

use crate::streams_semantics::Ticker;

async fn broker_with_topic(topic: &str, partitions: i32) -> EmbeddedBroker {
    let broker = EmbeddedBroker::start().await.unwrap();
    let admin = Admin::connect(&broker.bootstrap()).await.unwrap();
    admin
        .create_topics(&[NewTopic::new(topic, partitions)])
        .await
        .unwrap();
    broker
}

#[tokio::test(start_paused = true)]
async fn a_member_silent_past_kafkas_default_poll_interval_loses_its_partitions_then() {
    let broker = broker_with_topic("stalls", 4).await;
    // Kafka's defaults: max.poll.interval.ms five minutes, session 45 s, heartbeats every 3 s.
    let config = ConsumerConfig::new(&broker.bootstrap())
        .group_id("stallers")
        .auto_offset_reset(OffsetReset::Earliest);
    let held = Arc::new(AtomicUsize::new(0));
    let steady = tokio::spawn({
        let (config, held) = (config.clone(), Arc::clone(&held));
        async move {
            let mut consumer = Consumer::new(config).unwrap();
            consumer.subscribe(&["stalls"]).unwrap();
            loop {
                consumer.poll(Duration::from_millis(100)).await.unwrap();
                held.store(consumer.assignment().len(), Ordering::Relaxed);
            }
        }
    });
    let mut silent = Consumer::new(config).unwrap();
    silent.subscribe(&["stalls"]).unwrap();
    wait_until(
        Duration::from_secs(120),
        "the group did not settle",
        async || {
            silent.poll(Duration::from_millis(100)).await.unwrap();
            silent.assignment().len() == 2 && held.load(Ordering::Relaxed) == 2
        },
    )
    .await;
    let last_poll = Instant::now();
    wait_until(
        Duration::from_secs(600),
        "the partitions stayed",
        async || held.load(Ordering::Relaxed) == 4,
    )
    .await;
    let silent_for = last_poll.elapsed();
    // Not before the interval; within a heartbeat and a rebalance after it.
    assert!(
        (Duration::from_secs(300)..Duration::from_secs(320)).contains(&silent_for),
        "the partitions moved after {silent_for:?} without a poll"
    );
    steady.abort();
    broker.shutdown().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_batch_lingers_for_linger_ms_and_goes_out_when_it_has_passed() {
    let broker = broker_with_topic("lingering", 1).await;
    let producer = Producer::new(
        ProducerConfig::new(&broker.bootstrap())
            .linger(Duration::from_secs(30))
            .batch_size(1 << 20),
    )
    .unwrap();
    let mut delivery = producer
        .send(ProducerRecord::new("lingering", "late").partition(0))
        .await
        .unwrap();
    let sent = Instant::now();
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert!(
        (&mut delivery).now_or_never().is_none(),
        "delivered before linger.ms"
    );
    let written = delivery.await.unwrap();
    let waited = sent.elapsed();
    assert_eq!(written.offset, 0);
    assert!(
        (Duration::from_secs(30)..Duration::from_secs(31)).contains(&waited),
        "delivered after {waited:?}"
    );
    producer.close().await.unwrap();
    broker.shutdown().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn wall_clock_punctuations_of_a_running_application_follow_tokios_clock() {
    let broker = broker_with_topic("ticks-in", 1).await;
    let admin = Admin::connect(&broker.bootstrap()).await.unwrap();
    admin
        .create_topics(&[NewTopic::new("ticks-out", 1)])
        .await
        .unwrap();
    let builder = StreamsBuilder::new();
    builder
        .stream("ticks-in", Consumed::with(StringSerde, StringSerde))
        .process(|| Ticker { seen: 0 }, &[])
        .to("ticks-out", Produced::with(StringSerde, I64Serde));
    let state = tempfile::tempdir().unwrap();
    let mut config = StreamsConfig::new("ticking");
    config.processing_guarantee = ProcessingGuarantee::ExactlyOnceV2;
    config.bootstrap = Bootstrap::Servers(vec![broker.bootstrap()]);
    config.state_dir = state.path().to_path_buf();
    let mut streams = Streams::new(builder.build().unwrap(), config).unwrap();
    streams.start().await.unwrap();
    wait_for_state(&streams, State::Running).await;
    let producer = Producer::new(ProducerConfig::new(&broker.bootstrap())).unwrap();
    for _ in 0..3 {
        producer
            .send(ProducerRecord::new("ticks-in", "v").key("k".to_string()))
            .await
            .unwrap();
    }
    producer.flush().await.unwrap();

    // The ticker forwards its count every second of wall-clock time: a minute of tokio's
    // clock gives about sixty, their timestamps a second apart.
    let mut reader = Consumer::new(
        ConsumerConfig::new(&broker.bootstrap()).auto_offset_reset(OffsetReset::Earliest),
    )
    .unwrap();
    reader
        .assign(&[eddy::log::TopicPartition::new("ticks-out", 0)])
        .unwrap();
    let started = Instant::now();
    let mut ticks: Vec<(i64, i64)> = Vec::new();
    wait_until(Duration::from_secs(120), "ticks", async || {
        for r in reader.poll(Duration::from_millis(100)).await.unwrap() {
            let count = i64::from_be_bytes(r.value.unwrap()[..].try_into().unwrap());
            ticks.push((count, r.timestamp));
        }
        if started.elapsed() >= Duration::from_secs(60) {
            return Ok(());
        }
        Err(format!("{} so far", ticks.len()))
    })
    .await;
    assert!((50..=62).contains(&ticks.len()), "{} ticks", ticks.len());
    assert_eq!(ticks.last().unwrap().0, 3, "{ticks:?}");
    // The schedule keeps to whole seconds from where it started (the first may come late,
    // when the task first runs); each later one comes within the thread's loop (a poll of
    // 100 ms at most) of its time.
    for pair in ticks.windows(2).skip(1) {
        let apart = pair[1].1 - pair[0].1;
        assert!((900..=1_100).contains(&apart), "{ticks:?}");
    }
    streams.close(Duration::from_secs(30)).await.unwrap();
    producer.close().await.unwrap();
    broker.shutdown().await.unwrap();
}

/// A read_committed consumer of a partition with an open transaction (nothing stable to
/// fetch) and of a busy one: the busy partition's records come within a few milliseconds of
/// tokio's clock, not after a long poll (`fetch.max.wait.ms`, 500 ms) on the other. (A fetch
/// of the idle partition alone, sent while the busy one's answer was still being polled —
/// two records, one a poll — held the busy one back until that fetch expired.)
#[tokio::test(start_paused = true)]
async fn a_partition_with_nothing_stable_does_not_hold_back_a_busy_one() {
    use eddy::client::IsolationLevel;
    use eddy::log::TopicPartition;
    let broker = broker_with_topic("busy", 1).await;
    let admin = Admin::connect(&broker.bootstrap()).await.unwrap();
    admin
        .create_topics(&[NewTopic::new("held", 1)])
        .await
        .unwrap();
    let open =
        Producer::new(ProducerConfig::new(&broker.bootstrap()).transactional_id("open")).unwrap();
    open.init_transactions().await.unwrap();
    open.begin_transaction().unwrap();
    open.send(ProducerRecord::new("held", "pending"))
        .await
        .unwrap()
        .await
        .unwrap();
    let mut consumer = Consumer::new(
        ConsumerConfig::new(&broker.bootstrap())
            .auto_offset_reset(OffsetReset::Earliest)
            .isolation_level(IsolationLevel::ReadCommitted)
            .max_poll_records(1),
    )
    .unwrap();
    consumer
        .assign(&[
            TopicPartition::new("busy", 0),
            TopicPartition::new("held", 0),
        ])
        .unwrap();
    let producer = Producer::new(ProducerConfig::new(&broker.bootstrap())).unwrap();
    const ROUNDS: u32 = 20;
    let started = Instant::now();
    for round in 0..ROUNDS {
        let sent = [0, 1].map(|i| ProducerRecord::new("busy", format!("{round}.{i}")));
        let [first, second] = sent.map(|r| producer.send(r));
        let (first, second) = (first.await.unwrap(), second.await.unwrap());
        first.await.unwrap();
        second.await.unwrap();
        let mut got = 0;
        while got < 2 {
            got += consumer.poll(Duration::from_secs(5)).await.unwrap().len();
        }
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(100) * ROUNDS,
        "{ROUNDS} rounds of two records in {took:?}"
    );
    open.abort_transaction().await.unwrap();
    broker.shutdown().await.unwrap();
}
