//! A streams application running for real on a broker (embedded, or the one
//! `EDDY_TEST_BOOTSTRAP` names): a count by key with its state in sled, at-least-once and
//! exactly-once. It counts what it reads, keeps counting after a clean restart (its state on
//! disk, nothing to restore), and after its state directory is wiped (restored from the
//! changelog).

use std::collections::BTreeMap;
use std::time::Duration;

use eddy::app::{Bootstrap, ProcessingGuarantee, StartError, State, Streams, StreamsConfig};
use eddy::client::{Admin, Producer, ProducerConfig, ProducerRecord};
use eddy::serde::{I64Serde, Nullable, StringSerde};
use eddy::streams::{Consumed, Grouped, Materialized, Produced, StreamsBuilder, Topology};
use eddy_tests::{wait_for_state, wait_until, TestBroker};

fn counting(input: &str, output: &str) -> Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream(input, Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::with(StringSerde, StringSerde))
        .count(Materialized::named("counts"))
        .to_stream()
        .to(output, Produced::with(StringSerde, Nullable(I64Serde)));
    builder.build().unwrap()
}

pub(crate) fn config(
    app: &str,
    broker: &TestBroker,
    state: &std::path::Path,
    guarantee: ProcessingGuarantee,
) -> StreamsConfig {
    let mut config = StreamsConfig::new(app);
    config.processing_guarantee = guarantee;
    config.bootstrap = Bootstrap::Servers(vec![broker.bootstrap().to_string()]);
    config.state_dir = state.to_path_buf();
    config.commit_interval_ms = Some(Duration::from_millis(100));
    config
}

pub(crate) async fn produce(broker: &TestBroker, topic: &str, keys: &[&str]) {
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    for key in keys {
        producer
            .send(ProducerRecord::new(topic, "x").key(key.to_string()))
            .await
            .unwrap();
    }
    producer.flush().await.unwrap();
}

/// Reads `topic` from the start until each key's latest count is `expected`'s.
pub(crate) async fn latest_counts(
    broker: &TestBroker,
    topic: &str,
    expected: &BTreeMap<String, i64>,
) -> BTreeMap<String, i64> {
    let mut consumer = broker.committed_reader(topic).await;
    let mut latest = BTreeMap::new();
    wait_until(
        Duration::from_secs(60),
        "the latest counts are",
        async || {
            for r in consumer.poll(Duration::from_millis(200)).await.unwrap() {
                let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
                let value = i64::from_be_bytes(r.value.unwrap()[..].try_into().unwrap());
                latest.insert(key, value);
            }
            if &latest == expected {
                return Ok(());
            }
            Err(format!("{latest:?}, not {expected:?}"))
        },
    )
    .await;
    latest
}

