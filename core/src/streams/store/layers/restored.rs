//! [`RestoreBatch`]: writes read back from a changelog, held by the bottom layer of a store
//! without a write buffer (a write buffer holds them as committed writes) so that they reach
//! the inner store many at a time, in one batch (one sled batch, with the
//! changelog offset they reach when the store commits) instead of one write each.
//! Restoration applies the records of a poll and commits; until then reads do not see them.

use super::super::changelog::ChangelogBuffer;
use super::super::inner::BytesStore;

/// The most restored writes held before they are applied without waiting for a commit.
const MOST_HELD: usize = 4096;

/// Restored writes waiting for their batch.
#[derive(Debug, Default)]
pub(crate) struct RestoreBatch {
    writes: ChangelogBuffer,
}

impl RestoreBatch {
    /// Whether nothing is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.writes.batch().is_empty()
    }

    /// Holds a restored write, applying what is held once there is enough of it.
    pub(crate) fn push(&mut self, inner: &mut dyn BytesStore, key: &[u8], value: Option<&[u8]>) {
        self.writes.push(&[key], value);
        if self.writes.batch().len() >= MOST_HELD {
            self.apply(inner, None);
        }
    }

    /// Applies what is held to `inner` in one batch, with `changelog_offset` if given.
    pub(crate) fn apply(&mut self, inner: &mut dyn BytesStore, changelog_offset: Option<i64>) {
        if self.is_empty() {
            return;
        }
        inner.write_batch(&mut self.writes.batch().iter(), changelog_offset);
        self.writes.clear();
    }
}
