//! The keys and values of in-memory stores: short ones (most are) are held inline, so that
//! writing one allocates nothing and comparing keys follows no pointer; longer ones are boxed.
//! Keys take 32 bytes (inline up to 30: a window's entry key of an 8-byte key fits), values
//! 24 (inline up to 22: a count with its timestamp fits), so that a hash table of small keys
//! and values stays small enough for the processor's caches. Ordered and hashed as their
//! bytes.

use std::borrow::Borrow;
use std::cmp::Ordering;

use bytes::Bytes;

/// The keys of an in-memory store.
pub(crate) type SmallKey = SmallBytes<30>;
/// The values of an in-memory store.
pub(crate) type SmallValue = SmallBytes<22>;

/// Bytes of an in-memory store, held inline up to `N` (at most 255) of them.
#[derive(Clone)]
pub(crate) enum SmallBytes<const N: usize> {
    Inline { len: u8, bytes: [u8; N] },
    Boxed(Box<[u8]>),
}

impl<const N: usize> SmallBytes<N> {
    /// How many bytes are held inline.
    const INLINE: usize = {
        assert!(N <= u8::MAX as usize);
        N
    };

    /// `bytes`, copied: inline when short.
    #[inline]
    pub(crate) fn copy(bytes: &[u8]) -> Self {
        if bytes.len() <= Self::INLINE {
            let mut inline = [0u8; N];
            inline[..bytes.len()].copy_from_slice(bytes);
            Self::Inline {
                // At most N, which fits in a byte.
                len: u8::try_from(bytes.len()).unwrap_or(u8::MAX),
                bytes: inline,
            }
        } else {
            Self::Boxed(bytes.into())
        }
    }

    /// Replaces the bytes with `bytes`, in place when both are boxed and of one length (a
    /// state rewritten with a value of the same size allocates nothing).
    #[inline]
    pub(crate) fn assign(&mut self, bytes: &[u8]) {
        match self {
            Self::Boxed(old) if old.len() == bytes.len() => old.copy_from_slice(bytes),
            _ => *self = Self::copy(bytes),
        }
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Self::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Self::Boxed(b) => b,
        }
    }

    /// `bytes` held inline, if they are short enough: what lookups compare with, as two
    /// inline values compare without a call to `memcmp`.
    #[inline]
    pub(crate) fn inline(bytes: &[u8]) -> Option<Self> {
        (bytes.len() <= Self::INLINE).then(|| Self::copy(bytes))
    }
}

impl<const N: usize> std::fmt::Debug for SmallBytes<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", Bytes::copy_from_slice(self.as_slice()))
    }
}

impl<const N: usize> Borrow<[u8]> for SmallBytes<N> {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl<const N: usize> std::hash::Hash for SmallBytes<N> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // As `[u8]` hashes, so that lookups by slice find what was inserted.
        self.as_slice().hash(state);
    }
}

impl<const N: usize> PartialEq for SmallBytes<N> {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            // Unused inline bytes are zero in both, so whole arrays compare as the keys do.
            (Self::Inline { len: a, bytes: x }, Self::Inline { len: b, bytes: y }) => {
                a == b && x == y
            }
            _ => self.as_slice() == other.as_slice(),
        }
    }
}

impl<const N: usize> Eq for SmallBytes<N> {}

impl<const N: usize> PartialOrd for SmallBytes<N> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<const N: usize> Ord for SmallBytes<N> {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            // Zero-padded arrays compared as big-endian words, then lengths, order as the
            // bytes do: where the arrays first differ past the shorter key, the longer one
            // has a byte above the other's padding; where they do not, the shorter is a
            // prefix of the longer.
            (Self::Inline { len: a, bytes: x }, Self::Inline { len: b, bytes: y }) => {
                cmp_words(x, y).then(a.cmp(b))
            }
            _ => self.as_slice().cmp(other.as_slice()),
        }
    }
}

/// Two inline arrays compared as big-endian words, which compare as the bytes do.
#[inline]
fn cmp_words<const N: usize>(x: &[u8; N], y: &[u8; N]) -> Ordering {
    let word = |bytes: &[u8; N], from: usize| {
        let to = (from + 8).min(N);
        let mut w = [0u8; 8];
        w[..to - from].copy_from_slice(&bytes[from..to]);
        u64::from_be_bytes(w)
    };
    let mut from = 0;
    while from < N {
        let order = word(x, from).cmp(&word(y, from));
        if order.is_ne() {
            return order;
        }
        from += 8;
    }
    Ordering::Equal
}

/// A fast hasher for store keys, seeded at random per store (as `foldhash` and hashbrown's
/// default do): cheap for short keys, and not predictable from outside the process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SeededHashing(u64);

impl Default for SeededHashing {
    fn default() -> Self {
        use std::hash::BuildHasher;
        Self(std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64) | 1)
    }
}

impl std::hash::BuildHasher for SeededHashing {
    type Hasher = SeededHasher;

    fn build_hasher(&self) -> SeededHasher {
        SeededHasher(self.0)
    }
}

/// The hasher [`SeededHashing`] builds: multiply-and-fold over 8-byte words.
pub(crate) struct SeededHasher(u64);

impl SeededHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        let m = u128::from(self.0 ^ word) * 0x9E37_79B9_7F4A_7C15_u128;
        self.0 = (m as u64) ^ ((m >> 64) as u64);
    }
}

impl std::hash::Hasher for SeededHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.mix(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(last));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }

    #[inline]
    fn write_i64(&mut self, n: i64) {
        self.mix(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INLINE: usize = 30;

    #[test]
    fn small_bytes_take_32_and_24_bytes_and_keep_their_bytes_either_way() {
        assert_eq!(std::mem::size_of::<SmallKey>(), 32);
        assert_eq!(std::mem::size_of::<SmallValue>(), 24);
        assert_eq!(SmallValue::copy(&[1; 23]).as_slice(), [1; 23]);
        for len in [0, 1, 8, INLINE, INLINE + 1, 100] {
            let bytes: Vec<u8> = (0..len as u8).collect();
            let small = SmallKey::copy(&bytes);
            assert_eq!(small.as_slice(), &bytes[..]);
            assert_eq!(small.as_slice(), &bytes[..]);
            assert_eq!(small, SmallKey::copy(&bytes));
        }
        assert!(SmallKey::copy(b"aa") < SmallKey::copy(&[b'a'; 40]));
        assert!(SmallKey::copy(b"ab") > SmallKey::copy(&[b'a'; 40]));
        assert!(SmallKey::copy(&[b'b'; 40]) > SmallKey::copy(b"b"));
    }

    #[test]
    fn small_bytes_order_as_their_bytes() {
        // Every pair of short strings over a small alphabet (zeros included, so that padding
        // is tested), and some longer than the inline size.
        let mut samples: Vec<Vec<u8>> = vec![Vec::new()];
        for len in 1..=3 {
            let mut next = Vec::new();
            for s in samples.iter().filter(|s| s.len() == len - 1) {
                for b in [0u8, 1, 0xff] {
                    let mut t = s.clone();
                    t.push(b);
                    next.push(t);
                }
            }
            samples.extend(next);
        }
        for base in [
            vec![7u8; INLINE - 1],
            vec![7u8; INLINE],
            vec![7u8; INLINE + 2],
        ] {
            for tail in [Vec::new(), vec![0], vec![0, 0], vec![9]] {
                samples.push([base.clone(), tail].concat());
            }
        }
        for a in &samples {
            for b in &samples {
                let (x, y) = (SmallKey::copy(a), SmallKey::copy(b));
                assert_eq!(x.cmp(&y), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(x == y, a == b);
            }
        }
    }
}