/// The application started, once its threads have their tasks.
pub(crate) async fn running(input: &str, output: &str, config: StreamsConfig) -> Streams {
    let mut streams = Streams::new(counting(input, output), config).unwrap();
    streams.start().await.unwrap();
    wait_for_state(&streams, State::Running).await;
    streams
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_once_a_count_by_key_runs_restarts_and_restores() {
    counts_run_restart_and_restore(ProcessingGuarantee::AtLeastOnce).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_a_count_by_key_runs_restarts_and_restores() {
    counts_run_restart_and_restore(ProcessingGuarantee::ExactlyOnceV2).await;
}

async fn counts_run_restart_and_restore(guarantee: ProcessingGuarantee) {
    let broker = TestBroker::start().await;
    let input = broker.create_topic(&broker.unique("words"), 2).await;
    let output = broker.create_topic(&broker.unique("word-counts"), 2).await;
    let app = broker.unique("count-app");
    let state = tempfile::tempdir().unwrap();

    let mut streams = Streams::new(
        counting(&input, &output),
        config(&app, &broker, state.path(), guarantee),
    )
    .unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    streams.set_state_listener(move |new, old| log.lock().unwrap().push((old, new)));
    streams.start().await.unwrap();
    wait_for_state(&streams, State::Running).await;
    // An application starts once.
    let again = streams.start().await.unwrap_err();
    assert!(
        matches!(again, StartError::NotCreated(State::Running)),
        "{again}"
    );
    produce(&broker, &input, &["a", "b", "a", "c", "a", "b"]).await;
    let mut expected = BTreeMap::from([
        ("a".to_string(), 3),
        ("b".to_string(), 2),
        ("c".to_string(), 1),
    ]);
    assert_eq!(latest_counts(&broker, &output, &expected).await, expected);
    // The figures: six records, counted through commits that reached both partitions' ends.
    // Waited for together: the lags are reported at every commit, an empty one before the
    // records came too (each partition then at its end, 0), and the output is readable once
    // the transaction committed, a moment before the thread counts the commit.
    wait_until(Duration::from_secs(30), "the figures", async || {
        let figures = streams.metrics();
        let lag = &figures.lag;
        if figures.records_processed == 6
            && figures.commits > 0
            && lag.len() == 2
            && lag.values().all(|&l| l == 0)
        {
            return Ok(());
        }
        Err(format!("{figures:?}"))
    })
    .await;
    let figures = streams.metrics();
    assert_eq!(figures.records_processed, 6, "{figures:?}");
    assert!(figures.commits > 0 && figures.rebalances > 0, "{figures:?}");
    assert!(figures.commit_latency_max >= figures.commit_latency_avg);
    assert_eq!(figures.lag.len(), 2, "{figures:?}");
    assert!(figures.lag.values().all(|&l| l == 0), "{figures:?}");
    assert_eq!(figures.records_restored, 0);
    streams.close(Duration::from_secs(30)).await.unwrap();
    assert_eq!(streams.state(), State::NotRunning);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (State::Created, State::Rebalancing),
            (State::Rebalancing, State::Running),
            (State::Running, State::PendingShutdown),
            (State::PendingShutdown, State::NotRunning),
        ]
    );

    // Restarted over the same state: the counts go on.
    let mut streams = running(
        &input,
        &output,
        config(&app, &broker, state.path(), guarantee),
    )
    .await;
    produce(&broker, &input, &["a", "c"]).await;
    expected.insert("a".into(), 4);
    expected.insert("c".into(), 2);
    assert_eq!(latest_counts(&broker, &output, &expected).await, expected);
    streams.close(Duration::from_secs(30)).await.unwrap();

    // With its state directory gone, the application rebuilds its store from the changelog.
    streams.cleanup().unwrap();
    assert!(!state.path().join(&app).exists());
    let mut streams = running(
        &input,
        &output,
        config(&app, &broker, state.path(), guarantee),
    )
    .await;
    produce(&broker, &input, &["b"]).await;
    expected.insert("b".into(), 3);
    assert_eq!(latest_counts(&broker, &output, &expected).await, expected);
    // Rebuilt from the changelog: at least one record per key restored, nothing left.
    let figures = streams.metrics();
    assert!(figures.records_restored >= 3, "{figures:?}");
    assert_eq!(figures.records_to_restore, 0, "{figures:?}");
    streams.close(Duration::from_secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_claims_more_than_its_changelog_holds_is_refused() {
    let broker = TestBroker::start().await;
    let input = broker.create_topic(&broker.unique("words"), 1).await;
    let output = broker.create_topic(&broker.unique("word-counts"), 1).await;
    let app = broker.unique("ahead-app");
    let state = tempfile::tempdir().unwrap();
    let guarantee = ProcessingGuarantee::AtLeastOnce;
    let mut streams = running(
        &input,
        &output,
        config(&app, &broker, state.path(), guarantee),
    )
    .await;
    produce(&broker, &input, &["a", "b", "a"]).await;
    let expected = BTreeMap::from([("a".to_string(), 2), ("b".to_string(), 1)]);
    assert_eq!(latest_counts(&broker, &output, &expected).await, expected);
    streams.close(Duration::from_secs(30)).await.unwrap();

    // The changelog starts over (another cluster, say) while the store keeps its offset.
    let admin = eddy::client::Admin::connect(broker.bootstrap())
        .await
        .unwrap();
    let changelog = format!("{app}-counts-changelog");
    admin.delete_topics(&[&changelog]).await.unwrap();
    wait_until(Duration::from_secs(30), "the changelog stays", async || {
        !admin.list_topics(false).await.unwrap().contains(&changelog)
    })
    .await;
    let mut streams = Streams::new(
        counting(&input, &output),
        config(&app, &broker, state.path(), guarantee),
    )
    .unwrap();
    streams.start().await.unwrap();
    wait_for_state(&streams, State::Error).await;
    let error = streams
        .close(Duration::from_secs(30))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("past the changelog's end"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_streams_benchmark_processes_every_record_of_each_workload() {
    use eddy::internals::bench::streams::{run, StreamsLoad, StreamsWorkload};
    let broker = TestBroker::start().await;
    let state = tempfile::tempdir().unwrap();
    for workload in [
        StreamsWorkload::Stateless,
        StreamsWorkload::CountByKey,
        StreamsWorkload::WindowedCount,
    ] {
        let load = StreamsLoad {
            workload,
            records: 3_000,
            keys: 100,
            value_size: 100,
            partitions: 2,
            guarantee: ProcessingGuarantee::ExactlyOnceV2,
            commit_interval: Some(Duration::from_millis(100)),
            threads: 1,
            checkpoint_interval: None,
            restore: workload != StreamsWorkload::Stateless,
            properties: vec![("statestore.memory.max.bytes".into(), "100663296".into())],
        };
        let dir = state.path().join(format!("{workload:?}"));
        let figures = run(broker.bootstrap(), &load, &dir, &mut |_| {})
            .await
            .unwrap();
        assert_eq!(figures.records, 3_000, "{workload:?}");
        assert!(
            figures.commits > 0 && figures.records_per_sec() > 0.0,
            "{workload:?}"
        );
        // The thread's time was measured, and no more of it than passed (one thread). (What
        // went to commits may fall outside the measured run: a run this small can be
        // processed and its commit started before the run's clock starts.)
        let time = figures.thread_time;
        assert!(time.processing > Duration::ZERO, "{workload:?}: {time:?}");
        assert!(
            time.total() <= figures.elapsed + Duration::from_millis(500),
            "{workload:?}: {time:?} in {:?}",
            figures.elapsed
        );
        let shares: f64 = time.shares().iter().map(|(_, share)| share).sum();
        assert!((shares - 1.0).abs() < 1e-9, "{workload:?}: {shares}");
        match figures.restore {
            // Every key's count is in the changelog at least once, and no more often than
            // it was updated.
            Some(restore) => assert!(
                (100..=3_000).contains(&restore.records),
                "{workload:?}: {restore:?}"
            ),
            None => assert_eq!(workload, StreamsWorkload::Stateless),
        }
    }
}

/// State on disk for a task the application does not run here is dropped once
/// `state.cleanup.delay.ms` has passed; the state of the tasks it runs stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_tasks_not_run_here_is_dropped_after_the_cleanup_delay() {
    use eddy::store::SledStores;
    use eddy::streams::store::{StoreBuilder, StoreSupplier};
    let broker = TestBroker::start().await;
    let input = broker.create_topic(&broker.unique("words"), 1).await;
    let output = broker.create_topic(&broker.unique("word-counts"), 1).await;
    let app = broker.unique("cleaned-app");
    let state = tempfile::tempdir().unwrap();
    let guarantee = ProcessingGuarantee::ExactlyOnceV2;
    let config = config(&app, &broker, state.path(), guarantee)
        .state_cleanup_delay(Duration::from_millis(200));
    // State an earlier run left for a task this topology does not have.
    let dir = config.application_state_dir();
    {
        let stores = SledStores::new(&dir);
        let old = StoreBuilder::key_value("old", StringSerde, I64Serde);
        let mut store = stores.inner("7_0", &old);
        store.write_batch(&mut [(&b"k"[..], Some(&b"v"[..]))].into_iter(), Some(1));
    }
    let on_disk = |dir: &std::path::Path| -> Vec<String> {
        SledStores::new(dir)
            .offsets_on_disk()
            .into_iter()
            .map(|(task, _)| task)
            .collect()
    };
    assert_eq!(on_disk(&dir), ["7_0"]);
    let mut streams = running(&input, &output, config).await;
    produce(&broker, &input, &["a"]).await;
    let expected = BTreeMap::from([("a".to_string(), 1)]);
    assert_eq!(latest_counts(&broker, &output, &expected).await, expected);
    // The thread runs on, idle, well past the delay.
    run_on(&streams, Duration::from_millis(1200)).await;
    streams.close(Duration::from_secs(30)).await.unwrap();
    assert_eq!(on_disk(&dir), ["0_0"]);
}

/// Waits until the application's stream threads have run `time` more.
pub(crate) async fn run_on(streams: &Streams, time: Duration) {
    let ran = streams.metrics().thread_time.total();
    wait_until(
        Duration::from_secs(30),
        "the thread to run on",
        async || {
            let now = streams.metrics().thread_time.total();
            if now >= ran + time {
                return Ok(());
            }
            Err(format!("it ran {now:?}"))
        },
    )
    .await;
}

/// A broker with input and output topics of two partitions, and the settings of an
/// exactly-once application (its id from `name`) with its state in a fresh directory.
struct Fixture {
    broker: TestBroker,
    input: String,
    output: String,
    app: String,
    state: tempfile::TempDir,
    config: StreamsConfig,
}

async fn exactly_once_fixture(name: &str) -> Fixture {
    let broker = TestBroker::start().await;
    let input = broker.create_topic(&broker.unique("words"), 2).await;
    let output = broker.create_topic(&broker.unique("word-counts"), 2).await;
    let app = broker.unique(name);
    let state = tempfile::tempdir().unwrap();
    let config = config(
        &app,
        &broker,
        state.path(),
        ProcessingGuarantee::ExactlyOnceV2,
    );
    Fixture {
        broker,
        input,
        output,
        app,
        state,
        config,
    }
}

/// Two instances of one application, one of them fenced again and again: each time it
/// closes its tasks dirty, pauses their partitions (read again from the last commit once
/// tasks take them) and rejoins, while the other goes on processing and is drawn into the
/// rebalance. Every key's committed counts rise one way and end at the records written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_stay_exact_when_a_fenced_member_waits_for_the_group_to_rebalance() {
    const KEYS: usize = 20;
    const ROUNDS: usize = 150;
    let Fixture {
        broker,
        input,
        output,
        app,
        state,
        mut config,
    } = exactly_once_fixture("fenced-member-app").await;
    config.commit_interval_ms = Some(Duration::from_millis(20));
    let mut first = running(&input, &output, config.clone()).await;
    let mut second_config = config;
    second_config.state_dir = state.path().join("second");
    let mut second = Streams::new(counting(&input, &output), second_config).unwrap();
    second.start().await.unwrap();
    wait_for_state(&second, State::Running).await;

    let writer = write_bursts(&broker, &input, KEYS, ROUNDS);
    // One member's transactional id is taken from it, again and again.
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    let mut victim: Option<String> = None;
    let mut fenced = 0;
    while !writer.is_finished() {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let listed = admin.list_transactions().await.unwrap();
        let id = match &victim {
            Some(id) => id.clone(),
            None => match listed
                .iter()
                .map(|t| &t.transactional_id)
                .find(|id| id.starts_with(&app))
            {
                Some(id) => id.clone(),
                None => continue,
            },
        };
        victim = Some(id.clone());
        let fencer =
            Producer::new(ProducerConfig::new(broker.bootstrap()).transactional_id(&id)).unwrap();
        fencer.init_transactions().await.unwrap();
        fencer.close().await.unwrap();
        fenced += 1;
    }
    writer.await.unwrap();
    assert!(fenced >= 3, "fenced {fenced} times");

    counts_rise_to(&broker, &output, KEYS, ROUNDS).await;
    first.close(Duration::from_secs(30)).await.unwrap();
    second.close(Duration::from_secs(30)).await.unwrap();
}

/// With `group.instance.id` set, each stream thread is a static member of its own, named as
/// Kafka Streams names them: the id, a dash and the thread's number from 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_thread_is_a_static_member_of_its_own() {
    let mut fixture = exactly_once_fixture("static-app").await;
    let config = &mut fixture.config;
    config.num_stream_threads = 2;
    config.set("consumer.group.instance.id", "node-a").unwrap();
    let (app, config) = (&fixture.app, fixture.config.clone());
    let mut streams = running(&fixture.input, &fixture.output, config).await;
    let admin = Admin::connect(fixture.broker.bootstrap()).await.unwrap();
    wait_until(
        Duration::from_secs(30),
        "the members' instance ids are",
        async || {
            let group = admin.describe_group(app).await.unwrap();
            let mut instances: Vec<String> = group
                .members
                .iter()
                .filter_map(|m| m.group_instance_id.clone())
                .collect();
            instances.sort();
            if instances == ["node-a-1", "node-a-2"] {
                return Ok(());
            }
            Err(format!("{instances:?}"))
        },
    )
    .await;
    streams.close(Duration::from_secs(30)).await.unwrap();
}

/// Writes `rounds` bursts of one record for each of `keys` keys (`k0`, `k1`, …) to `input`,
/// 10 ms apart, in the background.
fn write_bursts(
    broker: &TestBroker,
    input: &str,
    keys: usize,
    rounds: usize,
) -> tokio::task::JoinHandle<()> {
    let (bootstrap, input) = (broker.bootstrap().to_string(), input.to_string());
    tokio::spawn(async move {
        let producer = Producer::new(ProducerConfig::new(&bootstrap)).unwrap();
        for _ in 0..rounds {
            for key in 0..keys {
                let record = ProducerRecord::new(&*input, "x").key(format!("k{key}"));
                producer.send(record).await.unwrap();
            }
            producer.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
}

/// Reads `output`'s committed counts until each of `keys` keys reaches `rounds`; each key's
/// counts must only rise and never pass it.
async fn counts_rise_to(broker: &TestBroker, output: &str, keys: usize, rounds: usize) {
    let mut consumer = broker.committed_reader(output).await;
    let mut latest: BTreeMap<String, i64> = BTreeMap::new();
    wait_until(Duration::from_secs(90), "every count", async || {
        for r in consumer.poll(Duration::from_millis(200)).await.unwrap() {
            let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
            let count = i64::from_be_bytes(r.value.unwrap()[..].try_into().unwrap());
            let last = latest.insert(key.clone(), count).unwrap_or(0);
            assert!(count > last, "{key}: {count} after {last}");
            assert!(count <= rounds as i64, "{key}: {count}");
        }
        if latest.len() == keys && latest.values().all(|&n| n == rounds as i64) {
            return Ok(());
        }
        Err(format!("{latest:?}"))
    })
    .await;
}

/// Exactly-once holds while the thread's producer is fenced again and again in mid-stream
/// (another producer takes its transactional id). The transaction of one interval commits
/// while the next interval's records are processed: a fence that fails the commit in flight
/// takes the interval behind it down too, and both are processed again from the last
/// commit. Every key's committed counts rise one way and end at what was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_stay_exact_when_the_threads_producer_is_fenced_mid_stream() {
    const KEYS: usize = 20;
    const ROUNDS: usize = 150;
    let Fixture {
        broker,
        input,
        output,
        app,
        state: _state,
        mut config,
    } = exactly_once_fixture("fenced-app").await;
    config.commit_interval_ms = Some(Duration::from_millis(20));
    let mut streams = running(&input, &output, config).await;

    // Input arrives in small bursts for a while.
    let writer = write_bursts(&broker, &input, KEYS, ROUNDS);
    // Meanwhile its transactional id is taken from it, again and again.
    let admin = Admin::connect(broker.bootstrap()).await.unwrap();
    let mut fenced = 0;
    while !writer.is_finished() {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let listed = admin.list_transactions().await.unwrap();
        let Some(id) = listed
            .iter()
            .map(|t| &t.transactional_id)
            .find(|id| id.starts_with(&app))
        else {
            continue;
        };
        let fencer =
            Producer::new(ProducerConfig::new(broker.bootstrap()).transactional_id(id)).unwrap();
        fencer.init_transactions().await.unwrap();
        fencer.close().await.unwrap();
        fenced += 1;
    }
    writer.await.unwrap();
    assert!(fenced >= 3, "fenced {fenced} times");

    // Read committed: each key's counts only rise, and end at the records written.
    counts_rise_to(&broker, &output, KEYS, ROUNDS).await;
    streams.close(Duration::from_secs(30)).await.unwrap();
}
