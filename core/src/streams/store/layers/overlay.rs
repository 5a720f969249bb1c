//! Writes held above a store, in key order, and scans that see them over the store's own
//! entries: what the record cache and the write buffer both are.
//!
//! The map keeps each key's first sixteen bytes as a number beside the pointer to its bytes,
//! so that a search compares integers held in the map's own nodes and follows a key's
//! pointer only between keys that start alike: a map of a million keys is searched for
//! every record the store sees, and each pointer followed is a likely cache miss. Sixteen,
//! not eight: the entries of window and session stores start with their segment (four
//! bytes shared by every entry of a span of time), and keys often share a prefix of their
//! own (`customer-`, `key-`).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::btree_map::{self, BTreeMap};
use std::ops::Bound;

use crate::streams::store::inner::{bounds_hold_keys, Visit};

/// A key as a map of held writes orders it: by its first [`HEAD`] bytes as a big-endian
/// number (zeros after a shorter key), then by all its bytes. The same order as the bytes'.
trait OrderedKey {
    fn head(&self) -> u128;
    fn bytes(&self) -> &[u8];
}

/// How many of a key's first bytes the map keeps beside it as a number.
const HEAD: usize = 16;

/// The first sixteen bytes of `key` as a big-endian number, zeros after a shorter key: keys
/// whose heads differ are ordered as their heads are, so an ordered search of many keys can
/// compare numbers and look at the bytes only where the heads tie.
pub fn key_head(key: &[u8]) -> u128 {
    let mut head = [0; HEAD];
    let n = key.len().min(HEAD);
    head[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(head)
}

/// A key held in the map.
struct HeldKey {
    head: u128,
    bytes: Box<[u8]>,
}

impl HeldKey {
    fn new(bytes: Box<[u8]>) -> Self {
        Self {
            head: key_head(&bytes),
            bytes,
        }
    }
}

/// A key looked up in the map.
struct Probe<'a> {
    head: u128,
    bytes: &'a [u8],
}

impl<'a> Probe<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self {
            head: key_head(bytes),
            bytes,
        }
    }
}

impl OrderedKey for HeldKey {
    fn head(&self) -> u128 {
        self.head
    }
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl OrderedKey for Probe<'_> {
    fn head(&self) -> u128 {
        self.head
    }
    fn bytes(&self) -> &[u8] {
        self.bytes
    }
}

impl Ord for dyn OrderedKey + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.head()
            .cmp(&other.head())
            .then_with(|| self.bytes().cmp(other.bytes()))
    }
}

impl PartialOrd for dyn OrderedKey + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for dyn OrderedKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.head() == other.head() && self.bytes() == other.bytes()
    }
}

impl Eq for dyn OrderedKey + '_ {}

impl Ord for HeldKey {
    fn cmp(&self, other: &Self) -> Ordering {
        (self as &dyn OrderedKey).cmp(other)
    }
}

