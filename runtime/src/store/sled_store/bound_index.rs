//! The pages' bounds of one tree in memory, in order, as arrays searched by halves: each
//! bound's first sixteen bytes as a number in one array (a search compares integers held
//! side by side, a few cache lines for thousands of pages), the bounds themselves beside
//! them for the keys whose first bytes tie, and a slot per bound. Reading a key searches
//! them once; a sled batch that adds or removes pages rebuilds them once, merging its
//! changes in.

use std::collections::BTreeMap;

use eddy_core::streams::store::layers::key_head as head_of;
use sled::IVec;

/// Bounds in key order, each with a slot `S`.
#[derive(Debug)]
pub(super) struct BoundIndex<S> {
    heads: Vec<u128>,
    keys: Vec<IVec>,
    slots: Vec<S>,
}

impl<S: Default> BoundIndex<S> {
    /// The index of `keys`, which are in order, one each, every slot empty.
    pub(super) fn from_sorted(keys: Vec<IVec>) -> Self {
        debug_assert!(keys.windows(2).all(|w| w[0] < w[1]));
        Self {
            heads: keys.iter().map(|k| head_of(k)).collect(),
            slots: keys.iter().map(|_| S::default()).collect(),
            keys,
        }
    }

    /// Adds (`true`) or removes each key of `changes` (a later change of a key overrides an
    /// earlier one); `removed` is given the slot of each bound removed.
    pub(super) fn change(&mut self, changes: &[(IVec, bool)], mut removed: impl FnMut(S)) {
        let wanted: BTreeMap<&IVec, bool> = changes.iter().map(|(k, added)| (k, *added)).collect();
        let old_keys = std::mem::take(&mut self.keys);
        let old_slots = std::mem::take(&mut self.slots);
        let len = old_keys.len() + wanted.len();
        self.heads.clear();
        self.heads.reserve(len);
        self.keys.reserve(len);
        self.slots.reserve(len);
        let mut wanted = wanted.into_iter().peekable();
        for (key, slot) in old_keys.into_iter().zip(old_slots) {
            while let Some((before, keep)) = wanted.next_if(|(k, _)| **k < key) {
                self.push_new(before, keep);
            }
            match wanted.next_if(|(k, _)| **k == key) {
                Some((_, false)) => removed(slot),
                _ => self.push(key, slot),
            }
        }
        for (added, keep) in wanted {
            self.push_new(added, keep);
        }
    }

    fn push_new(&mut self, key: &IVec, keep: bool) {
        if keep {
            self.push(key.clone(), S::default());
        }
    }

    fn push(&mut self, key: IVec, slot: S) {
        self.heads.push(head_of(&key));
        self.keys.push(key);
        self.slots.push(slot);
    }
}

impl<S> BoundIndex<S> {
    /// How many bounds there are.
    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The number of bounds at or below `key`: where `key` would go after its equal.
    fn upper(&self, key: &[u8]) -> usize {
        let head = head_of(key);
        let from = self.heads.partition_point(|h| *h < head);
        let to = from + self.heads[from..].partition_point(|h| *h == head);
        from + self.keys[from..to].partition_point(|k| &k[..] <= key)
    }

    /// The index of the greatest bound at or below `key`.
    pub(super) fn at_or_before(&self, key: &[u8]) -> Option<usize> {
        self.upper(key).checked_sub(1)
    }

    /// The index of the first bound after `key`.
    pub(super) fn after(&self, key: &[u8]) -> Option<usize> {
        Some(self.upper(key)).filter(|&i| i < self.len())
    }

    /// The index of the bound `key`.
    pub(super) fn position(&self, key: &[u8]) -> Option<usize> {
        self.at_or_before(key).filter(|&i| self.keys[i] == key)
    }

    /// The bound at `index` and its slot.
    pub(super) fn get(&self, index: usize) -> Option<(&IVec, &S)> {
        Some((self.keys.get(index)?, self.slots.get(index)?))
    }

    /// The slot of the bound `key`.
    pub(super) fn slot(&self, key: &[u8]) -> Option<&S> {
        self.position(key).map(|i| &self.slots[i])
    }

    /// The bounds and their slots, in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&IVec, &S)> + '_ {
        self.keys.iter().zip(&self.slots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keys(index: &BoundIndex<u8>) -> Vec<Vec<u8>> {
        index.iter().map(|(k, _)| k.to_vec()).collect()
    }

    proptest! {
        /// Searches and changes agree with a `BTreeMap` of the same keys, for keys that tie
        /// in their first sixteen bytes too (a shared prefix of 15 or 17 bytes).
        #[test]
        fn the_index_agrees_with_an_ordered_map(
            start in proptest::collection::btree_set(key(), 0..40),
            changes in proptest::collection::vec((key(), any::<bool>()), 0..40),
            probes in proptest::collection::vec(key(), 0..40),
        ) {
            let mut model: BTreeMap<Vec<u8>, u8> = start.iter().map(|k| (k.clone(), 0)).collect();
            let mut index = BoundIndex::<u8>::from_sorted(start.iter().map(|k| IVec::from(&k[..])).collect());
            let mut removed = Vec::new();
            let changes: Vec<(IVec, bool)> = changes.into_iter().map(|(k, a)| (IVec::from(k), a)).collect();
            let mut last: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
            for (k, added) in &changes {
                last.insert(k.to_vec(), *added);
            }
            for (k, added) in last {
                if added {
                    model.entry(k).or_insert(0);
                } else if model.remove(&k).is_some() {
                    removed.push(k);
                }
            }
            let mut given = 0;
            index.change(&changes, |_| given += 1);
            prop_assert_eq!(given, removed.len());
            prop_assert_eq!(keys(&index), model.keys().cloned().collect::<Vec<_>>());
            for probe in probes.iter().chain(model.keys()) {
                let before = model.range(..=probe.clone()).next_back().map(|(k, _)| k.clone());
                let found = index.at_or_before(probe).map(|i| index.get(i).unwrap().0.to_vec());
                prop_assert_eq!(found, before);
                let after = model
                    .range((std::ops::Bound::Excluded(probe.clone()), std::ops::Bound::Unbounded))
                    .next()
                    .map(|(k, _)| k.clone());
                let found = index.after(probe).map(|i| index.get(i).unwrap().0.to_vec());
                prop_assert_eq!(found, after);
                prop_assert_eq!(index.slot(probe).is_some(), model.contains_key(probe));
            }
        }
    }

    /// Keys that often share their first 15 or 17 bytes, and short ones.
    fn key() -> impl Strategy<Value = Vec<u8>> {
        let prefix = prop_oneof![Just(vec![7u8; 15]), Just(vec![7u8; 17]), Just(vec![])];
        (prefix, proptest::collection::vec(0u8..4, 0..4)).prop_map(|(mut p, tail)| {
            p.extend(tail);
            p
        })
    }

    #[test]
    fn a_slot_removed_is_given_back_and_an_added_one_is_empty() {
        let mut index = BoundIndex::<u8>::from_sorted(vec![IVec::from(b"a"), IVec::from(b"c")]);
        index.slots[1] = 9;
        let mut given = Vec::new();
        index.change(
            &[(IVec::from(b"c"), false), (IVec::from(b"b"), true)],
            |s| given.push(s),
        );
        assert_eq!(given, [9]);
        assert_eq!(keys(&index), [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(index.slot(b"b"), Some(&0));
    }
}
