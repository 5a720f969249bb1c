//! Property tests of windowed aggregation: for random records (keys, out-of-order
//! timestamps), a windowed count gives, for every window, what a brute-force recount of the
//! records that were in time for it gives.

use std::collections::BTreeMap;
use std::time::Duration;

use eddy::serde::{I64Serde, Nullable, StringSerde};
use eddy::streams::windows::TimeWindows;
use eddy::streams::{Consumed, Grouped, Materialized, Produced, StreamsBuilder, TimeWindowedSerde};
use eddy::testing::TestDriver;
use proptest::prelude::*;

/// Counts by brute force: every window of `size` starting at a multiple of `advance` that
/// holds the record and has not closed (end + grace beyond the stream time so far).
fn recount(
    records: &[(u8, i64)],
    size: i64,
    advance: i64,
    grace: i64,
) -> BTreeMap<(String, i64), i64> {
    let mut observed = -1;
    let mut counts = BTreeMap::new();
    for &(key, ts) in records {
        observed = observed.max(ts);
        let mut start = 0;
        while start <= ts {
            if ts < start + size && start + size > observed - grace {
                *counts.entry((format!("k{key}"), start)).or_insert(0) += 1;
            }
            start += advance;
        }
    }
    counts
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_windowed_count_equals_a_brute_force_recount(
        records in proptest::collection::vec((0u8..3, 0i64..60_000), 1..80),
        hopping in any::<bool>(),
        grace in prop_oneof![Just(0i64), Just(3_000i64), Just(20_000i64)],
        partitions in 1i32..4,
    ) {
        let size = 10_000;
        let advance = if hopping { 4_000 } else { size };
        let windows = TimeWindows::of_size_and_grace(
            Duration::from_millis(size as u64),
            Duration::from_millis(grace as u64),
        )
        .and_then(|w| w.advance_by(Duration::from_millis(advance as u64)))
        .unwrap();
        let builder = StreamsBuilder::new();
        builder
            .stream("in", Consumed::with(StringSerde, StringSerde))
            .group_by_key(Grouped::default())
            .windowed_by(windows)
            .count(Materialized::default())
            .to_stream()
            .to("out", Produced::default());
        let driver = TestDriver::builder(builder.build().unwrap())
            .partitions(partitions)
            .build()
            .unwrap();
        let input = driver.create_input_topic("in", StringSerde, StringSerde);
        for &(key, ts) in &records {
            input.pipe_input_at(format!("k{key}"), "v".to_string(), ts).unwrap();
        }
        let out = driver.create_output_topic(
            "out",
            TimeWindowedSerde::new(StringSerde, size),
            Nullable(I64Serde),
        );
        let mut latest = BTreeMap::new();
        for r in out.read_records_to_list() {
            let entry = latest.entry((r.key.key.clone(), r.key.window.start)).or_insert(0);
            // Each update of a window counts one more.
            prop_assert_eq!(r.value, Some(*entry + 1));
            *entry += 1;
        }
        // With one partition, stream time is that of every record; with more, each task has
        // its own, so the brute force runs per partition of the key.
        let mut expected = BTreeMap::new();
        for p in 0..partitions {
            let mine: Vec<(u8, i64)> = records
                .iter()
                .copied()
                .filter(|(k, _)| {
                    eddy::log::partition_for_key(format!("k{k}").as_bytes(), partitions) == p
                })
                .collect();
            expected.extend(recount(&mine, size, advance, grace));
        }
        prop_assert_eq!(latest, expected);
    }
}
