//! How window and session stores lay their entries out in an inner byte store, as Kafka's
//! segmented stores do: each entry keyed by its segment (a span of time, so that expiry
//! drops whole segments and a time range reads few of them; 4 bytes, segments beyond ±2³¹
//! sharing the outermost), then the record's key, then its times; and the latest time the
//! store has seen under the empty key ([`OBSERVED`]), so that a store reopened over its
//! inner store keeps its retention. Times and segments are written big-endian with the
//! sign bit flipped, so that byte order is time order for negative times too. Reads filter
//! by time, so a segment shared or not yet dropped never shows what retention hides.

use std::ops::Bound;

use super::inner::{scan_prefix, BytesStore};
use super::layers::{ChangelogKeys, LayerConfig, StoreLayer};
use crate::log::Timestamp;

/// Where the latest time seen is kept (8 bytes, big-endian): the empty key, before every
/// entry.
pub(crate) const OBSERVED: &[u8] = &[];
/// How many bytes an entry's key has before the record's key: the segment.
pub(crate) const HEAD: usize = 4;

/// The shortest segment of Kafka's segmented stores, in ms.
const MIN_SEGMENT_INTERVAL_MS: i64 = 60_000;

/// The entries of `all` that `keep` keeps, in the order `order` gives: what the time-ordered
/// reads of window and session stores return (the entries are few: those due to be emitted).
pub(crate) fn in_order<T, O: Ord>(
    all: Vec<T>,
    keep: impl Fn(&T) -> bool,
    order: impl Fn(&T) -> O,
) -> Vec<T> {
    let mut kept: Vec<T> = all.into_iter().filter(|t| keep(t)).collect();
    kept.sort_by_cached_key(order);
    kept
}

/// `time` as 8 bytes that order as the times do.
#[inline]
pub(crate) fn ordered(time: Timestamp) -> [u8; 8] {
    ((time as u64) ^ (1 << 63)).to_be_bytes()
}

/// The time of 8 bytes from [`ordered`].
#[inline]
pub(crate) fn time_of(bytes: &[u8]) -> Timestamp {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[..8]);
    (u64::from_be_bytes(b) ^ (1 << 63)) as i64
}

/// The spans of time a store's entries are grouped in: half the retention, at least a
/// minute, as in Kafka.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segments {
    interval: i64,
}

impl Segments {
    /// The segments of a store keeping `retention` ms.
    pub(crate) fn new(retention: i64) -> Self {
        Self {
            interval: (retention / 2).max(MIN_SEGMENT_INTERVAL_MS),
        }
    }

    /// The segment of `time` (Kafka's `time / interval`).
    #[inline]
    pub(crate) fn of(self, time: Timestamp) -> i64 {
        time / self.interval
    }

    /// Calls `f` with the first key of each segment from `from` to `to` (both included)
    /// that holds an entry, in order: one probe of the store per segment, however far apart
    /// they are.
    pub(crate) fn each_held(
        self,
        layers: &dyn StoreLayer,
        from: i64,
        to: i64,
        mut f: impl FnMut(&[u8]),
    ) {
        let (from, to) = (bucket(from), bucket(to));
        let end = to.checked_add(1).map(bucket_start);
        let end = match &end {
            Some(end) => Bound::Excluded(&end[..]),
            None => Bound::Unbounded,
        };
        let mut next = from;
        loop {
            let mut held = None;
            layers.scan(Bound::Included(&bucket_start(next)), end, &mut |k, _| {
                held = k.get(..HEAD).map(bucket_of);
                false
            });
            let Some(bucket) = held else {
                return;
            };
            f(&bucket_start(bucket));
            match bucket.checked_add(1) {
                Some(b) if b <= to => next = b,
                _ => return,
            }
        }
    }
}

/// The bucket a segment's entries are kept under: the segment, the outermost ones shared.
fn bucket(segment: i64) -> i32 {
    let clamped = segment.clamp(i64::from(i32::MIN), i64::from(i32::MAX));
    i32::try_from(clamped).unwrap_or_default()
}

/// The first key of the entries of a bucket.
fn bucket_start(bucket: i32) -> [u8; HEAD] {
    ((bucket as u32) ^ (1 << 31)).to_be_bytes()
}

