//! The edges of the streams engine's semantics that the Kafka Streams catalog does not show
//! as records: drops counted, the order in which a task takes its inputs, wall-clock
//! punctuation, stream time, several partitions behaving as one, and errors that stop a task.

use std::time::Duration;

use bytes::Bytes;
use eddy::log::Record as LogRecord;
use eddy::serde::{I64Serde, Nullable, StringSerde};
use eddy::streams::internals::{StreamTask, TaskConfig};
use eddy::streams::windows::TimeWindows;
use eddy::streams::{
    Consumed, Grouped, Joined, Materialized, Processor, ProcessorContext, Produced, Punctuation,
    PunctuationType, Record, StreamsBuilder, StreamsError, TaskId,
};
use eddy::testing::TestDriver;

fn clicks_per_window(grace_s: u64) -> eddy::streams::Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream("clicks", Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::default())
        .windowed_by(
            TimeWindows::of_size_and_grace(Duration::from_secs(10), Duration::from_secs(grace_s))
                .expect("windows"),
        )
        .count(Materialized::named("counts"))
        .to_stream()
        .to("out", Produced::default());
    builder.build().expect("topology")
}

#[test]
fn records_later_than_the_grace_period_are_dropped_and_counted() {
    let driver = TestDriver::new(clicks_per_window(5)).unwrap();
    let clicks = driver.create_input_topic("clicks", StringSerde, StringSerde);
    let a = || "alice".to_string();
    clicks.pipe_input_at(a(), "/1".into(), 0).unwrap();
    clicks.pipe_input_at(a(), "/2".into(), 14_999).unwrap();
    // Window [0, 10000) closes at 15000: 14,999 keeps it open, 15,000 closes it.
    clicks.pipe_input_at(a(), "/3".into(), 9_999).unwrap();
    assert!(driver.dropped_records().is_empty());
    clicks.pipe_input_at(a(), "/4".into(), 15_000).unwrap();
    clicks.pipe_input_at(a(), "/late".into(), 9_999).unwrap();
    let dropped = driver.dropped_records();
    assert_eq!(dropped.values().sum::<u64>(), 1, "{dropped:?}");
}

/// Kafka counts a record dropped for its null key, not an inner join's record that found no
/// match.
#[test]
fn null_keys_are_counted_as_dropped_and_unmatched_joins_are_not() {
    let builder = StreamsBuilder::new();
    let keyless = || Consumed::with(Nullable(StringSerde), StringSerde);
    let users = builder.table("users", keyless(), Materialized::default());
    builder
        .stream("clicks", keyless())
        .join_table(&users, |c, u| format!("{c}@{u}"), Joined::default())
        .to("out", Produced::with(Nullable(StringSerde), StringSerde));
    let driver = TestDriver::new(builder.build().unwrap()).unwrap();
    let clicks = driver.create_input_topic("clicks", Nullable(StringSerde), StringSerde);
    let users = driver.create_input_topic("users", Nullable(StringSerde), StringSerde);
    let out = driver.create_output_topic("out", Nullable(StringSerde), StringSerde);
    users
        .pipe_input_at(Some("alice".into()), "Alice".into(), 0)
        .unwrap();
    clicks
        .pipe_input_at(Some("bob".into()), "/home".into(), 1)
        .unwrap();
    assert!(
        driver.dropped_records().is_empty(),
        "no match is not a drop"
    );
    clicks
        .pipe_input_at(Some("alice".into()), "/cart".into(), 2)
        .unwrap();
    clicks.pipe_input_at(None, "/anon".into(), 3).unwrap();
    users.pipe_input_at(None, "Nobody".into(), 4).unwrap();
    let values: Vec<String> = out
        .read_records_to_list()
        .into_iter()
        .map(|r| r.value)
        .collect();
    assert_eq!(values, ["/cart@Alice"]);
    let dropped = driver.dropped_records();
    assert_eq!(dropped.values().sum::<u64>(), 2, "{dropped:?}");
}

#[test]
fn a_task_takes_the_record_with_the_smallest_timestamp_of_its_inputs() {
    let builder = StreamsBuilder::new();
    let a = builder.stream("a", Consumed::with(StringSerde, StringSerde));
    let b = builder.stream("b", Consumed::with(StringSerde, StringSerde));
    a.merge(b).to("out", Produced::default());
    let topology = builder.build().unwrap();
    let id = TaskId {
        subtopology: 0,
        partition: 0,
    };
    let mut task = StreamTask::new(&topology, id, &TaskConfig::new("app")).unwrap();
    task.init().unwrap();
    let record = |v: &str, ts| LogRecord::new(Bytes::from("k"), Bytes::from(v.to_string()), ts);
    for (i, ts) in [10, 30, 50].into_iter().enumerate() {
        task.add_record("a", i as i64, record(&format!("a{ts}"), ts))
            .unwrap();
    }
    for (i, ts) in [20, 40, 5].into_iter().enumerate() {
        task.add_record("b", i as i64, record(&format!("b{ts}"), ts))
            .unwrap();
    }
    while task.process().unwrap() {}
    let order: Vec<String> = task
        .output()
        .iter()
        .map(|r| String::from_utf8(r.value.unwrap().to_vec()).unwrap())
        .collect();
    // Heads compared each time: a10 < b20, then a30 vs b20, …; b5 waits behind b40.
    assert_eq!(order, ["a10", "b20", "a30", "b40", "b5", "a50"]);
    assert_eq!(task.stream_time(), 50);
}

