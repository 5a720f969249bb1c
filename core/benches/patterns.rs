//! Pattern detection in the task engine alone, without I/O: the fraud job's four-step
//! hold-release pattern (held, released, held, released in a row within ten minutes) over
//! 2,000,000 events of 100,000 keys on one core, the state of each key in the pattern's store
//! (logged, as in the runtime, committed every 1,000 records); and the state size of a
//! `followed_by_any` pattern with a window over time, which must stay bounded.
//!
//! ```sh
//! cargo bench -p eddy-core --bench patterns
//! ```
//!
//! A tenth of the keys are bots that hold and release in turn; the others hold and release at
//! random. Keys are 8-byte integers, values 8-byte integers (1 held, 2 released, 3 other).
//! `PATTERN_BENCH_RUNS=N` sets how many timed runs (5 by default; the median is printed).

use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use eddy_core::log::Record;
use eddy_core::serde::I64Serde;
use eddy_core::streams::internals::{StoreInstance, StreamTask, TaskConfig};
use eddy_core::streams::pattern::{AfterMatchSkip, Pattern, PatternMatch};
use eddy_core::streams::{Consumed, Materialized, Produced, StreamsBuilder, TaskId, Topology};

const EVENTS: usize = 2_000_000;
const KEYS: u64 = 100_000;
const POLL: usize = 1_000;
const HELD: i64 = 1;
const RELEASED: i64 = 2;

/// A small deterministic generator (xorshift), so every run sees the same events.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The events, a millisecond apart: each key's events in turn at random, bots alternating
/// held and released, buyers holding, releasing and doing other things at random.
fn orders() -> Vec<Record> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut next_kind = vec![HELD; KEYS as usize];
    let mut records = Vec::with_capacity(EVENTS);
    let mut buffer = BytesMut::with_capacity(EVENTS * 16);
    for _ in 0..EVENTS {
        let key = rng.next() % KEYS;
        let kind = if key % 10 == 0 {
            let k = next_kind[key as usize];
            next_kind[key as usize] = if k == HELD { RELEASED } else { HELD };
            k
        } else {
            [HELD, RELEASED, 3][(rng.next() % 3) as usize]
        };
        buffer.put_i64(key as i64);
        buffer.put_i64(kind);
    }
    let buffer = buffer.freeze();
    for i in 0..EVENTS {
        records.push(Record {
            key: Some(buffer.slice(i * 16..i * 16 + 8)),
            value: Some(buffer.slice(i * 16 + 8..i * 16 + 16)),
            headers: Vec::new(),
            timestamp: 1_700_000_000_000 + i as i64,
        });
    }
    records
}

/// `count` events a millisecond apart over `keys` keys, of random kinds.
fn dense(count: usize, keys: u64) -> Vec<Record> {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut buffer = BytesMut::with_capacity(count * 16);
    for _ in 0..count {
        buffer.put_i64((rng.next() % keys) as i64);
        buffer.put_i64([HELD, RELEASED, 3][(rng.next() % 3) as usize]);
    }
    let buffer = buffer.freeze();
    (0..count)
        .map(|i| Record {
            key: Some(buffer.slice(i * 16..i * 16 + 8)),
            value: Some(buffer.slice(i * 16 + 8..i * 16 + 16)),
            headers: Vec::new(),
            timestamp: 1_700_000_000_000 + i as i64,
        })
        .collect()
}

fn is(kind: i64) -> impl Fn(&i64) -> bool + Send + Sync + 'static {
    move |v| *v == kind
}

fn detecting(pattern: Pattern<i64>) -> Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream("in", Consumed::with(I64Serde, I64Serde))
        .match_pattern(pattern, Materialized::named("pattern"))
        .map_values(|m: PatternMatch<i64>| m.last_timestamp().unwrap_or(0))
        .to("out", Produced::with(I64Serde, I64Serde));
    builder.build().expect("topology")
}

fn hold_release() -> Pattern<i64> {
    Pattern::begin_with("hold", AfterMatchSkip::SkipPastLastEvent)
        .where_(is(HELD))
        .next("release")
        .where_(is(RELEASED))
        .next("hold-again")
        .where_(is(HELD))
        .next("release-again")
        .where_(is(RELEASED))
        .within(Duration::from_secs(600))
}

/// The store's entries and bytes.
fn store_size(task: &mut StreamTask) -> (usize, usize) {
    match task.store("pattern") {
        Some((_, StoreInstance::KeyValue(store))) => {
            let all = store.all();
            (all.len(), all.iter().map(|(k, v)| k.len() + v.len()).sum())
        }
        _ => (0, 0),
    }
}

/// Runs `records` through a new task; the elapsed time, the matches, and the store's size
/// after every `every` records.
fn run(
    topology: &Topology,
    records: &[Record],
    every: Option<usize>,
) -> (Duration, usize, Vec<(usize, usize, usize)>) {
    let id = TaskId {
        subtopology: 0,
        partition: 0,
    };
    let mut task = StreamTask::new(topology, id, &TaskConfig::new("bench")).expect("task");
    task.init().expect("init");
    let owned: Vec<Record> = records.to_vec();
    let mut matches = 0;
    let mut sizes = Vec::new();
    let started = Instant::now();
    let mut offset = 0i64;
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
        task.flush_stores().expect("flush");
        matches += task.output().len();
        task.clear_output();
        task.clear_changelog();
        task.commit_stores(|_| None);
        if let Some(every) = every {
            if (offset as usize) % every == 0 {
                let (entries, bytes) = store_size(&mut task);
                sizes.push((offset as usize, entries, bytes));
            }
        }
    }
    (started.elapsed(), matches, sizes)
}

fn main() {
    let runs = std::env::var("PATTERN_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5usize);
    let records = orders();
    let topology = detecting(hold_release());
    let _ = run(&topology, &records, None);
    let mut rates = Vec::new();
    let mut found = 0;
    for _ in 0..runs {
        let (elapsed, matches, _) = run(&topology, &records, None);
        found = matches;
        rates.push(EVENTS as f64 / elapsed.as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "hold-release (4 steps, next, within 10 min): {} events, {} keys, {} matches, one task on one thread",
        EVENTS, KEYS, found
    );
    println!(
        "  {:.0} events/s (median of {runs}; runs {:?})",
        rates[runs / 2],
        rates.iter().map(|r| *r as u64).collect::<Vec<_>>()
    );

    // followed_by_any keeps a branch per earlier event; the window bounds them.
    let any = Pattern::begin("a")
        .where_(is(HELD))
        .followed_by_any("b")
        .where_(is(RELEASED))
        .followed_by_any("c")
        .where_(is(HELD))
        .within(Duration::from_secs(1));
    let few_keys = dense(200_000, 100);
    let (elapsed, matches, sizes) = run(&detecting(any), &few_keys, Some(POLL));
    println!(
        "followed_by_any (3 steps, within 1 s): {} events of 100 keys a millisecond apart, {} matches, {:.0} events/s",
        few_keys.len(),
        matches,
        few_keys.len() as f64 / elapsed.as_secs_f64()
    );
    println!("  state over time (events: keys in store, bytes):");
    let step = (sizes.len() / 8).max(1);
    for (events, entries, bytes) in sizes.iter().step_by(step) {
        println!("  {events:>9}: {entries:>5} keys {bytes:>9} bytes");
    }
}
