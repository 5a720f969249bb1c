//! The task engine alone, without I/O: how many records a second one task processes on one
//! core, from raw input records to serialized output and changelog records.
//!
//! ```sh
//! cargo bench -p eddy-core --bench engine
//! ```
//!
//! The records come as a consumer hands them over (slices of fetched batches) and go to the
//! task in polls of 1,000 (Kafka Streams' `max.poll.records`), after each of which the stores
//! are flushed, the output and the changelog taken and the stores committed, as the runtime
//! does (the stores in memory, logged, without cache or write buffer, as in the `TestDriver`). The bench profile builds with fat LTO and
//! one codegen unit, as a user's optimized release build would.
//!
//! Three topologies, each run once to warm up and then several times on the same records (the
//! median is printed):
//! a stateless chain of three operations (filter, map_values, select_key), a count by key in
//! memory, and a count by key in tumbling windows. Keys and values are 8-byte integers;
//! 10,000 distinct keys.
//!
//! `ENGINE_BENCH_ONLY=stateless|count|windowed|pipe` runs one topology and prints each run
//! (`pipe` is a source straight into a sink: the engine's floor); `ENGINE_BENCH_RUNS=N` sets
//! how many runs, one being enough under a profiler such as `valgrind --tool=cachegrind`,
//! whose instruction counts do not move with the machine's load as timings do.

use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use eddy_core::log::Record;
use eddy_core::serde::I64Serde;
use eddy_core::streams::internals::{StreamTask, TaskConfig};
use eddy_core::streams::windows::TimeWindows;
use eddy_core::streams::{
    Consumed, Grouped, Materialized, Produced, StreamsBuilder, TaskId, Topology,
};

const RECORDS: usize = 2_000_000;
const KEYS: i64 = 10_000;
const RUNS: usize = 5;
/// Records per fetched batch.
const BATCH: usize = 1_000;
/// Records handed to the task at a time before its output and changelog are taken: Kafka
/// Streams' default `max.poll.records`.
const POLL: usize = 1_000;

/// The input records as the consumer hands them over: the keys and values of a fetched
/// batch (1,000 records here) are slices of that batch's buffer, not allocations of their own.
fn input() -> Vec<Record> {
    let mut records = Vec::with_capacity(RECORDS);
    for batch in 0..RECORDS / BATCH {
        let mut buffer = BytesMut::with_capacity(BATCH * 16);
        for j in 0..BATCH {
            let i = (batch * BATCH + j) as i64;
            buffer.put_i64((i * 7919) % KEYS);
            buffer.put_i64(i);
        }
        let buffer = buffer.freeze();
        for j in 0..BATCH {
            let i = (batch * BATCH + j) as i64;
            records.push(Record {
                key: Some(buffer.slice(j * 16..j * 16 + 8)),
                value: Some(buffer.slice(j * 16 + 8..j * 16 + 16)),
                headers: Vec::new(),
                timestamp: 1_700_000_000_000 + i,
            });
        }
    }
    records
}

fn stateless() -> Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream("in", Consumed::with(I64Serde, I64Serde))
        .filter(|_, v| v % 16 != 0)
        .map_values(|v| v * 2)
        .select_key(|k, v| k ^ v)
        .to("out", Produced::with(I64Serde, I64Serde));
    builder.build().expect("topology")
}

fn count() -> Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream("in", Consumed::with(I64Serde, I64Serde))
        .group_by_key(Grouped::default())
        .count(Materialized::named("counts"))
        .to_stream()
        .to("out", Produced::default());
    builder.build().expect("topology")
}

fn windowed_count() -> Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream("in", Consumed::with(I64Serde, I64Serde))
        .group_by_key(Grouped::default())
        .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_secs(60)).expect("windows"))
        .count(Materialized::named("counts"))
        .to_stream()
        .to("out", Produced::default());
    builder.build().expect("topology")
}

/// Runs the records through a new task of `topology`, returning the elapsed time and the
/// number of output and changelog records (so the work cannot be optimized away).
fn run(topology: &Topology, records: &[Record]) -> (Duration, usize) {
    let id = TaskId {
        subtopology: 0,
        partition: 0,
    };
    let mut task = StreamTask::new(topology, id, &TaskConfig::new("bench")).expect("task");
    task.init().expect("init");
    let mut produced = 0;
    // The records arrive owned, as a consumer hands them over.
    let owned: Vec<Record> = records.to_vec();
    let started = Instant::now();
    let mut offset = 0;
    let mut input = owned.into_iter();
    loop {
        let queued = task.queued();
        let batch = input.by_ref().take(POLL).map(|r| {
            offset += 1;
            (offset - 1, r)
        });
        task.add_records("in", batch).expect("input");
        if task.queued() == queued {
            break;
        }
        while task.process().expect("process") {}
        task.flush_stores().unwrap();
        produced += task.output().len();
        task.clear_output();
        produced += task.changelog().iter().map(|(_, w)| w.len()).sum::<usize>();
        task.clear_changelog();
        task.commit_stores(|_| None);
    }
    (started.elapsed(), produced)
}

fn main() {
    let records = input();
    if let Ok(only) = std::env::var("ENGINE_BENCH_ONLY") {
        let topology = match only.as_str() {
            "count" => count(),
            "windowed" => windowed_count(),
            "pipe" => {
                let builder = StreamsBuilder::new();
                builder
                    .stream("in", Consumed::with(I64Serde, I64Serde))
                    .to("out", Produced::default());
                builder.build().expect("topology")
            }
            _ => stateless(),
        };
        // `ENGINE_BENCH_RUNS` runs (5 by default): one is enough under a profiler.
        let runs = std::env::var("ENGINE_BENCH_RUNS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(RUNS);
        for _ in 0..runs {
            let (elapsed, _) = run(&topology, &records);
            println!(
                "{only}: {:.0} records/s",
                RECORDS as f64 / elapsed.as_secs_f64()
            );
        }
        return;
    }
    println!(
        "{} records of 8-byte keys and values, {} keys, median of {} runs, one task on one thread",
        RECORDS, KEYS, RUNS
    );
    println!("{:<34} {:>14} {:>10}", "topology", "records/s", "target");
    for (name, topology, target) in [
        ("stateless chain (3 operations)", stateless(), 5_000_000.0),
        ("count by key (in memory)", count(), 2_000_000.0),
        (
            "tumbling-window count (60 s)",
            windowed_count(),
            1_000_000.0,
        ),
    ] {
        // One run to warm up the allocator and caches, not counted.
        let _ = run(&topology, &records);
        let mut rates: Vec<f64> = (0..RUNS)
            .map(|_| {
                let (elapsed, produced) = run(&topology, &records);
                assert!(produced > 0, "{name} produced nothing");
                RECORDS as f64 / elapsed.as_secs_f64()
            })
            .collect();
        rates.sort_by(f64::total_cmp);
        println!("{:<34} {:>14.0} {:>10.0}", name, rates[RUNS / 2], target);
    }
}
