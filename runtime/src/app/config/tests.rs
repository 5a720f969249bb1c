use super::*;

#[test]
fn the_defaults_are_kafka_streams_defaults() {
    let config = StreamsConfig::new("orders");
    assert_eq!(config.bootstrap, Bootstrap::Embedded);
    assert_eq!(config.num_stream_threads, 1);
    assert_eq!(
        config.processing_guarantee,
        ProcessingGuarantee::AtLeastOnce
    );
    assert_eq!(config.commit_interval(), Duration::from_secs(30));
    assert_eq!(config.statestore_cache_max_bytes, 10_485_760);
    assert_eq!(config.acceptable_recovery_lag, 10_000);
    assert_eq!(config.max_warmup_replicas, 2);
    assert_eq!(config.probing_rebalance_interval, Duration::from_secs(600));
    assert_eq!(config.num_standby_replicas, 0);
    assert_eq!(config.state_checkpoint_interval, Duration::from_secs(5));
    assert_eq!(config.statestore_memory_max_bytes, 256 << 20);
    assert_eq!(config.state_checkpoint_max_bytes, None);
    assert_eq!(config.state_cleanup_delay, Duration::from_secs(600));
    assert_eq!(
        config.state_memory(),
        StateMemory {
            record_caches: 30 << 20,
            write_buffers: 64 << 20,
            page_cache: 130 << 20,
        }
    );
    assert_eq!(config.max_task_idle, Some(Duration::ZERO));
    assert_eq!(config.emit_intervals.outer_join_ms, 1_000);
    assert_eq!(config.emit_intervals.windowed_aggregation_ms, 1_000);
    assert_eq!(config.deserialization_handling, ErrorHandling::Fail);
    assert_eq!(config.production_handling, ErrorHandling::Fail);
    assert!(config
        .application_state_dir()
        .ends_with("kafka-streams/orders"));
    config.validate().unwrap();
}

#[test]
fn exactly_once_commits_every_100_ms_unless_told_otherwise() {
    let config = StreamsConfig::from_properties([
        ("application.id", "a"),
        ("processing.guarantee", "exactly_once_v2"),
    ])
    .unwrap();
    assert_eq!(config.commit_interval(), Duration::from_millis(100));
    let config = StreamsConfig::from_properties([
        ("application.id", "a"),
        ("processing.guarantee", "exactly_once_v2"),
        ("commit.interval.ms", "1000"),
    ])
    .unwrap();
    assert_eq!(config.commit_interval(), Duration::from_secs(1));
}

#[test]
fn properties_set_the_typed_fields() {
    let config = StreamsConfig::from_properties([
        ("application.id", "fraud"),
        ("bootstrap.servers", "a:9092, b:9092"),
        ("num.stream.threads", "4"),
        ("state.dir", "/var/lib/eddy"),
        ("num.standby.replicas", "1"),
        ("statestore.cache.max.bytes", "0"),
        ("application.server", "node-1:8080"),
        (
            "default.deserialization.exception.handler",
            "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler",
        ),
        (
            "processing.exception.handler",
            "LogAndContinueProcessingExceptionHandler",
        ),
        ("errors.dead.letter.queue.topic.name", "fraud-dlq"),
        ("replication.factor", "3"),
        ("state.checkpoint.interval.ms", "250"),
        ("state.checkpoint.max.bytes", "1048576"),
        ("max.task.idle.ms", "250"),
        (EmitIntervals::OUTER_JOIN_KEY, "0"),
        (EmitIntervals::WINDOWED_AGGREGATION_KEY, "10"),
    ])
    .unwrap();
    assert_eq!(config.max_task_idle, Some(Duration::from_millis(250)));
    assert_eq!(config.emit_intervals.outer_join_ms, 0);
    assert_eq!(config.emit_intervals.windowed_aggregation_ms, 10);
    let never_idle =
        StreamsConfig::from_properties([("application.id", "a"), ("max.task.idle.ms", "-1")]);
    assert_eq!(never_idle.unwrap().max_task_idle, None);
    assert_eq!(
        config.bootstrap,
        Bootstrap::Servers(vec!["a:9092".into(), "b:9092".into()])
    );
    assert_eq!(config.num_stream_threads, 4);
    assert_eq!(
        config.application_state_dir(),
        PathBuf::from("/var/lib/eddy/fraud")
    );
    assert_eq!(config.num_standby_replicas, 1);
    assert_eq!(config.statestore_cache_max_bytes, 0);
    assert_eq!(config.application_server.as_deref(), Some("node-1:8080"));
    assert_eq!(config.deserialization_handling, ErrorHandling::Continue);
    assert_eq!(config.processing_handling, ErrorHandling::Continue);
    assert_eq!(config.production_handling, ErrorHandling::Fail);
    assert_eq!(config.dead_letter_queue_topic.as_deref(), Some("fraud-dlq"));
    assert_eq!(config.replication_factor, 3);
    assert_eq!(config.state_checkpoint_interval, Duration::from_millis(250));
    assert_eq!(config.state_checkpoint_max_bytes, Some(1 << 20));
}

