//! A binary heap that behaves exactly as Java's `PriorityQueue` does — the same sift-up,
//! sift-down, bulk removal and array order — because Flink CEP walks its partial matches in
//! that array order and emits ties in that poll order, and eddy emits what Flink emits.

use std::cmp::Ordering;

/// A queue ordered by `C`, with Java's `PriorityQueue` operations.
pub(crate) struct JavaHeap<T> {
    items: Vec<T>,
}

impl<T> Default for JavaHeap<T> {
    fn default() -> Self {
        JavaHeap { items: Vec::new() }
    }
}

/// How the heap orders its items.
pub(crate) trait HeapOrder {
    fn heap_cmp(&self, other: &Self) -> Ordering;
}

impl<T: HeapOrder> JavaHeap<T> {
    /// The items in array order (Java's iteration order).
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(crate) fn peek(&self) -> Option<&T> {
        self.items.first()
    }

    /// Java's `offer`.
    pub(crate) fn push(&mut self, item: T) {
        self.items.push(item);
        let k = self.items.len() - 1;
        self.sift_up(k);
    }

    /// Java's `poll`.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.items.is_empty() {
            return None;
        }
        let last = self.items.len() - 1;
        self.items.swap(0, last);
        let result = self.items.pop();
        if !self.items.is_empty() {
            self.sift_down(0);
        }
        result
    }

    /// Java's `removeIf`/`removeAll`: the survivors keep their array order, then the heap is
    /// rebuilt — only when something was removed. Returns the removed items.
    pub(crate) fn remove_where(&mut self, mut remove: impl FnMut(&T) -> bool) -> Vec<T> {
        if !self.items.iter().any(&mut remove) {
            return Vec::new();
        }
        let mut removed = Vec::new();
        let mut kept = Vec::with_capacity(self.items.len());
        for item in self.items.drain(..) {
            if remove(&item) {
                removed.push(item);
            } else {
                kept.push(item);
            }
        }
        self.items = kept;
        self.heapify();
        removed
    }

    /// The items in array order.
    pub(crate) fn as_slice(&self) -> &[T] {
        &self.items
    }

    /// Takes every item out in array order.
    pub(crate) fn drain(&mut self) -> std::vec::Drain<'_, T> {
        self.items.drain(..)
    }

    /// A heap holding `items` in exactly this array order (as read back from a store).
    pub(crate) fn from_array(items: Vec<T>) -> Self {
        JavaHeap { items }
    }

    /// The heap's vector, emptied: its room kept for another heap.
    pub(crate) fn into_emptied(mut self) -> Vec<T> {
        self.items.clear();
        self.items
    }

    fn heapify(&mut self) {
        for i in (0..self.items.len() >> 1).rev() {
            self.sift_down(i);
        }
    }

    fn sift_up(&mut self, mut k: usize) {
        while k > 0 {
            let parent = (k - 1) >> 1;
            if self.items[k].heap_cmp(&self.items[parent]) != Ordering::Less {
                break;
            }
            self.items.swap(k, parent);
            k = parent;
        }
    }

    fn sift_down(&mut self, mut k: usize) {
        let n = self.items.len();
        let half = n >> 1;
        while k < half {
            let mut child = (k << 1) + 1;
            let right = child + 1;
            if right < n && self.items[child].heap_cmp(&self.items[right]) == Ordering::Greater {
                child = right;
            }
            if self.items[k].heap_cmp(&self.items[child]) != Ordering::Greater {
                break;
            }
            self.items.swap(k, child);
            k = child;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq, Clone, Copy)]
    struct Item(u32, char);

    impl HeapOrder for Item {
        fn heap_cmp(&self, other: &Self) -> Ordering {
            self.0.cmp(&other.0)
        }
    }

    #[test]
    fn ties_leave_in_the_order_javas_priority_queue_gives_them() {
        // java.util.PriorityQueue with a comparator on the number, offered in this order,
        // polls (1,c) (1,a) (2,b) (2,d): the swaps of sift-down decide between ties.
        let mut heap = JavaHeap::default();
        for item in [Item(1, 'a'), Item(2, 'b'), Item(1, 'c'), Item(2, 'd')] {
            heap.push(item);
        }
        assert_eq!(
            heap.iter().copied().collect::<Vec<_>>(),
            vec![Item(1, 'a'), Item(2, 'b'), Item(1, 'c'), Item(2, 'd')]
        );
        let polled: Vec<Item> = std::iter::from_fn(|| heap.pop()).collect();
        assert_eq!(
            polled,
            vec![Item(1, 'a'), Item(1, 'c'), Item(2, 'd'), Item(2, 'b')]
        );
    }

    #[test]
    fn removal_keeps_survivors_in_array_order_then_heapifies() {
        let mut heap = JavaHeap::default();
        for n in [5, 3, 8, 1, 4] {
            heap.push(Item(n, 'x'));
        }
        let removed = heap.remove_where(|i| i.0 == 1);
        assert_eq!(removed, vec![Item(1, 'x')]);
        assert_eq!(heap.peek(), Some(&Item(3, 'x')));
        assert!(heap.remove_where(|i| i.0 == 99).is_empty());
        assert_eq!(heap.len(), 4);
    }
}
