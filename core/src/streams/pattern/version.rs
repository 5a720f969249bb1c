//! Dewey version numbers of partial matches (Flink CEP's `DeweyNumber`): a run's number,
//! then one more digit at each stage a branch was taken, so that the edges of the shared
//! buffer a partial match may follow back are those of versions compatible with its own.
//! Versions are short (a digit per event taken), so up to five digits are kept inline — a
//! version is then 24 bytes, and a partial match of up to four events is copied at every
//! event without allocating.

use serde::de::Deserializer;
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

/// Digits kept inline.
const INLINE: usize = 5;

/// A Dewey number: never empty.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) enum Version {
    Inline { len: u8, digits: [u32; INLINE] },
    Heap(Box<[u32]>),
}

impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let digits: Vec<String> = self.digits().iter().map(u32::to_string).collect();
        f.write_str(&digits.join("."))
    }
}

impl Version {
    /// The version `start`.
    pub(crate) fn new(start: u32) -> Self {
        let mut digits = [0; INLINE];
        digits[0] = start;
        Version::Inline { len: 1, digits }
    }

    fn from_slice(digits: &[u32]) -> Self {
        if digits.len() <= INLINE {
            let mut inline = [0; INLINE];
            inline[..digits.len()].copy_from_slice(digits);
            Version::Inline {
                len: u8::try_from(digits.len()).unwrap_or(u8::MAX),
                digits: inline,
            }
        } else {
            Version::Heap(digits.into())
        }
    }

    /// The digits, first to last.
    pub(crate) fn digits(&self) -> &[u32] {
        match self {
            Version::Inline { len, digits } => &digits[..usize::from(*len)],
            Version::Heap(digits) => digits,
        }
    }

    /// Whether a partial match at `self` may follow an edge recorded at `other`: `other` is
    /// a prefix of `self`, or both have the same length, the same digits but the last, and
    /// `self`'s last digit is at least `other`'s.
    #[inline]
    pub(crate) fn is_compatible_with(&self, other: &Version) -> bool {
        if let (Version::Inline { len: la, digits: a }, Version::Inline { len: lb, digits: b }) =
            (self, other)
        {
            // Digits compared in place, without a call to compare slices.
            let (la, lb) = (usize::from(*la), usize::from(*lb));
            let same = |n: usize| a.iter().zip(b).take(n).all(|(x, y)| x == y);
            return if la > lb {
                same(lb)
            } else if la == lb && la > 0 {
                same(la - 1) && a[la - 1] >= b[la - 1]
            } else {
                false
            };
        }
        let (a, b) = (self.digits(), other.digits());
        if a.len() > b.len() {
            a[..b.len()] == b[..]
        } else if a.len() == b.len() && !a.is_empty() {
            let last = a.len() - 1;
            a[..last] == b[..last] && a[last] >= b[last]
        } else {
            false
        }
    }

    /// This version with its last digit increased by `times`.
    pub(crate) fn increase(&self, times: u32) -> Version {
        let mut next = self.clone();
        let digits = match &mut next {
            Version::Inline { len, digits } => &mut digits[..usize::from(*len)],
            Version::Heap(digits) => &mut digits[..],
        };
        if let Some(last) = digits.last_mut() {
            *last = last.wrapping_add(times);
        }
        next
    }

    /// This version with a new stage (a digit 0) added.
    pub(crate) fn add_stage(&self) -> Version {
        match self {
            Version::Inline { len, digits } if usize::from(*len) < INLINE => Version::Inline {
                len: len + 1,
                digits: *digits,
            },
            _ => {
                let mut digits = self.digits().to_vec();
                digits.push(0);
                Version::Heap(digits.into())
            }
        }
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let digits = self.digits();
        let mut seq = s.serialize_seq(Some(digits.len()))?;
        for d in digits {
            seq.serialize_element(d)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let digits = Vec::<u32>::deserialize(d)?;
        if digits.is_empty() {
            return Err(serde::de::Error::custom("an empty version"));
        }
        Ok(Version::from_slice(&digits))
    }
}

#[cfg(test)]
mod tests {
    use super::Version;

    fn v(d: &[u32]) -> Version {
        Version::from_slice(d)
    }

    #[test]
    fn compatibility_is_a_prefix_or_a_later_sibling() {
        assert!(v(&[1, 0, 2]).is_compatible_with(&v(&[1, 0])));
        assert!(v(&[1, 2]).is_compatible_with(&v(&[1, 1])));
        assert!(!v(&[1, 1]).is_compatible_with(&v(&[1, 2])));
        assert!(!v(&[1]).is_compatible_with(&v(&[1, 0])));
        assert!(!v(&[2, 0]).is_compatible_with(&v(&[1])));
    }

    #[test]
    fn increase_and_add_stage_change_the_last_digit_and_the_length() {
        assert_eq!(v(&[1, 0]).increase(3), v(&[1, 3]));
        assert_eq!(v(&[1, 3]).add_stage(), v(&[1, 3, 0]));
        assert_eq!(Version::new(1), v(&[1]));
    }

    #[test]
    fn long_versions_move_to_the_heap_and_compare_alike() {
        let mut long = Version::new(1);
        for _ in 0..12 {
            long = long.add_stage().increase(1);
        }
        assert!(matches!(long, Version::Heap(_)));
        assert_eq!(long.digits().len(), 13);
        assert!(long.is_compatible_with(&v(&[1, 1, 1])));
        let bytes = bincode::serde::encode_to_vec(&long, bincode::config::standard()).unwrap();
        let (back, _): (Version, usize) =
            bincode::serde::decode_from_slice(&bytes, bincode::config::standard()).unwrap();
        assert_eq!(back, long);
        assert!(
            bincode::serde::decode_from_slice::<Version, _>(&[0], bincode::config::standard())
                .is_err()
        );
    }
}
