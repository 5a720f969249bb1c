//! The orders in which Java's collections iterate, so that `describe()` prints nodes, stores
//! and topics in exactly Kafka Streams' order: `String.hashCode`, the bucket order of a
//! `HashMap`/`HashSet`, and a `TreeSet` whose comparator changes while elements are added
//! (Kafka sorts a node's neighbours by sub-tree sizes that grow as the description is built,
//! so their order depends on the shape of the red-black tree at each insertion).

use std::cmp::Ordering;

/// Java's `String.hashCode` over UTF-16 code units.
pub(crate) fn string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The bucket `HashMap.hash` puts a key with `hash` in, in a table of `capacity` buckets.
fn bucket(hash: i32, capacity: usize) -> usize {
    let spread = hash ^ ((hash as u32) >> 16) as i32;
    (spread as u32 as usize) & (capacity - 1)
}

/// The table size of a `HashMap` that grew from 16 buckets to hold `len` entries.
fn grown_capacity(len: usize) -> usize {
    let mut capacity = 16;
    while len > capacity * 3 / 4 {
        capacity *= 2;
    }
    capacity
}

/// The order a `HashSet<String>` (or the keys of a `HashMap<String, _>`) iterates `names`,
/// given in the order they were inserted: by bucket, and within a bucket by insertion.
/// Returns indexes into `names`.
pub(crate) fn hash_order(names: &[&str]) -> Vec<usize> {
    let capacity = grown_capacity(names.len());
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by_key(|&i| bucket(string_hash(names[i]), capacity));
    order
}

/// `AbstractCollection.toString` of a `HashSet<String>` built from `names`: `[a, b]`.
pub(crate) fn hash_set_string(names: &[String]) -> String {
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let ordered: Vec<&str> = hash_order(&refs).into_iter().map(|i| refs[i]).collect();
    format!("[{}]", ordered.join(", "))
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    element: usize,
    left: Option<usize>,
    right: Option<usize>,
    parent: Option<usize>,
    red: bool,
}

/// A `java.util.TreeSet` of element ids, reproducing `TreeMap.put` and its red-black
/// rebalancing step by step, so that an inconsistent comparator leaves elements where Java
/// leaves them.
#[derive(Debug, Default, Clone)]
pub(crate) struct TreeSet {
    entries: Vec<Entry>,
    root: Option<usize>,
}

impl TreeSet {
    /// Adds `element`, comparing it with `compare(new, existing)` as Java does.
    pub(crate) fn add(
        &mut self,
        element: usize,
        mut compare: impl FnMut(usize, usize) -> Ordering,
    ) {
        let Some(root) = self.root else {
            self.entries.push(Entry {
                element,
                left: None,
                right: None,
                parent: None,
                red: false,
            });
            self.root = Some(0);
            return;
        };
        let mut t = root;
        let (parent, cmp) = loop {
            let cmp = compare(element, self.entries[t].element);
            let next = match cmp {
                Ordering::Less => self.entries[t].left,
                Ordering::Greater => self.entries[t].right,
                Ordering::Equal => return,
            };
            match next {
                Some(n) => t = n,
                None => break (t, cmp),
            }
        };
        let e = self.entries.len();
        self.entries.push(Entry {
            element,
            left: None,
            right: None,
            parent: Some(parent),
            red: false,
        });
        if cmp == Ordering::Less {
            self.entries[parent].left = Some(e);
        } else {
            self.entries[parent].right = Some(e);
        }
        self.fix_after_insertion(e);
    }

