//! [`ChangeLogging`]: the layer that records every write of a store for its changelog topic,
//! with the key in the layout Kafka's changelog of that kind of store carries.

use std::ops::Bound;

use super::{Checkpoint, StoreLayer};
use crate::streams::store::changelog::{ChangelogBatch, ChangelogBuffer};
use crate::streams::store::inner::Visit;
use crate::streams::store::UpdateBytes;

/// How a kind of store's inner keys become its changelog's keys: each kind gives its own
/// (see [`KindRules`](crate::streams::internals::KindRules)), so this layer knows none of
/// them.
#[derive(Clone, Copy)]
pub struct ChangelogKeys(LogWrite);

/// Records in the buffer the write of a value to an inner key, under its changelog key; what
/// is not a record of the store (a window store's time, say) is not logged.
type LogWrite = fn(&[u8], Option<&[u8]>, &mut ChangelogBuffer);

impl std::fmt::Debug for ChangelogKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChangelogKeys")
    }
}

impl ChangelogKeys {
    /// A key-value store's: the inner key is the changelog key.
    pub const SAME: ChangelogKeys = ChangelogKeys(|key, value, log| log.push(&[key], value));

    /// The keys `log_write` writes.
    pub(crate) const fn new(log_write: LogWrite) -> Self {
        Self(log_write)
    }

    #[inline]
    fn record(self, log: &mut ChangelogBuffer, key: &[u8], value: Option<&[u8]>) {
        (self.0)(key, value, log)
    }
}

/// Records each write passing through for the changelog topic.
pub struct ChangeLogging {
    below: Box<dyn StoreLayer>,
    keys: ChangelogKeys,
    log: ChangelogBuffer,
}

impl ChangeLogging {
    /// Logs the writes to `below`, their keys in the layout `keys` gives.
    pub fn new(below: Box<dyn StoreLayer>, keys: ChangelogKeys) -> Self {
        Self {
            below,
            keys,
            log: ChangelogBuffer::default(),
        }
    }
}

impl StoreLayer for ChangeLogging {
    #[inline]
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
        self.below.get_into(key, out)
    }

    fn scan(&self, from: Bound<&[u8]>, to: Bound<&[u8]>, visit: &mut Visit<'_>) {
        self.below.scan(from, to, visit)
    }

    fn len(&self) -> usize {
        self.below.len()
    }

    fn put(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.keys.record(&mut self.log, key, value);
        self.below.put(key, value);
    }

    fn put_run(&mut self, run: &[(&[u8], Option<&[u8]>)]) {
        for &(key, value) in run {
            self.keys.record(&mut self.log, key, value);
        }
        self.below.put_run(run);
    }

    fn update(&mut self, key: &[u8], update: &mut UpdateBytes<'_>) {
        let Self { below, keys, log } = self;
        below.update(key, &mut |old, out| {
            let had = old.is_some();
            let present = update(old, out);
            if present || had {
                keys.record(log, key, present.then_some(&out[..]));
            }
            present
        });
    }

    fn put_unlogged(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.below.put_unlogged(key, value)
    }

    fn restore(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.below.restore(key, value)
    }

    fn settle_restored(&mut self) {
        self.below.settle_restored()
    }

    fn changelog(&self) -> ChangelogBatch<'_> {
        self.log.batch()
    }

    fn clear_changelog(&mut self) {
        self.log.clear();
    }

    fn flush(&mut self) {
        self.below.flush()
    }

    fn commit(&mut self, changelog_offset: Option<i64>) {
        self.below.commit(changelog_offset)
    }

    fn seal(&mut self) {
        self.below.seal()
    }

    fn checkpoint(&mut self, when: Checkpoint) {
        self.below.checkpoint(when)
    }

    fn held_bytes(&self) -> usize {
        self.below.held_bytes()
    }

    fn abort(&mut self) {
        self.log.clear();
        self.below.abort()
    }

    fn changelog_offset(&self) -> Option<i64> {
        self.below.changelog_offset()
    }

    fn failure(&self) -> Option<String> {
        self.below.failure()
    }
}