#[test]
fn the_state_memory_is_shared_by_the_caches_the_write_buffers_and_the_page_cache() {
    let config = StreamsConfig::new("a")
        .statestore_memory_max_bytes(64 << 20)
        .statestore_cache_max_bytes(2 << 20);
    assert_eq!(
        config.state_memory(),
        StateMemory {
            record_caches: 6 << 20,
            write_buffers: 16 << 20,
            page_cache: 10 << 20,
        }
    );
    config.validate().unwrap();
    let config = config
        .statestore_cache_max_bytes(1 << 20)
        .state_checkpoint_max_bytes(21 << 20);
    assert_eq!(config.state_memory().page_cache, 8 << 20);
    config.validate().unwrap();
    // What the caches and the write buffers take must leave the page cache its least.
    let starved = config.state_checkpoint_max_bytes(22 << 20);
    let refused = starved.validate().unwrap_err().to_string();
    assert!(
        refused.contains("statestore.memory.max.bytes") && refused.contains("at least"),
        "{refused}"
    );
    let starved = StreamsConfig::from_properties([
        ("application.id", "a"),
        ("statestore.memory.max.bytes", "1048576"),
    ]);
    assert!(starved.is_err());
}

#[test]
fn client_properties_merge_as_kafka_streams_merges_them() {
    let config = StreamsConfig::from_properties([
        ("application.id", "a"),
        ("request.timeout.ms", "1000"),
        ("consumer.max.poll.records", "500"),
        ("main.consumer.max.poll.records", "2000"),
        ("producer.linger.ms", "5"),
        ("producer.request.timeout.ms", "2000"),
    ])
    .unwrap();
    let main = config.client_properties_for("main.consumer");
    assert_eq!(
        main,
        [("request.timeout.ms", "1000"), ("max.poll.records", "2000")]
    );
    let restore = config.client_properties_for("restore.consumer");
    assert_eq!(
        restore,
        [("request.timeout.ms", "1000"), ("max.poll.records", "500")]
    );
    let producer = config.client_properties_for("producer");
    assert_eq!(
        producer,
        [("request.timeout.ms", "2000"), ("linger.ms", "5")]
    );
    assert_eq!(
        config.client_properties_for("admin"),
        [("request.timeout.ms", "1000")]
    );
}