/// Counts records and, every 1,000 ms of wall-clock time, forwards the count so far.
pub(crate) struct Ticker {
    pub(crate) seen: i64,
}

impl Processor<String, String, String, i64> for Ticker {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, String, i64>) -> Result<(), StreamsError> {
        ctx.schedule(1_000, PunctuationType::WallClockTime);
        Ok(())
    }

    fn process(
        &mut self,
        _: Record<String, String>,
        _: &mut ProcessorContext<'_, String, i64>,
    ) -> Result<(), StreamsError> {
        self.seen += 1;
        Ok(())
    }

    fn punctuate(
        &mut self,
        p: Punctuation,
        ctx: &mut ProcessorContext<'_, String, i64>,
    ) -> Result<(), StreamsError> {
        assert!(
            ctx.record_metadata().is_none(),
            "no record during a punctuation"
        );
        ctx.forward(Record::new("seen".to_string(), self.seen, p.timestamp));
        Ok(())
    }
}

#[test]
fn wall_clock_punctuations_follow_the_drivers_clock_and_do_not_catch_up() {
    let builder = StreamsBuilder::new();
    builder
        .stream("in", Consumed::with(StringSerde, StringSerde))
        .process(|| Ticker { seen: 0 }, &[])
        .to("out", Produced::with(StringSerde, I64Serde));
    let driver = TestDriver::new(builder.build().unwrap()).unwrap();
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let out = driver.create_output_topic("out", StringSerde, I64Serde);
    input.pipe_input("k".into(), "v".into()).unwrap();
    driver.advance_wall_clock_time(999).unwrap();
    assert!(out.is_empty());
    driver.advance_wall_clock_time(1).unwrap();
    input.pipe_input("k".into(), "v".into()).unwrap();
    // 3.5 s at once: one punctuation, not three.
    driver.advance_wall_clock_time(3_500).unwrap();
    let ticks: Vec<_> = out
        .read_records_to_list()
        .into_iter()
        .map(|r| (r.value, r.timestamp))
        .collect();
    assert_eq!(ticks, [(1, 1_000), (2, 4_500)]);
}

fn word_count() -> eddy::streams::Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream("lines", Consumed::with(Nullable(StringSerde), StringSerde))
        .flat_map_values(|l: String| l.split(' ').map(str::to_string).collect::<Vec<_>>())
        .group_by(|_, w| w.clone(), Grouped::with(StringSerde, StringSerde))
        .count(Materialized::named("counts"))
        .to_stream()
        .to("counts", Produced::default());
    builder.build().unwrap()
}

#[test]
fn several_partitions_count_as_one_does_each_key_in_one_partition_in_order() {
    let text = ["a b c a", "b a d", "e a b", "c c c a"];
    let run = |partitions| {
        let driver = TestDriver::builder(word_count())
            .partitions(partitions)
            .build()
            .unwrap();
        let lines = driver.create_input_topic("lines", Nullable(StringSerde), StringSerde);
        for (i, l) in text.iter().enumerate() {
            lines
                .pipe_input_at(Some(format!("line-{i}")), l.to_string(), i as i64)
                .unwrap();
        }
        let out = driver.create_output_topic("counts", StringSerde, Nullable(I64Serde));
        let records = out.read_records_to_list();
        let store = driver
            .key_value_store::<String, i64>("counts")
            .all()
            .unwrap();
        (records, store, driver.tasks().len())
    };
    let (one, one_store, one_tasks) = run(1);
    let (four, mut four_store, four_tasks) = run(4);
    assert_eq!((one_tasks, four_tasks), (2, 8));
    // The same final counts, split over the partitions' stores.
    let mut one_store = one_store;
    one_store.sort();
    four_store.sort();
    assert_eq!(one_store, four_store);
    assert_eq!(
        four_store.iter().find(|(w, _)| w == "a").map(|e| e.1),
        Some(5)
    );
    // Each word's updates all in one partition, counting up in order.
    for word in ["a", "b", "c", "d", "e"] {
        let updates: Vec<_> = four.iter().filter(|r| r.key == word).collect();
        assert!(
            updates.windows(2).all(|w| w[0].partition == w[1].partition),
            "{word}"
        );
        let counts: Vec<i64> = updates.iter().map(|r| r.value.unwrap()).collect();
        assert_eq!(
            counts,
            (1..=counts.len() as i64).collect::<Vec<_>>(),
            "{word}"
        );
    }
    assert_eq!(one.len(), four.len());
}