/// The bucket of an entry's first [`HEAD`] bytes.
fn bucket_of(head: &[u8]) -> i32 {
    let mut b = [0u8; HEAD];
    b.copy_from_slice(head);
    (u32::from_be_bytes(b) ^ (1 << 31)) as i32
}

/// The first bytes of the keys of `segment`'s entries.
pub(crate) fn segment_start(segment: i64) -> [u8; HEAD] {
    bucket_start(bucket(segment))
}

/// How a write reaches the layers: as the store's own write, or read back from the
/// changelog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    Write,
    Restore,
}

/// The layers of a window or session store with the time it has seen: what both kinds share.
/// Entries older than the retention period (measured from the latest time written) are
/// expired; whole segments of them are dropped.
pub(crate) struct Timeline {
    pub(crate) retention: i64,
    pub(crate) segments: Segments,
    /// The latest time written.
    pub(crate) observed: Timestamp,
    /// The first segment still held.
    min_segment: i64,
    pub(crate) layers: Box<dyn StoreLayer>,
}

impl Timeline {
    /// The layers `config` asks for over `inner`, logged with keys `keys`, keeping
    /// `retention` ms; the time is read back from the inner store.
    pub(crate) fn new(
        retention: i64,
        inner: Box<dyn BytesStore>,
        config: LayerConfig,
        keys: ChangelogKeys,
    ) -> Self {
        let layers = config.build(inner, keys);
        Self {
            retention,
            segments: Segments::new(retention),
            observed: observed(&*layers).unwrap_or(i64::MIN),
            min_segment: i64::MIN,
            layers,
        }
    }

    /// The earliest time still live.
    pub(crate) fn min_live(&self) -> Timestamp {
        self.observed
            .saturating_sub(self.retention)
            .saturating_add(1)
    }

    /// The first segment still held: older ones are dropped.
    pub(crate) fn min_live_segment(&self) -> i64 {
        self.segments
            .of(self.observed.saturating_sub(self.retention))
    }

    /// A write below the changelog: not logged, or read back from it.
    pub(crate) fn quiet(&mut self, origin: Origin, key: &[u8], value: Option<&[u8]>) {
        match origin {
            Origin::Write => self.layers.put_unlogged(key, value),
            Origin::Restore => self.layers.restore(key, value),
        }
    }

    /// Notes that an entry at `time` was written, dropping the segments that fall out of
    /// retention (reads skip what has expired in the segments still held).
    pub(crate) fn advance(&mut self, time: Timestamp, origin: Origin) {
        if time <= self.observed {
            return;
        }
        self.observed = time;
        self.quiet(origin, OBSERVED, Some(&time.to_be_bytes()));
        let min_segment = self.min_live_segment();
        if min_segment <= self.min_segment {
            return;
        }
        self.min_segment = min_segment;
        if origin == Origin::Restore {
            // The segments are found by a scan, which must see what was restored.
            self.layers.settle_restored();
        }
        drop_segments_before(&mut *self.layers, min_segment, |layers, k| match origin {
            Origin::Write => layers.put_unlogged(k, None),
            Origin::Restore => layers.restore(k, None),
        });
    }

    /// Calls `f` with the first key of each segment holding times from `from` to `to`.
    pub(crate) fn each_segment(&self, from: Timestamp, to: Timestamp, f: impl FnMut(&[u8])) {
        let (first, last) = (self.segments.of(from), self.segments.of(to));
        self.segments.each_held(&*self.layers, first, last, f);
    }

    /// Calls `visit` with every entry (key, value) of the segments holding times from `from`
    /// to `to`, segment by segment, each in key order.
    pub(crate) fn each_entry(
        &self,
        from: Timestamp,
        to: Timestamp,
        mut visit: impl FnMut(&[u8], &[u8]),
    ) {
        let layers = &*self.layers;
        self.each_segment(from, to, |segment| {
            scan_prefix(
                segment,
                |from, to, v| layers.scan(from, to, v),
                &mut |k, v| {
                    visit(k, v);
                    true
                },
            )
        });
    }
}

