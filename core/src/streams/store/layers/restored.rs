//! [`RestoreBatch`]: writes read back from a changelog, held by a store's bottom layer so that
//! they reach the inner store many at a time, in one batch (one sled batch, with the
//! changelog offset they reach when the store commits) instead of one write each.
//! Restoration applies the records of a poll and commits; until then reads do not see them.

use super::super::changelog::ChangelogBuffer;
use super::super::inner::{BatchWrite, BytesStore};

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
        if !self.is_empty() {
            self.apply_followed_by(inner, &mut std::iter::empty(), changelog_offset);
        }
    }

    /// Applies what is held and then `newer` to `inner`, all in one batch with
    /// `changelog_offset` if given.
    pub(crate) fn apply_followed_by(
        &mut self,
        inner: &mut dyn BytesStore,
        newer: &mut dyn Iterator<Item = BatchWrite<'_>>,
        changelog_offset: Option<i64>,
    ) {
        {
            let batch = self.writes.batch();
            // The map shortens `newer`'s items to the batch's lifetime, so the two chain.
            #[allow(clippy::map_identity)]
            let mut all = batch.iter().chain(newer.map(|(k, v)| (k, v)));
            inner.write_batch(&mut all, changelog_offset);
        }
        self.writes.clear();
    }
}
