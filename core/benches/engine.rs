//! The task engine alone, without I/O: how many records a second one task processes on one
//! core, from raw input records to serialized output and changelog records.
//!
//! ```sh
//! cargo bench -p eddy-core --bench engine
//! ```
//!
//! Three topologies, each run once to warm up and then several times on the same records (the
//! median is printed):
//! a stateless chain of three operations (filter, map_values, select_key), a count by key in
//! memory, and a count by key in tumbling windows. Keys and values are 8-byte integers;
//! 10,000 distinct keys.

use std::time::{Duration, Instant};

use bytes::Bytes;
use eddy_core::log::Record;
use eddy_core::serde::I64Serde;
use eddy_core::streams::windows::TimeWindows;
use eddy_core::streams::{
    Consumed, Grouped, Materialized, Produced, StreamTask, StreamsBuilder, TaskConfig, TaskId,
    Topology,
};

const RECORDS: usize = 2_000_000;
const KEYS: i64 = 10_000;
const RUNS: usize = 5;

fn input() -> Vec<Record> {
    (0..RECORDS as i64)
        .map(|i| Record {
            key: Some(Bytes::copy_from_slice(&((i * 7919) % KEYS).to_be_bytes())),
            value: Some(Bytes::copy_from_slice(&i.to_be_bytes())),
            headers: Vec::new(),
            timestamp: 1_700_000_000_000 + i,
        })
        .collect()
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
        let mut added = 0;
        for r in input.by_ref().take(10_000) {
            task.add_record("in", offset, r).expect("input");
            offset += 1;
            added += 1;
        }
        if added == 0 {
            break;
        }
        while task.process().expect("process") {}
        produced += task.output().len();
        task.clear_output();
        produced += task.changelog().iter().map(|(_, w)| w.len()).sum::<usize>();
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
        for _ in 0..RUNS {
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
