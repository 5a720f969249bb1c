//! Seeded random inputs for a catalog scenario, in the catalog's JSON lines.
//!
//! A scenario's own `input.jsonl` is its vocabulary: the topics it reads, the keys and values
//! it understands (a topology's functions may parse their values, so values are drawn from
//! the ones it was written for, or made in their shape), and which of them may be null. The
//! generator then writes what fixed inputs rarely hold: a small key set with shared prefixes
//! (`a`, `ab`: neighbours in byte order, where window and buffer keys are compared),
//! timestamps that tie, fall out of order and arrive late by amounts around window sizes and
//! grace periods, headers (some null), null keys and values where the topology takes them,
//! and steps of the wall clock.
//!
//! A key or value is null only on a topic whose fixed input has a null there: in eddy a type
//! holds null only when its serde says so (`Nullable`), and a null where it has none is a
//! record that does not deserialize, refused as Kafka refuses a record its deserializer
//! throws on (see the book's "Where eddy differs from Kafka Streams, on purpose").
//!
//! The random numbers are this module's own (SplitMix64), so a seed names the same input on
//! every machine and with every version of every dependency.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

/// A small, fast generator of pseudo-random numbers (SplitMix64) whose sequence for a seed
/// never changes.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        let n64 = u64::try_from(n).expect("usize fits u64");
        usize::try_from(self.next_u64() % n64).expect("below n")
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        // 53 random bits make a uniform float in [0, 1).
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// One of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// How far stream time moves between records: ties, single milliseconds, and steps just
/// under, at and over the catalog's window sizes, advances, gaps and grace periods.
const STEPS: &[i64] = &[
    0, 0, 0, 1, 1, 499, 500, 999, 1000, 1001, 1999, 2000, 2001, 2999, 3000, 3001, 4999, 5000, 5001,
    9999, 10000, 10001, 12001,
];

/// How late a late record is, behind the stream time reached.
const LATENESS: &[i64] = &[
    1, 500, 999, 1000, 1001, 2000, 3000, 4000, 5000, 9000, 10000, 11000, 12000, 20000,
];

/// Steps of the wall clock.
const WALL_CLOCK_STEPS: &[i64] = &[0, 1, 500, 999, 1000, 1001, 5000, 30000];

/// What a topic's values look like.
#[derive(Debug, Clone)]
enum Values {
    /// Strings the topology was written for.
    Strings(Vec<String>),
    /// Longs: the ones seen, and any between `low` and `high`.
    Longs { seen: Vec<i64>, low: i64, high: i64 },
    /// `"<event time>|<tag>"`, read by a timestamp extractor: event times made as record
    /// timestamps are, tags as seen.
    Stamped(Vec<String>),
}

/// One input topic's words.
#[derive(Debug, Clone)]
struct TopicWords {
    name: String,
    values: Values,
    null_values: bool,
    null_keys: bool,
}

/// What a scenario's inputs may hold, learnt from its fixed input.
#[derive(Debug, Clone)]
pub struct Vocabulary {
    topics: Vec<TopicWords>,
    keys: Vec<String>,
    first_timestamp: i64,
    record_timestamps: Vec<i64>,
    wall_clock: bool,
}

impl Vocabulary {
    /// The vocabulary of a fixed input. Panics on an input without records (a scenario's
    /// input always has some).
    pub fn of(input: &[Value]) -> Self {
        let records: Vec<&Value> = input.iter().filter(|l| l.get("topic").is_some()).collect();
        assert!(!records.is_empty(), "an input with records");
        // A set: each topic once, in name order.
        let topic_names: BTreeSet<&str> =
            records.iter().filter_map(|r| r["topic"].as_str()).collect();
        let topics = topic_names
            .iter()
            .map(|&name| {
                let of_topic: Vec<&&Value> =
                    records.iter().filter(|r| r["topic"] == name).collect();
                let values: Vec<&Value> = of_topic
                    .iter()
                    .map(|r| &r["value"])
                    .filter(|v| !v.is_null())
                    .collect();
                TopicWords {
                    name: name.to_string(),
                    values: Values::of(&values),
                    null_values: of_topic.iter().any(|r| r["value"].is_null()),
                    null_keys: of_topic.iter().any(|r| r["key"].is_null()),
                }
            })
            .collect();
        let seen_keys: BTreeSet<String> = records
            .iter()
            .filter_map(|r| r["key"].as_str().map(str::to_string))
            .collect();
        let mut keys = seen_keys.clone();
        // Neighbours in byte order: a key and its extension, a key and itself less its last
        // letter (keys of three letters or more: a topology may read the first two).
        for key in seen_keys.iter().take(2) {
            keys.insert(format!("{key}x"));
            if key.chars().count() >= 3 {
                let mut shorter = key.clone();
                shorter.pop();
                keys.insert(shorter);
            }
        }
        let timestamps: Vec<i64> = records
            .iter()
            .filter_map(|r| r["timestamp"].as_i64())
            .collect();
        Vocabulary {
            topics,
            keys: keys.into_iter().collect(),
            first_timestamp: timestamps.iter().copied().min().unwrap_or(0).max(0),
            record_timestamps: timestamps,
            wall_clock: input
                .iter()
                .any(|l| l.get("advance_wall_clock_ms").is_some()),
        }
    }

