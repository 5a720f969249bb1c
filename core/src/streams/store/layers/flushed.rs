//! [`Flushed`]: what a record cache sent down since its writer last took it, kept to be
//! forwarded in the order the entries were last written, as Kafka's cache flushes.

/// The entries a record cache sent down since they were last taken, in the order it sent
/// them: key, new value (`None`: deleted) and, when asked for, the value it replaced below.
///
/// An entry is its bytes, key then values, in one buffer for all, and 32 bytes of where they
/// are: a flush of a large cache keeps a copy of every entry it sends down until the writer
/// has forwarded them, so the copy is kept small.
#[derive(Debug, Default)]
pub struct Flushed {
    bytes: Vec<u8>,
    entries: Vec<FlushedEntry>,
    /// Where [`Flushed::order_from`] places entries by their tick, then which goes where.
    ticks: Vec<u32>,
}

/// The length of a value that is not there.
const ABSENT: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct FlushedEntry {
    /// Where the key starts in [`Flushed::bytes`]; the new value follows it, then the old.
    start: usize,
    key_len: u32,
    /// [`ABSENT`]: deleted.
    new_len: u32,
    /// [`ABSENT`]: not kept.
    old_len: u32,
    /// When the entry was last written: the order a flush forwards in.
    used: u64,
}

/// The length of a key or value a flush keeps. Whatever a cache holds went through a
/// serializer into memory and is on its way to a changelog record, whose length Kafka's
/// record format holds in an `i32`: it is shorter than [`ABSENT`].
fn kept_len(bytes: &[u8]) -> u32 {
    u32::try_from(bytes.len())
        .ok()
        .filter(|&n| n != ABSENT)
        .expect("a cached key or value is shorter than 4 GiB")
}

impl Flushed {
    pub(super) fn push(&mut self, key: &[u8], new: Option<&[u8]>, old: Option<&[u8]>, used: u64) {
        let start = self.bytes.len();
        let mut len = |value: Option<&[u8]>| match value {
            Some(v) => {
                self.bytes.extend_from_slice(v);
                kept_len(v)
            }
            None => ABSENT,
        };
        let entry = FlushedEntry {
            start,
            key_len: len(Some(key)),
            new_len: len(new),
            old_len: len(old),
            used,
        };
        self.entries.push(entry);
    }

    /// Puts the entries from `start` on in the order they were written. The cache's clock
    /// gives every write a tick of its own, so entries whose ticks lie close together (a
    /// cache whose keys were each written about once since the last flush) are placed at
    /// their ticks and moved to their places in one pass rather than sorted; otherwise, or
    /// if two share a tick, they are sorted.
    pub(super) fn order_from(&mut self, start: usize) {
        let run = &mut self.entries[start..];
        let (Some(first), Some(last)) = (
            run.iter().map(|e| e.used).min(),
            run.iter().map(|e| e.used).max(),
        ) else {
            return;
        };
        let span = last - first + 1;
        let close = u32::try_from(run.len()).is_ok_and(|n| span <= u64::from(n) * 4);
        if close && place_by_tick(run, first, span, &mut self.ticks) {
            return;
        }
        run.sort_unstable_by_key(|e| e.used);
    }

    /// How many entries were sent down.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing was sent down.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets the entries. The room stays for the next flush, about as much as this one
    /// used: what a much larger flush before took is given back.
    pub fn clear(&mut self) {
        fit(&mut self.bytes);
        fit(&mut self.entries);
        fit(&mut self.ticks);
        self.bytes.clear();
        self.entries.clear();
    }

    /// The entries: key, new value, old value.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>, Option<&[u8]>)> + '_ {
        self.entries.iter().map(|e| {
            let mut at = e.start;
            let mut take = |len: u32| {
                // Lengths were taken from slices of `bytes`, laid down in this order.
                let len = len as usize;
                let slice = &self.bytes[at..at + len];
                at += len;
                slice
            };
            let key = take(e.key_len);
            let new = (e.new_len != ABSENT).then(|| take(e.new_len));
            let old = (e.old_len != ABSENT).then(|| take(e.old_len));
            (key, new, old)
        })
    }
}

/// Gives back the room of `items` beyond twice what it holds.
fn fit<T>(items: &mut Vec<T>) {
    if items.capacity() / 2 > items.len() {
        items.shrink_to(items.len());
    }
}