impl PartialOrd for HeldKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for HeldKey {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for HeldKey {}

impl<'a> Borrow<dyn OrderedKey + 'a> for HeldKey {
    fn borrow(&self) -> &(dyn OrderedKey + 'a) {
        self
    }
}

fn as_ordered<'p>(bound: &'p Bound<Probe<'_>>) -> Bound<&'p dyn OrderedKey> {
    match bound {
        Bound::Included(probe) => Bound::Included(probe),
        Bound::Excluded(probe) => Bound::Excluded(probe),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Where a key's entry is or would go, found with one search ([`Overlay::slot`]).
pub(super) enum Slot<'a, E> {
    /// The key's entry.
    Held(&'a mut E),
    /// The key is not held: an entry can be put in its place without a second search.
    Vacant(VacantSlot<'a, E>),
}

/// The place of a key not held.
pub(super) struct VacantSlot<'a, E>(btree_map::VacantEntry<'a, HeldKey, E>);

impl<'a, E> VacantSlot<'a, E> {
    /// Holds `entry` for the key.
    pub(super) fn insert(self, entry: E) -> &'a mut E {
        self.0.insert(entry)
    }
}

/// Entries in strictly ascending key order, to be added to an [`Overlay`] at once.
pub(super) struct SortedRun<E> {
    entries: Vec<(HeldKey, E)>,
}

impl<E> SortedRun<E> {
    /// A run with room for `n` entries.
    pub(super) fn with_capacity(n: usize) -> Self {
        Self {
            entries: Vec::with_capacity(n),
        }
    }

    /// Adds `entry` for `key`, which is greater than every key before it.
    pub(super) fn push(&mut self, key: &[u8], entry: E) {
        debug_assert!(self
            .entries
            .last()
            .is_none_or(|(last, _)| *last.bytes < *key));
        self.entries.push((HeldKey::new(key.into()), entry));
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The keys, in order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.entries.iter().map(|(key, _)| &key.bytes[..])
    }
}

/// Held writes by key, in key order.
pub(super) struct Overlay<E> {
    map: BTreeMap<HeldKey, E>,
}

impl<E> Default for Overlay<E> {
    fn default() -> Self {
        Self {
            map: BTreeMap::new(),
        }
    }
}

impl<E> Overlay<E> {
    /// An empty map.
    pub(super) fn new() -> Self {
        Self::default()
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub(super) fn get(&self, key: &[u8]) -> Option<&E> {
        self.map.get(&Probe::new(key) as &dyn OrderedKey)
    }

    pub(super) fn get_mut(&mut self, key: &[u8]) -> Option<&mut E> {
        self.map.get_mut(&Probe::new(key) as &dyn OrderedKey)
    }

    /// Holds `entry` for `key`, returning the entry it replaced.
    pub(super) fn insert(&mut self, key: Box<[u8]>, entry: E) -> Option<E> {
        self.map.insert(HeldKey::new(key), entry)
    }

    /// The entry of `key` or its place, with one search: the key is given as owned bytes,
    /// kept only when an entry is put in its place.
    pub(super) fn slot(&mut self, key: Box<[u8]>) -> Slot<'_, E> {
        match self.map.entry(HeldKey::new(key)) {
            btree_map::Entry::Occupied(held) => Slot::Held(held.into_mut()),
            btree_map::Entry::Vacant(place) => Slot::Vacant(VacantSlot(place)),
        }
    }

    pub(super) fn remove(&mut self, key: &[u8]) -> Option<E> {
        self.map.remove(&Probe::new(key) as &dyn OrderedKey)
    }

    pub(super) fn clear(&mut self) {
        self.map.clear()
    }

    /// Every key, in key order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.map.keys().map(|key| &key.bytes[..])
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&[u8], &mut E)> + '_ {
        self.map
            .iter_mut()
            .map(|(key, entry)| (&key.bytes[..], entry))
    }

    /// Every entry in key order, with its key's head ([`key_head`]), which the map holds
    /// beside the key: a walk comparing heads reads a key's bytes only where heads tie.
    pub(super) fn iter_mut_headed(&mut self) -> impl Iterator<Item = (u128, &[u8], &mut E)> + '_ {
        self.map
            .iter_mut()
            .map(|(key, entry)| (key.head, &key.bytes[..], entry))
    }

    /// The entries with keys within the bounds, in key order.
    pub(super) fn range<'a>(
        &'a self,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
    ) -> impl Iterator<Item = (&'a [u8], &'a E)> + use<'a, E> {
        let (from, to) = (from.map(Probe::new), to.map(Probe::new));
        self.map
            .range::<dyn OrderedKey, _>((as_ordered(&from), as_ordered(&to)))
            .map(|(key, entry)| (&key.bytes[..], entry))
    }

    /// Keeps the entries `keep` says to.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&[u8], &mut E) -> bool) {
        self.map.retain(|key, entry| keep(&key.bytes, entry))
    }

    /// Adds the entries of `run`, each with a search.
    pub(super) fn insert_run(&mut self, run: SortedRun<E>) {
        self.map.extend(run.entries)
    }

    /// Adds the entries of `run`, none of them held, in one pass over both (building the map
    /// anew); the run's vector becomes the map's input as it is, not copied into another.
    pub(super) fn merge_run(&mut self, run: SortedRun<E>) {
        let mut run = BTreeMap::from_iter(run.entries);
        self.map.append(&mut run)
    }

    /// Every entry, taken out in key order.
    pub(super) fn into_entries(self) -> impl Iterator<Item = (Box<[u8]>, E)> {
        self.map.into_iter().map(|(key, entry)| (key.bytes, entry))
    }
}