#[test]
fn what_cannot_be_used_is_a_clear_error() {
    let error = |properties: &[(&str, &str)]| {
        StreamsConfig::from_properties(properties.iter().copied())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(error(&[]), "application.id is required");
    assert!(error(&[("application.id", "a b")]).contains("may hold only"));
    assert_eq!(
        error(&[
            ("application.id", "a"),
            ("processing.guarantee", "exactly_once")
        ]),
        "processing.guarantee=exactly_once is not a valid value"
    );
    assert_eq!(
        error(&[("application.id", "a"), ("num.stream.threads", "0")]),
        "num.stream.threads must be at least 1"
    );
    assert!(
        error(&[("application.id", "a"), ("application.server", "no-port")])
            .contains("not host:port")
    );
    assert_eq!(
        error(&[("application.id", "a"), ("linger.ms", "5")]),
        "unknown property linger.ms"
    );
    assert!(
        error(&[("application.id", "a"), ("commit.interval.ms", "-1")]).contains("not a valid")
    );
    assert!(error(&[
        ("application.id", "a"),
        ("processing.exception.handler", "Mine")
    ])
    .contains("not a valid"));
}

#[test]
fn each_typed_setter_sets_what_its_property_sets() {
    let typed = StreamsConfig::new("fraud")
        .bootstrap_servers(["a:9092", "b:9092"])
        .num_stream_threads(3)
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .commit_interval_ms(Duration::from_millis(250))
        .state_dir("/var/lib/eddy")
        .num_standby_replicas(1)
        .statestore_cache_max_bytes(1024)
        .state_checkpoint_interval(Duration::from_secs(2))
        .state_checkpoint_max_bytes(4096)
        .statestore_memory_max_bytes(100 << 20)
        .state_cleanup_delay(Duration::from_secs(30))
        .max_task_idle(None)
        .acceptable_recovery_lag(7)
        .max_warmup_replicas(4)
        .probing_rebalance_interval(Duration::from_secs(60))
        .application_server("node-1:8080")
        .replication_factor(3)
        .deserialization_handling(ErrorHandling::Continue)
        .processing_handling(ErrorHandling::Continue)
        .production_handling(ErrorHandling::Continue)
        .dead_letter_queue_topic("dlq");
    let read = StreamsConfig::from_properties([
        ("application.id", "fraud"),
        ("bootstrap.servers", "a:9092,b:9092"),
        ("num.stream.threads", "3"),
        ("processing.guarantee", "exactly_once_v2"),
        ("commit.interval.ms", "250"),
        ("state.dir", "/var/lib/eddy"),
        ("num.standby.replicas", "1"),
        ("statestore.cache.max.bytes", "1024"),
        ("state.checkpoint.interval.ms", "2000"),
        ("state.checkpoint.max.bytes", "4096"),
        ("statestore.memory.max.bytes", "104857600"),
        ("state.cleanup.delay.ms", "30000"),
        ("max.task.idle.ms", "-1"),
        ("acceptable.recovery.lag", "7"),
        ("max.warmup.replicas", "4"),
        ("probing.rebalance.interval.ms", "60000"),
        ("application.server", "node-1:8080"),
        ("replication.factor", "3"),
        ("deserialization.exception.handler", "continue"),
        ("processing.exception.handler", "continue"),
        ("production.exception.handler", "continue"),
        ("errors.dead.letter.queue.topic.name", "dlq"),
    ])
    .unwrap();
    assert_eq!(typed.properties(), read.properties());
    assert_ne!(typed.properties(), StreamsConfig::new("fraud").properties());
    assert_eq!(
        StreamsConfig::new("fraud")
            .bootstrap_servers(Vec::<String>::new())
            .bootstrap,
        Bootstrap::Embedded
    );
}

#[test]
fn a_client_property_is_checked_against_the_clients_it_reaches_when_it_is_set() {
    let mut config = StreamsConfig::new("a");
    let refused = |config: &mut StreamsConfig, key: &str, value: &str| {
        config.set(key, value).unwrap_err().to_string()
    };
    assert!(refused(&mut config, "producer.linger.ms", "soon").contains("linger.ms"));
    // A producer's setting is no consumer's, and the other way round.
    assert!(refused(&mut config, "consumer.batch.size", "1").contains("batch.size"));
    assert!(refused(&mut config, "producer.max.poll.records", "1").contains("max.poll.records"));
    assert!(refused(&mut config, "admin.linger.ms", "1").contains("linger.ms"));
    assert!(refused(&mut config, "request.timeout.ms", "-").contains("request.timeout.ms"));
    assert!(
        config.client_properties.is_empty(),
        "nothing refused is kept"
    );
    config.set("main.consumer.max.poll.records", "10").unwrap();
    assert_eq!(
        config
            .main_consumer_config("b:9092")
            .unwrap()
            .max_poll_records,
        10
    );
    config
        .set("main.consumer.fetch.max.bytes", "1048576")
        .unwrap();
    assert_eq!(
        config
            .main_consumer_config("b:9092")
            .unwrap()
            .fetch_max_bytes,
        1 << 20
    );
    config
        .set("main.consumer.max.partition.fetch.bytes", "1048576")
        .unwrap();
    assert_eq!(
        config
            .main_consumer_config("b:9092")
            .unwrap()
            .max_partition_fetch_bytes,
        1 << 20
    );
}

#[test]
fn each_client_gets_kafka_streams_defaults_under_the_users_settings() {
    let config = StreamsConfig::new("a");
    let main = config.main_consumer_config("b:9092").unwrap();
    assert_eq!(main.client.bootstrap, ["b:9092"]);
    assert_eq!(main.max_poll_records, 1_000);
    assert_eq!(main.fetch_max_bytes, 16 << 20);
    assert_eq!(main.max_partition_fetch_bytes, 2 << 20);
    let restore = config.restore_consumer_config("b:9092").unwrap();
    assert_eq!(restore.fetch_max_wait, Duration::from_millis(50));
    let producer = config.producer_config("b:9092").unwrap();
    assert_eq!(producer.batch_size, 256 * 1024);
    assert_eq!(producer.transaction_timeout, Duration::from_secs(60));
    let exactly_once = config
        .clone()
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2);
    let producer = exactly_once.producer_config("b:9092").unwrap();
    assert_eq!(producer.transaction_timeout, Duration::from_secs(10));

    let changed = exactly_once
        .producer(|p| p.linger(Duration::from_millis(20)).batch_size(256 * 1024))
        .main_consumer(|c| c.session_timeout(Duration::from_secs(6)))
        .admin(|a| a.request_timeout(Duration::from_secs(3)));
    // Only what the typed setters changed is kept, under its client's prefix.
    assert_eq!(
        changed.client_properties_for("producer"),
        [("linger.ms", "20")]
    );
    assert_eq!(
        changed.client_properties_for("main.consumer"),
        [("session.timeout.ms", "6000")]
    );
    assert!(changed.client_properties_for("restore.consumer").is_empty());
    let producer = changed.producer_config("b:9092").unwrap();
    assert_eq!(producer.linger, Duration::from_millis(20));
    assert_eq!(producer.transaction_timeout, Duration::from_secs(10));
    assert_eq!(
        changed.admin_config("b:9092").unwrap().request_timeout,
        Duration::from_secs(3)
    );
    // What the setters keep, the application prints and reads back.
    let printed = changed.properties();
    let read =
        StreamsConfig::from_properties(printed.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .unwrap();
    assert_eq!(read.properties(), printed);
}
