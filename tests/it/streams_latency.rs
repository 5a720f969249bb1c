//! The latency benchmark (`eddy bench latency`) against a running exactly-once application
//! that echoes its input: every record written after the warmup is timed to its echo, and
//! the percentiles come in order.

use std::time::Duration;

use eddy::app::{Bootstrap, ProcessingGuarantee, State, Streams, StreamsConfig};
use eddy::internals::bench::latency::{run, LatencyLoad};
use eddy::serde::{I64Serde, StringSerde};
use eddy::streams::{Consumed, Produced, StreamsBuilder};
use eddy_tests::{wait_for_state, TestBroker};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_record_written_is_timed_to_its_echo() {
    let broker = TestBroker::start().await;
    let input = broker.create_topic(&broker.unique("data"), 2).await;
    let output = broker.create_topic(&broker.unique("echo"), 2).await;
    let builder = StreamsBuilder::new();
    builder
        .stream(&input, Consumed::with(StringSerde, I64Serde))
        .to(&output, Produced::with(StringSerde, I64Serde));
    let state = tempfile::tempdir().unwrap();
    let mut config = StreamsConfig::new(broker.unique("echo-app"));
    config.processing_guarantee = ProcessingGuarantee::ExactlyOnceV2;
    config.bootstrap = Bootstrap::Servers(vec![broker.bootstrap().to_string()]);
    config.state_dir = state.path().to_path_buf();
    config.commit_interval_ms = Some(Duration::from_millis(100));
    let mut streams = Streams::new(builder.build().unwrap(), config).unwrap();
    streams.start().await.unwrap();
    wait_for_state(&streams, State::Running).await;

    let load = LatencyLoad {
        input,
        output,
        rate: 2_000,
        duration: Duration::from_secs(2),
        warmup: Duration::from_secs(1),
        keys: 10,
        drain: Duration::from_secs(3),
        read_uncommitted: false,
    };
    let figures = run(broker.bootstrap(), &load).await.unwrap();
    assert!(figures.sent > 0, "{figures:?}");
    assert_eq!(figures.received, figures.sent, "{figures:?}");
    assert!(figures.rate > 0.0, "{figures:?}");
    assert!(
        Duration::ZERO < figures.p50
            && figures.p50 <= figures.p99
            && figures.p99 <= figures.p999
            && figures.p999 <= figures.max,
        "{figures:?}"
    );
    streams.close(Duration::from_secs(30)).await.unwrap();
}