/// Scans the held entries `held_range` gives within the bounds (each giving its value
/// through `value_of`, `None` hiding the key) merged over the entries `scan_below` visits: a
/// held key shadows the same key below.
pub(super) fn merged_scan<'h, E: 'h, I: Iterator<Item = (&'h [u8], &'h E)>>(
    held_range: impl FnOnce(Bound<&[u8]>, Bound<&[u8]>) -> I,
    value_of: impl Fn(&E) -> Option<&[u8]>,
    from: Bound<&[u8]>,
    to: Bound<&[u8]>,
    scan_below: impl FnOnce(Bound<&[u8]>, Bound<&[u8]>, &mut Visit<'_>),
    visit: &mut Visit<'_>,
) {
    if !bounds_hold_keys(from, to) {
        return;
    }
    let mut held = held_range(from, to).peekable();
    let mut stopped = false;
    scan_below(from, to, &mut |key, value| {
        while let Some((held_key, entry)) = held.peek() {
            let order = held_key[..].cmp(key);
            if order.is_gt() {
                break;
            }
            let (held_key, entry) = (*held_key, *entry);
            held.next();
            if let Some(v) = value_of(entry) {
                if !visit(held_key, v) {
                    stopped = true;
                    return false;
                }
            }
            if order.is_eq() {
                // The held write shadows the entry below.
                return true;
            }
        }
        if !visit(key, value) {
            stopped = true;
            return false;
        }
        true
    });
    if stopped {
        return;
    }
    for (key, entry) in held {
        if let Some(v) = value_of(entry) {
            if !visit(key, v) {
                return;
            }
        }
    }
}

/// How many entries a merged scan of everything visits.
pub(super) fn merged_len<'h, E: 'h, I: Iterator<Item = (&'h [u8], &'h E)>>(
    held_range: impl FnOnce(Bound<&[u8]>, Bound<&[u8]>) -> I,
    value_of: impl Fn(&E) -> Option<&[u8]>,
    scan_below: impl FnOnce(Bound<&[u8]>, Bound<&[u8]>, &mut Visit<'_>),
) -> usize {
    let mut n = 0;
    merged_scan(
        held_range,
        value_of,
        Bound::Unbounded,
        Bound::Unbounded,
        scan_below,
        &mut |_, _| {
            n += 1;
            true
        },
    );
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Keys from a few byte values, zero among them: short ones, many of them prefixes of
    /// others, and ones of 14 to 20 bytes after a shared prefix, many sharing their first
    /// sixteen bytes.
    fn key() -> impl Strategy<Value = Vec<u8>> {
        let byte = || prop_oneof![Just(0u8), Just(1), Just(b'k'), Just(255)];
        prop_oneof![
            proptest::collection::vec(byte(), 0..12),
            proptest::collection::vec(byte(), 0..6)
                .prop_map(|tail| [vec![b'k'; 14], tail].concat()),
        ]
    }

    fn bound(bound: (u8, Vec<u8>)) -> Bound<Vec<u8>> {
        match bound.0 % 3 {
            0 => Bound::Included(bound.1),
            1 => Bound::Excluded(bound.1),
            _ => Bound::Unbounded,
        }
    }

    proptest! {
        /// The map finds, orders and ranges keys as a map of their bytes does.
        #[test]
        fn the_map_orders_keys_as_their_bytes(
            keys in proptest::collection::vec(key(), 0..40),
            lookups in proptest::collection::vec(key(), 0..10),
            from in (any::<u8>(), key()),
            to in (any::<u8>(), key()),
        ) {
            let mut overlay = Overlay::new();
            let mut model = BTreeMap::new();
            for (i, key) in keys.iter().enumerate() {
                prop_assert_eq!(overlay.insert(key.clone().into(), i), model.insert(key.clone(), i));
            }
            prop_assert_eq!(overlay.len(), model.len());
            for key in lookups.iter().chain(&keys) {
                prop_assert_eq!(overlay.get(key), model.get(key));
            }
            let (from, to) = (bound(from), bound(to));
            if bounds_hold_keys(from.as_ref().map(|b| &b[..]), to.as_ref().map(|b| &b[..])) {
                let ranged: Vec<(&[u8], &usize)> = overlay
                    .range(from.as_ref().map(|b| &b[..]), to.as_ref().map(|b| &b[..]))
                    .collect();
                let expected: Vec<(&[u8], &usize)> = model
                    .range::<[u8], _>((from.as_ref().map(|b| &b[..]), to.as_ref().map(|b| &b[..])))
                    .map(|(k, v)| (&k[..], v))
                    .collect();
                prop_assert_eq!(ranged, expected);
            }
            let taken: Vec<(Box<[u8]>, usize)> = overlay.into_entries().collect();
            let expected: Vec<(Box<[u8]>, usize)> =
                model.into_iter().map(|(k, v)| (k.into(), v)).collect();
            prop_assert_eq!(taken, expected);
        }
    }
}
