//! A partition's transactions as its log shows them: the ones still open (which hold the last
//! stable offset back), the ones whose marker is written but not yet durable, and the index of
//! aborted transactions that `read_committed` fetches carry so clients can drop their records.
//!
//! The aborted index is kept in memory and saved per segment as `<base>.txnindex` (the
//! transactions whose ABORT marker lies in that segment, with a CRC-32C) when the segment
//! closes and at a clean shutdown; at start the files are loaded and the batches after the
//! newest producer snapshot are read again for markers the files do not hold yet.

use std::collections::BTreeMap;
use std::ops::Range;

use eddy_core::log::Offset;

use super::producers::TxnChange;

/// An aborted transaction of one producer in this partition: its records lie between
/// `first_offset` and `last_offset` (the ABORT marker's offset), both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AbortedTransaction {
    /// The producer that aborted it.
    pub producer_id: i64,
    /// The offset of its first record here.
    pub first_offset: Offset,
    /// The offset of its ABORT marker.
    pub last_offset: Offset,
}

/// The open, closing and aborted transactions of one partition.
#[derive(Debug, Default)]
pub(crate) struct Transactions {
    /// Open transactions by first offset.
    open: BTreeMap<Offset, i64>,
    /// Closed transactions by marker offset, with their first offset, until the marker is
    /// durable.
    closing: BTreeMap<Offset, Offset>,
    /// Aborted transactions by marker offset.
    aborted: BTreeMap<Offset, AbortedTransaction>,
}

const INDEX_VERSION: i32 = 1;
const ENTRY_LEN: usize = 24;

impl Transactions {
    /// Applies what appending a batch did.
    pub(crate) fn apply(&mut self, change: TxnChange, log_start_offset: Offset) {
        match change {
            TxnChange::None => {}
            TxnChange::Opened {
                producer_id,
                first_offset,
            } => {
                self.open.insert(first_offset, producer_id);
            }
            TxnChange::Closed {
                producer_id,
                first_offset,
                marker_offset,
                aborted,
            } => {
                if let Some(first) = first_offset {
                    self.open.remove(&first);
                    self.closing.insert(marker_offset, first);
                }
                if aborted {
                    // A transaction whose start retention already deleted begins, as far as
                    // this log knows, at its start.
                    let first_offset = first_offset.unwrap_or(marker_offset).max(log_start_offset);
                    self.aborted.insert(
                        marker_offset,
                        AbortedTransaction {
                            producer_id,
                            first_offset,
                            last_offset: marker_offset,
                        },
                    );
                }
            }
        }
    }

    /// The last stable offset given the high watermark: no offset at or past it belongs to a
    /// transaction that is open or whose marker is not yet durable.
    pub(crate) fn last_stable_offset(&mut self, high_watermark: Offset) -> Offset {
        // Markers below the high watermark are durable: their transactions are settled.
        while let Some(entry) = self.closing.first_entry() {
            if *entry.key() >= high_watermark {
                break;
            }
            entry.remove();
        }
        let open = self.open.keys().next().copied();
        let closing = self.closing.values().min().copied();
        [Some(high_watermark), open, closing]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(high_watermark)
    }

    /// The aborted transactions with records in `range`, oldest marker first.
    pub(crate) fn aborted_in(&self, range: Range<Offset>) -> Vec<AbortedTransaction> {
        self.aborted
            .range(range.start..)
            .map(|(_, a)| *a)
            .filter(|a| a.first_offset < range.end)
            .collect()
    }

    /// Every aborted transaction, for compaction.
    pub(crate) fn all_aborted(&self) -> Vec<AbortedTransaction> {
        self.aborted.values().copied().collect()
    }

    /// Forgets aborted transactions whose markers retention deleted.
    pub(crate) fn remove_before(&mut self, log_start_offset: Offset) {
        self.aborted = self.aborted.split_off(&log_start_offset);
    }

    /// Adds aborted transactions loaded from an index file.
    pub(crate) fn load_aborted(&mut self, entries: Vec<AbortedTransaction>) {
        for a in entries {
            self.aborted.insert(a.last_offset, a);
        }
    }

