//! When keys' partial matches time out, earliest first. Deadlines are a start time plus the
//! window, and events come in time order, so nearly every deadline set is no earlier than the
//! last: those go on the end of a queue, in order, where setting and taking them touch memory
//! in sequence; the few set earlier (after a restore, or from a late partial match) go to a
//! heap. Ties leave in the order they were set.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use crate::log::Timestamp;

/// Items by time, earliest first.
pub(crate) struct Timeline<T> {
    /// Times never decreasing, front to back.
    queue: VecDeque<(Timestamp, T)>,
    /// What came earlier than the queue's last.
    heap: BinaryHeap<Reverse<Early<T>>>,
    /// How many items went to the heap: the order of ties there.
    set: u64,
}

/// An item of the heap, ordered by its time and then the order it was set.
struct Early<T> {
    time: Timestamp,
    set: u64,
    item: T,
}

impl<T> PartialEq for Early<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.set) == (other.time, other.set)
    }
}

impl<T> Eq for Early<T> {}

impl<T> PartialOrd for Early<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Early<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.time, self.set).cmp(&(other.time, other.set))
    }
}

impl<T> Default for Timeline<T> {
    fn default() -> Self {
        Timeline {
            queue: VecDeque::new(),
            heap: BinaryHeap::new(),
            set: 0,
        }
    }
}

impl<T> Timeline<T> {
    /// Adds `item` at `time`.
    pub(crate) fn push(&mut self, time: Timestamp, item: T) {
        if self.queue.back().is_none_or(|(last, _)| *last <= time) {
            self.queue.push_back((time, item));
        } else {
            self.set += 1;
            self.heap.push(Reverse(Early {
                time,
                set: self.set,
                item,
            }));
        }
    }

    /// The earliest time held.
    pub(crate) fn first(&self) -> Option<Timestamp> {
        let queued = self.queue.front().map(|(t, _)| *t);
        let early = self.heap.peek().map(|Reverse(e)| e.time);
        match (queued, early) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Takes the earliest item if its time is at most `until`.
    pub(crate) fn pop_until(&mut self, until: Timestamp) -> Option<(Timestamp, T)> {
        let queued = self.queue.front().map(|(t, _)| *t);
        let early = self.heap.peek().map(|Reverse(e)| e.time);
        let from_heap = match (queued, early) {
            (_, Some(e)) if e > until => false,
            (Some(q), Some(e)) => e < q,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        if from_heap {
            return self.heap.pop().map(|Reverse(e)| (e.time, e.item));
        }
        if queued.is_some_and(|q| q <= until) {
            return self.queue.pop_front();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::Timeline;

    #[test]
    fn items_leave_earliest_first_wherever_they_were_kept() {
        let mut timeline = Timeline::default();
        for (t, item) in [
            (5, 'a'),
            (7, 'b'),
            (3, 'c'),
            (7, 'd'),
            (6, 'e'),
            (9, 'f'),
            (3, 'g'),
        ] {
            timeline.push(t, item);
        }
        assert_eq!(timeline.first(), Some(3));
        let mut out = Vec::new();
        while let Some(entry) = timeline.pop_until(7) {
            out.push(entry);
        }
        assert_eq!(
            out,
            vec![(3, 'c'), (3, 'g'), (5, 'a'), (6, 'e'), (7, 'b'), (7, 'd')]
        );
        assert_eq!(timeline.first(), Some(9));
        assert_eq!(timeline.pop_until(8), None);
        assert_eq!(timeline.pop_until(9), Some((9, 'f')));
        assert_eq!(timeline.first(), None);
    }
}