/// The latest time kept under [`OBSERVED`] in `layers`, if any.
pub(crate) fn observed(layers: &dyn StoreLayer) -> Option<Timestamp> {
    let mut value = Vec::new();
    if !layers.get_into(OBSERVED, &mut value) {
        return None;
    }
    <[u8; 8]>::try_from(&value[..]).ok().map(i64::from_be_bytes)
}

/// Builds `parts` into one key, on the stack when it is short, and calls `f` with it: what
/// reads build their keys in without an allocation.
pub(crate) fn with_key<R>(parts: &[&[u8]], f: impl FnOnce(&[u8]) -> R) -> R {
    const STACK: usize = 96;
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len <= STACK {
        let mut buffer = [0u8; STACK];
        let mut at = 0;
        for part in parts {
            buffer[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        f(&buffer[..len])
    } else {
        f(&parts.concat())
    }
}

/// Writes `parts` into `out`, cleared first.
pub(crate) fn write_key(out: &mut Vec<u8>, parts: &[&[u8]]) {
    out.clear();
    for part in parts {
        out.extend_from_slice(part);
    }
}

/// Deletes, below the changelog, every entry of the segments before `segment`.
pub(crate) fn drop_segments_before(
    layers: &mut dyn StoreLayer,
    segment: i64,
    mut delete: impl FnMut(&mut dyn StoreLayer, &[u8]),
) {
    // The keys go into one buffer, not an allocation each.
    let mut keys = Vec::new();
    let mut ends = Vec::new();
    layers.scan(
        Bound::Excluded(OBSERVED),
        Bound::Excluded(&segment_start(segment)),
        &mut |k, _| {
            keys.extend_from_slice(k);
            ends.push(keys.len());
            true
        },
    );
    let mut start = 0;
    for end in ends {
        delete(layers, &keys[start..end]);
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::streams::store::layers::LayerConfig;
    use crate::streams::store::InMemoryBytesStore;

    #[test]
    fn ordered_times_sort_as_the_times() {
        let times = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for pair in times.windows(2) {
            assert!(ordered(pair[0]) < ordered(pair[1]));
        }
        for t in times {
            assert_eq!(time_of(&ordered(t)), t);
        }
    }

    #[test]
    fn keys_are_built_on_the_stack_or_the_heap() {
        assert_eq!(with_key(&[b"ab", b"c"], |k| k.to_vec()), b"abc");
        let long = vec![7u8; 200];
        assert_eq!(with_key(&[&long, b"x"], |k| k.len()), 201);
        let mut out = vec![1, 2];
        write_key(&mut out, &[b"k", &[0]]);
        assert_eq!(out, [b'k', 0]);
    }

    #[test]
    fn only_segments_that_hold_entries_are_visited() {
        let segments = Segments::new(100);
        assert_eq!(segments.of(59_999), 0);
        assert_eq!(segments.of(60_000), 1);
        let mut layers = LayerConfig::default().build(
            Box::new(InMemoryBytesStore::new()),
            super::super::layers::ChangelogKeys::SAME,
        );
        for segment in [-3, 2, 2, 9, i64::MAX, i64::from(i32::MAX) + 5] {
            layers.put(&[&segment_start(segment)[..], b"k"].concat(), Some(b"v"));
        }
        layers.put(OBSERVED, Some(&5i64.to_be_bytes()));
        let mut seen = Vec::new();
        let mut visit = |s: &[u8]| seen.push(bucket_of(s));
        segments.each_held(&*layers, i64::MIN, i64::MAX, &mut visit);
        // Segments past ±2³¹ share the outermost bucket.
        assert_eq!(seen, [-3, 2, 9, i32::MAX]);
        seen.clear();
        segments.each_held(&*layers, 0, 9, |s| seen.push(bucket_of(s)));
        assert_eq!(seen, [2, 9]);
        assert_eq!(observed(&*layers), Some(5));
        drop_segments_before(&mut *layers, 9, |l, k| l.put(k, None));
        seen.clear();
        segments.each_held(&*layers, i64::MIN, i64::MAX, |s| seen.push(bucket_of(s)));
        assert_eq!(seen, [9, i32::MAX]);
        assert_eq!(observed(&*layers), Some(5));
    }
}
