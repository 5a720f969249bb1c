use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn starts(w: &TimeWindows, ts: i64) -> Vec<(i64, i64)> {
    w.windows_for(ts).map(|w| (w.start, w.end)).collect()
}

#[test]
fn tumbling_windows_are_aligned_to_the_epoch_and_end_exclusive() {
    let w = TimeWindows::of_size_with_no_grace(ms(5_000)).unwrap();
    assert_eq!(starts(&w, 0), [(0, 5_000)]);
    assert_eq!(starts(&w, 4_999), [(0, 5_000)]);
    assert_eq!(starts(&w, 5_000), [(5_000, 10_000)]);
    assert_eq!(
        starts(&w, 1_700_000_001_234),
        [(1_700_000_000_000, 1_700_000_005_000)]
    );
}

#[test]
fn hopping_windows_overlap_and_none_starts_before_the_epoch() {
    let w = TimeWindows::of_size_with_no_grace(ms(10))
        .unwrap()
        .advance_by(ms(5))
        .unwrap();
    assert_eq!(starts(&w, 3), [(0, 10)]);
    assert_eq!(starts(&w, 7), [(0, 10), (5, 15)]);
    assert_eq!(starts(&w, 10), [(5, 15), (10, 20)]);
    assert_eq!(starts(&w, 14), [(5, 15), (10, 20)]);
}

#[test]
fn a_window_closes_at_its_end_plus_grace_in_stream_time() {
    let strict = TimeWindows::of_size_with_no_grace(ms(5_000)).unwrap();
    assert!(strict.is_open(5_000, 4_999));
    assert!(!strict.is_open(5_000, 5_000));
    let lenient = TimeWindows::of_size_and_grace(ms(5_000), ms(100)).unwrap();
    assert!(lenient.is_open(5_000, 5_099));
    assert!(!lenient.is_open(5_000, 5_100));
}

#[test]
fn join_windows_include_both_bounds() {
    let w = JoinWindows::of_time_difference_with_no_grace(ms(10)).unwrap();
    assert!(w.joins(100, 90) && w.joins(100, 110) && w.joins(100, 100));
    assert!(!w.joins(100, 89) && !w.joins(100, 111));
    let only_later = w.before(ms(0)).unwrap();
    assert!(!only_later.joins(100, 99) && only_later.joins(100, 100) && only_later.joins(100, 110));
}

#[test]
fn a_record_joins_a_session_within_the_gap_of_either_end() {
    let s = SessionWindows::of_inactivity_gap_with_no_grace(ms(5)).unwrap();
    assert!(s.joins((10, 20), 5) && s.joins((10, 20), 25) && s.joins((10, 20), 15));
    assert!(!s.joins((10, 20), 4) && !s.joins((10, 20), 26));
}

#[test]
fn definitions_kafka_refuses_are_refused() {
    assert!(TimeWindows::of_size_with_no_grace(ms(0)).is_err());
    let w = TimeWindows::of_size_with_no_grace(ms(10)).unwrap();
    assert!(w.advance_by(ms(11)).is_err());
    assert!(w.advance_by(ms(0)).is_err());
    assert!(SessionWindows::of_inactivity_gap_with_no_grace(ms(0)).is_err());
    assert!(SlidingWindows::of_time_difference_and_grace(ms(0), ms(0)).is_err());
}

proptest! {
    /// `windows_for` gives exactly the windows a brute-force search finds: every start that is
    /// a multiple of the advance, not before the epoch, with `start <= ts < start + size`.
    #[test]
    fn windows_for_matches_a_brute_force_search(
        size in 1u64..50,
        advance_seed in 1u64..50,
        ts in 0i64..500,
    ) {
        let advance = 1 + (advance_seed - 1) % size;
        let w = TimeWindows::of_size_with_no_grace(ms(size)).unwrap().advance_by(ms(advance)).unwrap();
        let expected: Vec<(i64, i64)> = (0..=ts)
            .filter(|s| s % advance as i64 == 0 && *s <= ts && ts < s + size as i64)
            .map(|s| (s, s + size as i64))
            .collect();
        prop_assert_eq!(starts(&w, ts), expected);
    }
}