#[test]
fn a_negative_timestamp_stops_the_task_as_kafkas_default_extractor_does() {
    let driver = TestDriver::new(word_count()).unwrap();
    let lines = driver.create_input_topic("lines", Nullable(StringSerde), StringSerde);
    let err = lines.pipe_input_at(None, "a".into(), -5).unwrap_err();
    assert!(
        matches!(err, StreamsError::InvalidTimestamp { timestamp: -5, .. }),
        "{err}"
    );
}

#[test]
fn a_value_that_does_not_deserialize_is_an_error_naming_the_topic() {
    let builder = StreamsBuilder::new();
    builder
        .stream("numbers", Consumed::with(StringSerde, I64Serde))
        .to("out", Produced::default());
    let driver = TestDriver::new(builder.build().unwrap()).unwrap();
    let numbers = driver.create_input_topic("numbers", StringSerde, StringSerde);
    let err = numbers
        .pipe_input("k".into(), "not eight bytes".into())
        .unwrap_err();
    assert!(err.to_string().contains("numbers"), "{err}");
    // A null key where the key type has none is an error too, not a panic.
    let keyless = driver.create_input_topic("numbers", Nullable(StringSerde), I64Serde);
    let err = keyless.pipe_input(None, 7).unwrap_err();
    assert!(err.to_string().contains("null"), "{err}");
}

#[test]
fn window_and_session_stores_are_read_by_name_across_partitions() {
    let driver = TestDriver::builder(clicks_per_window(5))
        .partitions(3)
        .build()
        .unwrap();
    let clicks = driver.create_input_topic("clicks", StringSerde, StringSerde);
    for (user, ts) in [
        ("alice", 1_000),
        ("bob", 2_000),
        ("alice", 9_000),
        ("alice", 12_000),
    ] {
        clicks
            .pipe_input_at(user.to_string(), "/p".into(), ts)
            .unwrap();
    }
    let windows = driver.window_store::<String, i64>("counts");
    let mut all = windows.all().expect("a window store of strings and counts");
    all.sort();
    assert_eq!(
        all,
        [
            ("alice".to_string(), 0, 2),
            ("alice".to_string(), 10_000, 1),
            ("bob".to_string(), 0, 1)
        ]
    );
    assert_eq!(windows.fetch(&"alice".to_string(), 0), Some(2));
    // Another kind or other types: no such store.
    assert!(driver
        .session_store::<String, i64>("counts")
        .all()
        .is_none());
    assert!(driver.window_store::<i64, i64>("counts").all().is_none());

    let builder = StreamsBuilder::new();
    builder
        .stream("clicks", Consumed::with(StringSerde, StringSerde))
        .group_by_key(Grouped::default())
        .windowed_by_session(
            eddy::streams::windows::SessionWindows::of_inactivity_gap_with_no_grace(
                Duration::from_secs(5),
            )
            .unwrap(),
        )
        // Kept a minute: the gap alone (the default) would drop the first session once the
        // second one is 5 s past it.
        .count(Materialized::named("sessions").with_retention(60_000))
        .to_stream()
        .to("out", Produced::default());
    let driver = TestDriver::new(builder.build().unwrap()).unwrap();
    let clicks = driver.create_input_topic("clicks", StringSerde, StringSerde);
    for ts in [1_000, 4_000, 20_000] {
        clicks
            .pipe_input_at("alice".to_string(), "/p".into(), ts)
            .unwrap();
    }
    let sessions = driver
        .session_store::<String, i64>("sessions")
        .all()
        .unwrap();
    let spans: Vec<_> = sessions
        .iter()
        .map(|(_, w, n)| (w.start, w.end, *n))
        .collect();
    assert_eq!(spans, [(1_000, 4_000, 2), (20_000, 20_000, 1)]);
}

#[test]
fn a_sink_can_choose_each_records_topic_and_partition() {
    let builder = StreamsBuilder::new();
    builder
        .stream("events", Consumed::with(StringSerde, StringSerde))
        .to_topic_chosen_by(
            |_, v, _| format!("events-{}", &v[..1]),
            Produced::with(StringSerde, StringSerde)
                .with_partitioner(|_, k, _, partitions| Some(k.len() as i32 % partitions)),
        );
    let topology = builder.build().unwrap();
    assert!(topology
        .describe()
        .to_string()
        .contains("Sink: KSTREAM-SINK-0000000001 (extractor class: KSTREAM-SINK-0000000001)"));
    let driver = TestDriver::builder(topology).partitions(3).build().unwrap();
    let events = driver.create_input_topic("events", StringSerde, StringSerde);
    events.pipe_input("ab".into(), "alpha".into()).unwrap();
    events.pipe_input("abcd".into(), "beta".into()).unwrap();
    let a = driver.create_output_topic("events-a", StringSerde, StringSerde);
    let b = driver.create_output_topic("events-b", StringSerde, StringSerde);
    let a = a.read_records_to_list();
    let b = b.read_records_to_list();
    assert_eq!(
        (a.len(), a[0].value.as_str(), a[0].partition),
        (1, "alpha", 2)
    );
    assert_eq!(
        (b.len(), b[0].value.as_str(), b[0].partition),
        (1, "beta", 1)
    );
}