    /// The elements in the set's order.
    pub(crate) fn iter(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.entries.len());
        let mut stack = Vec::new();
        let mut at = self.root;
        while at.is_some() || !stack.is_empty() {
            while let Some(n) = at {
                stack.push(n);
                at = self.entries[n].left;
            }
            let n = stack.pop().expect("the stack is not empty");
            out.push(self.entries[n].element);
            at = self.entries[n].right;
        }
        out
    }

    /// Whether the set holds nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.root.is_none()
    }

    fn parent(&self, n: Option<usize>) -> Option<usize> {
        n.and_then(|n| self.entries[n].parent)
    }

    fn left(&self, n: Option<usize>) -> Option<usize> {
        n.and_then(|n| self.entries[n].left)
    }

    fn right(&self, n: Option<usize>) -> Option<usize> {
        n.and_then(|n| self.entries[n].right)
    }

    fn is_red(&self, n: Option<usize>) -> bool {
        n.is_some_and(|n| self.entries[n].red)
    }

    fn set_red(&mut self, n: Option<usize>, red: bool) {
        if let Some(n) = n {
            self.entries[n].red = red;
        }
    }

    fn fix_after_insertion(&mut self, x: usize) {
        let mut x = Some(x);
        self.set_red(x, true);
        while x.is_some() && x != self.root && self.is_red(self.parent(x)) {
            let grand = self.parent(self.parent(x));
            if self.parent(x) == self.left(grand) {
                let y = self.right(grand);
                if self.is_red(y) {
                    self.set_red(self.parent(x), false);
                    self.set_red(y, false);
                    self.set_red(grand, true);
                    x = grand;
                } else {
                    if x == self.right(self.parent(x)) {
                        x = self.parent(x);
                        self.rotate_left(x);
                    }
                    self.set_red(self.parent(x), false);
                    let grand = self.parent(self.parent(x));
                    self.set_red(grand, true);
                    self.rotate_right(grand);
                }
            } else {
                let y = self.left(grand);
                if self.is_red(y) {
                    self.set_red(self.parent(x), false);
                    self.set_red(y, false);
                    self.set_red(grand, true);
                    x = grand;
                } else {
                    if x == self.left(self.parent(x)) {
                        x = self.parent(x);
                        self.rotate_right(x);
                    }
                    self.set_red(self.parent(x), false);
                    let grand = self.parent(self.parent(x));
                    self.set_red(grand, true);
                    self.rotate_left(grand);
                }
            }
        }
        let root = self.root;
        self.set_red(root, false);
    }

    fn rotate_left(&mut self, p: Option<usize>) {
        let Some(p) = p else { return };
        let Some(r) = self.entries[p].right else {
            return;
        };
        self.entries[p].right = self.entries[r].left;
        if let Some(rl) = self.entries[r].left {
            self.entries[rl].parent = Some(p);
        }
        self.entries[r].parent = self.entries[p].parent;
        match self.entries[p].parent {
            None => self.root = Some(r),
            Some(pp) if self.entries[pp].left == Some(p) => self.entries[pp].left = Some(r),
            Some(pp) => self.entries[pp].right = Some(r),
        }
        self.entries[r].left = Some(p);
        self.entries[p].parent = Some(r);
    }

    fn rotate_right(&mut self, p: Option<usize>) {
        let Some(p) = p else { return };
        let Some(l) = self.entries[p].left else {
            return;
        };
        self.entries[p].left = self.entries[l].right;
        if let Some(lr) = self.entries[l].right {
            self.entries[lr].parent = Some(p);
        }
        self.entries[l].parent = self.entries[p].parent;
        match self.entries[p].parent {
            None => self.root = Some(l),
            Some(pp) if self.entries[pp].right == Some(p) => self.entries[pp].right = Some(l),
            Some(pp) => self.entries[pp].left = Some(l),
        }
        self.entries[l].right = Some(p);
        self.entries[p].parent = Some(l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn string_hashes_are_javas() {
        // Values printed by Java's "…".hashCode().
        assert_eq!(string_hash(""), 0);
        assert_eq!(string_hash("a"), 97);
        assert_eq!(string_hash("hello"), 99_162_322);
        assert_eq!(string_hash("KSTREAM-SOURCE-0000000000"), 1_861_603_632);
    }

    proptest! {
        /// With a consistent comparator the tree set sorts, whatever the insertion order.
        #[test]
        fn a_consistent_comparator_sorts(mut values in proptest::collection::vec(0usize..1000, 0..40)) {
            let mut set = TreeSet::default();
            for &v in &values {
                set.add(v, |a, b| a.cmp(&b));
            }
            values.sort_unstable();
            values.dedup();
            prop_assert_eq!(set.iter(), values);
        }
    }
}