    /// Starts tracking a transaction found open in a producer snapshot.
    pub(crate) fn load_open(&mut self, producer_id: i64, first_offset: Offset) {
        self.open.insert(first_offset, producer_id);
    }

    /// The index file of the segment holding `offsets`: its aborted transactions.
    pub(crate) fn encode_index(&self, offsets: Range<Offset>) -> Vec<u8> {
        let entries: Vec<_> = self.aborted.range(offsets).map(|(_, a)| *a).collect();
        let mut out = Vec::with_capacity(12 + entries.len() * ENTRY_LEN);
        out.extend_from_slice(&INDEX_VERSION.to_be_bytes());
        out.extend_from_slice(&(entries.len() as i32).to_be_bytes());
        for a in entries {
            out.extend_from_slice(&a.producer_id.to_be_bytes());
            out.extend_from_slice(&a.first_offset.to_be_bytes());
            out.extend_from_slice(&a.last_offset.to_be_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// The entries of an index file; `None` if it is damaged.
    pub(crate) fn decode_index(bytes: &[u8]) -> Option<Vec<AbortedTransaction>> {
        let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
            return None;
        }
        let (head, rest) = body.split_at_checked(8)?;
        if i32::from_be_bytes(head[..4].try_into().ok()?) != INDEX_VERSION {
            return None;
        }
        let count = i32::from_be_bytes(head[4..].try_into().ok()?);
        if count < 0 || rest.len() != count as usize * ENTRY_LEN {
            return None;
        }
        let field = |chunk: &[u8], i: usize| {
            i64::from_be_bytes(chunk[i * 8..i * 8 + 8].try_into().unwrap())
        };
        Some(
            rest.chunks_exact(ENTRY_LEN)
                .map(|c| AbortedTransaction {
                    producer_id: field(c, 0),
                    first_offset: field(c, 1),
                    last_offset: field(c, 2),
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(producer_id: i64, first: Offset, marker: Offset, aborted: bool) -> TxnChange {
        TxnChange::Closed {
            producer_id,
            first_offset: Some(first),
            marker_offset: marker,
            aborted,
        }
    }

    #[test]
    fn the_last_stable_offset_waits_for_open_transactions_and_durable_markers() {
        let mut txns = Transactions::default();
        assert_eq!(txns.last_stable_offset(10), 10);
        txns.apply(
            TxnChange::Opened {
                producer_id: 1,
                first_offset: 4,
            },
            0,
        );
        txns.apply(
            TxnChange::Opened {
                producer_id: 2,
                first_offset: 6,
            },
            0,
        );
        assert_eq!(txns.last_stable_offset(10), 4);
        txns.apply(closed(1, 4, 11, false), 0);
        // The marker at 11 is not durable yet (high watermark 10).
        assert_eq!(txns.last_stable_offset(10), 4);
        assert_eq!(txns.last_stable_offset(12), 6);
        txns.apply(closed(2, 6, 12, true), 0);
        assert_eq!(txns.last_stable_offset(12), 6);
        assert_eq!(txns.last_stable_offset(13), 13);
        assert_eq!(
            txns.aborted_in(0..13),
            vec![AbortedTransaction {
                producer_id: 2,
                first_offset: 6,
                last_offset: 12
            }]
        );
        assert!(txns.aborted_in(13..20).is_empty());
        assert!(
            txns.aborted_in(0..6).is_empty(),
            "the transaction starts at 6"
        );
    }

    #[test]
    fn index_files_round_trip_and_damage_is_detected() {
        let mut txns = Transactions::default();
        txns.apply(closed(3, 100, 150, true), 0);
        txns.apply(closed(4, 120, 220, true), 0);
        txns.apply(closed(5, 130, 160, false), 0);
        let bytes = txns.encode_index(100..200);
        let entries = Transactions::decode_index(&bytes).unwrap();
        assert_eq!(
            entries,
            vec![AbortedTransaction {
                producer_id: 3,
                first_offset: 100,
                last_offset: 150
            }]
        );
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 1;
            assert!(
                Transactions::decode_index(&damaged).is_none(),
                "damage at {i} went unseen"
            );
        }
        txns.remove_before(200);
        assert_eq!(txns.all_aborted().len(), 1);
    }
}