    /// The input of `seed`: between 1 and 48 lines.
    pub fn generate(&self, seed: u64) -> Vec<Value> {
        let mut rng = SplitMix64::new(seed);
        // A few keys per input, so records meet each other's state.
        let mut keys = self.keys.clone();
        let key_count = 1 + rng.below(keys.len().min(5));
        for i in 0..key_count {
            let j = i + rng.below(keys.len() - i);
            keys.swap(i, j);
        }
        keys.truncate(key_count);
        let wall_clock_chance = if self.wall_clock { 0.12 } else { 0.03 };
        let late_chance = [0.0, 0.15, 0.3][rng.below(3)];
        let header_chance = [0.0, 0.25, 0.6][rng.below(3)];
        let lines = 1 + rng.below(48);
        let mut stream_time = self.first_timestamp;
        let mut out = Vec::with_capacity(lines);
        for n in 0..lines {
            if rng.chance(wall_clock_chance) {
                out.push(json!({"advance_wall_clock_ms": *rng.pick(WALL_CLOCK_STEPS)}));
                continue;
            }
            let topic = rng.pick(&self.topics);
            let at = if rng.chance(late_chance) {
                (stream_time - *rng.pick(LATENESS)).max(0)
            } else {
                stream_time += *rng.pick(STEPS);
                stream_time
            };
            let (value, timestamp) = match &topic.values {
                Values::Stamped(tags) => {
                    let tag = rng.pick(tags);
                    (
                        json!(format!("{at}|{tag}")),
                        *rng.pick(&self.record_timestamps),
                    )
                }
                values => (values.pick(&mut rng), at),
            };
            let value = if topic.null_values && rng.chance(0.15) {
                Value::Null
            } else {
                value
            };
            let key = if topic.null_keys && rng.chance(0.15) {
                Value::Null
            } else {
                json!(rng.pick(&keys))
            };
            let mut record = json!({
                "topic": topic.name,
                "key": key,
                "value": value,
                "timestamp": timestamp,
            });
            if rng.chance(header_chance) {
                let mut headers = Map::new();
                for name in ["h", "trace"].iter().take(1 + rng.below(2)) {
                    let value = if rng.chance(0.1) {
                        Value::Null
                    } else {
                        json!(format!("{name}-{n}"))
                    };
                    headers.insert((*name).to_string(), value);
                }
                record["headers"] = Value::Object(headers);
            }
            out.push(record);
        }
        out
    }
}

impl Values {
    fn of(seen: &[&Value]) -> Self {
        if !seen.is_empty() && seen.iter().all(|v| v.is_i64()) {
            let seen: Vec<i64> = seen.iter().filter_map(|v| v.as_i64()).collect();
            let low = seen.iter().copied().min().unwrap_or(0).min(0);
            let high = seen
                .iter()
                .copied()
                .max()
                .unwrap_or(0)
                .max(1)
                .saturating_mul(2);
            return Values::Longs { seen, low, high };
        }
        let strings: Vec<String> = seen
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        let stamped = |s: &String| {
            s.split_once('|')
                .is_some_and(|(at, _)| !at.is_empty() && at.bytes().all(|b| b.is_ascii_digit()))
        };
        if !strings.is_empty() && strings.iter().all(stamped) {
            let tags = strings
                .iter()
                .filter_map(|s| s.split_once('|').map(|(_, tag)| tag.to_string()))
                .collect();
            return Values::Stamped(tags);
        }
        assert!(!strings.is_empty(), "a topic with values: {seen:?}");
        Values::Strings(strings)
    }

    fn pick(&self, rng: &mut SplitMix64) -> Value {
        match self {
            Values::Strings(seen) | Values::Stamped(seen) => json!(rng.pick(seen)),
            Values::Longs { seen, low, high } => {
                if rng.chance(0.6) {
                    json!(rng.pick(seen))
                } else {
                    let span = high.abs_diff(*low).saturating_add(1);
                    let offset = rng.next_u64() % span;
                    json!(low.saturating_add_unsigned(offset))
                }
            }
        }
    }
}

/// The seed of input `seed` of scenario `name`: the scenario's name is mixed in (FNV-1a), so
/// the same seed gives unrelated inputs to different scenarios.
pub fn seed_of(name: &str, seed: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}
