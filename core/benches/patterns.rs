//! Pattern detection in the task engine alone, without I/O: the fraud job's four-step
//! hold-release pattern (held, released, held, released in a row within ten minutes; a
//! sequence of strict single steps, so it runs on the sequence engine) over
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
//! The events come twice: as a box office's traffic has them (10,000 orders open at a time,
//! each order's twenty events over a few minutes), and with every event's key drawn at random
//! among all 100,000 throughout, where nearly every event finds its key's state out of the
//! processor's caches (the worst case for any keyed state).
//! `PATTERN_BENCH_RUNS=N` sets how many timed runs (5 by default; the median is printed),
//! `PATTERN_BENCH_OPEN=N` how many orders are open at a time (10,000 by default).

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

/// Records a millisecond apart of the given keys and kinds.
fn records(events: &[(u64, i64)]) -> Vec<Record> {
    let mut buffer = BytesMut::with_capacity(events.len() * 16);
    for &(key, kind) in events {
        buffer.put_i64(key as i64);
        buffer.put_i64(kind);
    }
    let buffer = buffer.freeze();
    (0..events.len())
        .map(|i| Record {
            key: Some(buffer.slice(i * 16..i * 16 + 8)),
            value: Some(buffer.slice(i * 16 + 8..i * 16 + 16)),
            headers: Vec::new(),
            timestamp: 1_700_000_000_000 + i as i64,
        })
        .collect()
}

/// The kind of an order's next event: bots (a tenth of the orders) hold and release in
/// turn, buyers hold, release and do other things at random.
fn kind(rng: &mut Rng, key: u64, bot_next: &mut i64) -> i64 {
    if key % 10 == 0 {
        let k = *bot_next;
        *bot_next = if k == HELD { RELEASED } else { HELD };
        k
    } else {
        [HELD, RELEASED, 3][(rng.next() % 3) as usize]
    }
}

/// Order events as a box office sees them: `open` orders open at a time, each event from one
/// of them at random; an order closes after its twenty events and a new one opens, until all
/// 100,000 have had theirs. An order's events span a few minutes.
fn box_office(open: usize) -> Vec<Record> {
    let per_order = EVENTS / KEYS as usize;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // (order, events left, a bot's next kind)
    let mut orders: Vec<(u64, usize, i64)> =
        (0..open as u64).map(|k| (k, per_order, HELD)).collect();
    let mut next = open as u64;
    let mut events = Vec::with_capacity(EVENTS);
    while !orders.is_empty() {
        let slot = (rng.next() % orders.len() as u64) as usize;
        let (key, left, bot_next) = &mut orders[slot];
        events.push((*key, kind(&mut rng, *key, bot_next)));
        *left -= 1;
        if *left == 0 {
            if next < KEYS {
                orders[slot] = (next, per_order, HELD);
                next += 1;
            } else {
                orders.swap_remove(slot);
            }
        }
    }
    records(&events)
}

/// The events with each of the 100,000 keys' at random throughout: nearly every event finds
/// its key's state out of the processor's caches.
fn scattered() -> Vec<Record> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut bot_next = vec![HELD; KEYS as usize];
    let events: Vec<(u64, i64)> = (0..EVENTS)
        .map(|_| {
            let key = rng.next() % KEYS;
            (key, kind(&mut rng, key, &mut bot_next[key as usize]))
        })
        .collect();
    records(&events)
}

/// `count` events a millisecond apart over `keys` keys, of random kinds.
fn dense(count: usize, keys: u64) -> Vec<Record> {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let events: Vec<(u64, i64)> = (0..count)
        .map(|_| {
            (
                rng.next() % keys,
                [HELD, RELEASED, 3][(rng.next() % 3) as usize],
            )
        })
        .collect();
    records(&events)
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
    let topology = detecting(hold_release());
    let open = std::env::var("PATTERN_BENCH_OPEN")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(10_000usize);
    for (input, records) in [
        (
            format!("{open} orders open at a time, an order's 20 events over minutes"),
            box_office(open),
        ),
        (
            "each event's key at random among all (its state rarely in a cache)".to_string(),
            scattered(),
        ),
    ] {
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
            "hold-release (4 steps, next, within 10 min): {EVENTS} events, {KEYS} keys, {input}: {found} matches, one task on one thread"
        );
        println!(
            "  {:.0} events/s (median of {runs}; runs {:?})",
            rates[runs / 2],
            rates.iter().map(|r| *r as u64).collect::<Vec<_>>()
        );
    }

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