/// Puts `run` in the order of its ticks, which lie from `first` over `span` ticks, by placing
/// each entry at its tick and then moving each to its place; `false`, with `run` unchanged,
/// if two entries share a tick.
fn place_by_tick(run: &mut [FlushedEntry], first: u64, span: u64, ticks: &mut Vec<u32>) -> bool {
    const EMPTY: u32 = u32::MAX;
    let Ok(span) = usize::try_from(span) else {
        return false;
    };
    ticks.clear();
    ticks.resize(span, EMPTY);
    for (i, entry) in run.iter().enumerate() {
        // Within the span by how `first` and `span` were taken; `run` is shorter than EMPTY.
        let tick = &mut ticks[(entry.used - first) as usize];
        if *tick != EMPTY {
            return false;
        }
        *tick = i as u32;
    }
    // The entries in the order of their ticks, written over the front of the ticks' room
    // while it is read further on (the k-th entry met is at a tick of index k or more).
    let mut rank = 0;
    for at in 0..span {
        let i = ticks[at];
        if i != EMPTY {
            ticks[rank] = i;
            rank += 1;
        }
    }
    // `ticks[..run.len()]` now holds, for each place, the entry that goes there: each cycle
    // of that is followed once, a place marked done by pointing at itself.
    let from = &mut ticks[..run.len()];
    for start in 0..run.len() {
        if from[start] as usize == start {
            continue;
        }
        let held = run[start];
        let mut place = start;
        loop {
            let next = from[place] as usize;
            from[place] = place as u32;
            if next == start {
                run[place] = held;
                break;
            }
            run[place] = run[next];
            place = next;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn flushed(ticks: &[u64]) -> Flushed {
        let mut flushed = Flushed::default();
        flushed.push(b"before", None, None, u64::MAX);
        for (i, tick) in ticks.iter().enumerate() {
            let new = i.to_string().repeat(i % 3);
            let old = (i % 2 == 1).then_some(&b"old"[..]);
            flushed.push(i.to_string().as_bytes(), Some(new.as_bytes()), old, *tick);
        }
        flushed
    }

    proptest! {
        /// Entries come out in the order of their ticks, whether the ticks are close, far
        /// apart or shared; the entries before `start` stay where they were.
        #[test]
        fn flushed_entries_are_put_in_the_order_they_were_written(
            ticks in prop_oneof![
                // Each its own tick, in any order; or some sharing one.
                proptest::collection::btree_set(0u64..64, 0..48)
                    .prop_map(Vec::from_iter)
                    .prop_shuffle(),
                proptest::collection::vec(0u64..64, 0..48),
            ],
            spread in prop_oneof![Just(1u64), Just(3), Just(1_000)],
        ) {
            let ticks: Vec<u64> = ticks.iter().map(|t| 10 + t * spread).collect();
            let mut flushed = flushed(&ticks);
            flushed.order_from(1);
            let mut expected: Vec<(u64, Vec<u8>)> = ticks
                .iter()
                .enumerate()
                .map(|(i, t)| (*t, i.to_string().into_bytes()))
                .collect();
            expected.sort();
            let got: Vec<u64> = flushed.entries.iter().map(|e| e.used).collect();
            prop_assert_eq!(got[0], u64::MAX);
            prop_assert_eq!(&got[1..], expected.iter().map(|(t, _)| *t).collect::<Vec<_>>());
            // Each entry kept its own key and value.
            let kept: Vec<_> = flushed.iter().collect();
            prop_assert_eq!(kept[0], (&b"before"[..], None, None));
            for (entry, (key, new, old)) in flushed.entries[1..].iter().zip(&kept[1..]) {
                let i: usize = std::str::from_utf8(key).unwrap().parse().unwrap();
                prop_assert_eq!(entry.used, ticks[i]);
                let value = i.to_string().repeat(i % 3);
                prop_assert_eq!(*new, Some(value.as_bytes()));
                prop_assert_eq!(*old, (i % 2 == 1).then_some(&b"old"[..]));
            }
        }
    }

    #[test]
    fn a_cleared_buffer_keeps_about_the_room_of_its_last_flush() {
        let mut flushed = flushed(&(0..10_000).collect::<Vec<_>>());
        flushed.order_from(1);
        flushed.clear();
        assert!(flushed.is_empty() && flushed.iter().next().is_none());
        // A small flush after a large one: the room of the large one is given back.
        flushed.push(b"k", Some(b"new"), Some(b"old"), 1);
        flushed.push(b"gone", None, Some(b""), 2);
        flushed.order_from(0);
        let kept: Vec<_> = flushed.iter().collect();
        assert_eq!(
            kept,
            [
                (&b"k"[..], Some(&b"new"[..]), Some(&b"old"[..])),
                (&b"gone"[..], None, Some(&b""[..]))
            ]
        );
        flushed.clear();
        assert!(flushed.bytes.capacity() < 1_000 && flushed.entries.capacity() < 100);
    }
}
