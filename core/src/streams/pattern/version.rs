//! Dewey version numbers of partial matches (Flink CEP's `DeweyNumber`): a run's number,
//! then one more digit at each stage a branch was taken, so that the edges of the shared
//! buffer a partial match may follow back are those of versions compatible with its own.

use serde::{Deserialize, Serialize};

/// A Dewey number: never empty.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct Version(Vec<u32>);

impl Version {
    /// The version `start`.
    pub(crate) fn new(start: u32) -> Self {
        Version(vec![start])
    }

    /// Whether a partial match at `self` may follow an edge recorded at `other`: `other` is
    /// a prefix of `self`, or both have the same length, the same digits but the last, and
    /// `self`'s last digit is at least `other`'s.
    pub(crate) fn is_compatible_with(&self, other: &Version) -> bool {
        let (a, b) = (&self.0, &other.0);
        if a.len() > b.len() {
            a[..b.len()] == b[..]
        } else if a.len() == b.len() {
            let last = a.len() - 1;
            a[..last] == b[..last] && a[last] >= b[last]
        } else {
            false
        }
    }

    /// This version with its last digit increased by `times`.
    pub(crate) fn increase(&self, times: u32) -> Version {
        let mut digits = self.0.clone();
        if let Some(last) = digits.last_mut() {
            *last = last.wrapping_add(times);
        }
        Version(digits)
    }

    /// This version with a new stage (a digit 0) added.
    pub(crate) fn add_stage(&self) -> Version {
        let mut digits = Vec::with_capacity(self.0.len() + 1);
        digits.extend_from_slice(&self.0);
        digits.push(0);
        Version(digits)
    }
}

#[cfg(test)]
mod tests {
    use super::Version;

    fn v(d: &[u32]) -> Version {
        Version(d.to_vec())
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
}
