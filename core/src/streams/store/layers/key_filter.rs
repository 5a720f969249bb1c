//! [`KeyFilter`]: a Bloom filter of the keys a layer holds, which says for certain that a key
//! is not among them. A store far larger than what its write buffer holds reads mostly keys
//! the buffer does not hold; the filter spares each such read the searches of the buffer's
//! maps, which miss memory at every level of a large map. One word of the filter a key (a
//! blocked filter), so a lookup touches one cache line.

use std::hash::Hasher;

/// How many keys a word of the filter takes before the filter grows: sixteen bits a key,
/// three of them set, wrongly answering "maybe" for about one key in a hundred.
const KEYS_PER_WORD: usize = 4;

/// The fewest words a filter has.
const MIN_WORDS: usize = 64;

/// A key's hash, computed once for every filter it is looked up in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct KeyHash(u64);

impl KeyHash {
    /// The hash of `key`.
    pub(super) fn of(key: &[u8]) -> Self {
        let mut hasher = fxhash::FxHasher64::default();
        hasher.write(key);
        // FxHash leaves its low bits weak: mixed (murmur3's finalizer) so that every bit the
        // filter takes counts.
        let mut h = hasher.finish();
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^= h >> 33;
        Self(h)
    }

    /// The word of a filter of `2^bits` words the key is in, and the key's bits in it.
    fn place(self, bits: u32) -> (usize, u64) {
        let h = self.0;
        let word = if bits == 0 { 0 } else { h >> (64 - bits) };
        let mask = (1 << (h & 63)) | (1 << ((h >> 6) & 63)) | (1 << ((h >> 12) & 63));
        // The word index has at most `bits` (< 64) bits, so it fits the filter's length.
        (usize::try_from(word).unwrap_or(0), mask)
    }
}

/// The keys a layer holds, as a Bloom filter: no key added is ever reported absent.
#[derive(Debug, Clone)]
pub(super) struct KeyFilter {
    /// A power of two of words.
    words: Vec<u64>,
    /// `words.len()` as a power of two.
    bits: u32,
    /// How many keys were added.
    keys: usize,
}

impl Default for KeyFilter {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl KeyFilter {
    /// An empty filter with room for `keys` keys and up to as many more: a power of two of
    /// words, two to four keys a word.
    fn with_capacity(keys: usize) -> Self {
        let words = keys
            .div_ceil(KEYS_PER_WORD)
            .max(MIN_WORDS)
            .checked_next_power_of_two()
            .unwrap_or(1 << (usize::BITS - 1));
        Self {
            words: vec![0; words],
            bits: words.trailing_zeros(),
            keys: 0,
        }
    }

    /// A filter of `keys`, with room for `room` keys (at least as many as `keys` has).
    pub(super) fn of<'a>(room: usize, keys: impl Iterator<Item = &'a [u8]>) -> Self {
        let mut filter = Self::with_capacity(room);
        for key in keys {
            filter.add(KeyHash::of(key));
        }
        filter
    }

    /// Whether the key of `hash` may have been added: `false` only if it was not.
    pub(super) fn may_hold(&self, hash: KeyHash) -> bool {
        let (word, mask) = hash.place(self.bits);
        self.words[word] & mask == mask
    }

    /// Adds the key of `hash`.
    pub(super) fn add(&mut self, hash: KeyHash) {
        let (word, mask) = hash.place(self.bits);
        self.words[word] |= mask;
        self.keys += 1;
    }

    /// How many keys were added.
    pub(super) fn len(&self) -> usize {
        self.keys
    }

    /// Whether the filter took so many keys that it answers "maybe" too often: then it is
    /// built again, larger, from the keys held.
    pub(super) fn is_full(&self) -> bool {
        self.keys > self.words.len() * KEYS_PER_WORD
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A key added is always found, however the filter grew.
        #[test]
        fn no_key_added_is_reported_absent(
            keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 0..600),
        ) {
            let mut filter = KeyFilter::default();
            for (i, key) in keys.iter().enumerate() {
                filter.add(KeyHash::of(key));
                if filter.is_full() {
                    filter = KeyFilter::of(i + 1, keys[..=i].iter().map(|k| &k[..]));
                }
            }
            for key in &keys {
                prop_assert!(filter.may_hold(KeyHash::of(key)));
            }
        }
    }

    #[test]
    fn most_keys_not_added_are_reported_absent() {
        let key = |i: usize| format!("key-{i}").into_bytes();
        let mut filter = KeyFilter::default();
        for i in 0..100_000 {
            filter.add(KeyHash::of(&key(i)));
            if filter.is_full() {
                filter = KeyFilter::of(
                    i + 1,
                    (0..=i).map(key).collect::<Vec<_>>().iter().map(|k| &k[..]),
                );
            }
        }
        let wrong = (100_000..200_000)
            .filter(|&i| filter.may_hold(KeyHash::of(&key(i))))
            .count();
        // Sixteen to thirty-two bits a key, three of them set: wrong for about one key in a
        // hundred at the fullest.
        assert!(
            wrong < 2_000,
            "{wrong} of 100,000 keys not added were reported maybe held"
        );
        // Four keys a word at the most, two at the least: two to four bytes a key.
        assert!(
            filter.words.len() <= 100_000 / 2,
            "{} words",
            filter.words.len()
        );
    }
}
