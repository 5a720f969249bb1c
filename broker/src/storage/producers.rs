//! Idempotent producers' state in one partition: for each producer id, its epoch and the
//! sequence numbers and offsets of its last five batches. A retried batch is recognised and
//! answered with its original offsets instead of being written twice; a batch that skips
//! sequence numbers, or comes from an older epoch, is refused.
//!
//! A transactional producer also has the first offset of its open transaction in the
//! partition, if one is open: the partition's last stable offset cannot pass it until the
//! transaction's marker (a control batch) is written.
//!
//! The state is saved as a snapshot (`<offset>.snapshot`, the state after every batch below
//! that offset, with a CRC-32C) when a segment closes and at a clean shutdown; at start the
//! newest valid snapshot is loaded and only the batch headers after it are read.

use std::collections::{HashMap, VecDeque};

use eddy_core::log::Offset;
use eddy_core::wire::batch::{BatchHeader, ControlType};

/// Batches remembered per producer, as in Kafka.
const REMEMBERED_BATCHES: usize = 5;

/// One remembered batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchSeen {
    first_sequence: i32,
    last_sequence: i32,
    base_offset: Offset,
    last_offset: Offset,
}

#[derive(Debug, Clone, Default)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchSeen>,
    /// The first offset of the producer's open transaction in this partition.
    open_transaction: Option<Offset>,
}

/// How a batch changed the partition's transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnChange {
    /// None opened or closed.
    None,
    /// The batch opened a transaction of `producer_id` at `first_offset`.
    Opened {
        producer_id: i64,
        first_offset: Offset,
    },
    /// A marker closed the producer's transaction (`first_offset` is `None` if the producer had
    /// no open transaction here).
    Closed {
        producer_id: i64,
        first_offset: Option<Offset>,
        marker_offset: Offset,
        aborted: bool,
    },
}

/// What to do with a producer's batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SequenceCheck {
    /// Write it.
    Append,
    /// It was written before, at these offsets: answer with them, write nothing.
    Duplicate {
        base_offset: Offset,
        last_offset: Offset,
    },
    /// The producer's epoch is older than the partition has seen.
    StaleEpoch { current: i16 },
    /// The sequence does not follow on from the producer's last batch.
    OutOfOrder { expected: i32 },
}

/// The producers of one partition.
#[derive(Debug, Default, Clone)]
pub(crate) struct ProducerStates {
    producers: HashMap<i64, ProducerEntry>,
}

fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX {
        0
    } else {
        sequence + 1
    }
}

/// Version 2 adds each producer's open transaction; version 1 is still read.
const SNAPSHOT_VERSION: i32 = 2;

impl ProducerStates {
    /// The state as snapshot bytes.
    pub(crate) fn encode_snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&(self.producers.len() as i32).to_be_bytes());
        let mut ids: Vec<_> = self.producers.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let entry = &self.producers[&id];
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&entry.epoch.to_be_bytes());
            out.extend_from_slice(&entry.open_transaction.unwrap_or(-1).to_be_bytes());
            out.extend_from_slice(&(entry.batches.len() as i32).to_be_bytes());
            for b in &entry.batches {
                out.extend_from_slice(&b.first_sequence.to_be_bytes());
                out.extend_from_slice(&b.last_sequence.to_be_bytes());
                out.extend_from_slice(&b.base_offset.to_be_bytes());
                out.extend_from_slice(&b.last_offset.to_be_bytes());
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// The state in snapshot bytes; `None` if they are damaged or of another version.
    pub(crate) fn decode_snapshot(bytes: &[u8]) -> Option<Self> {
        let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
            return None;
        }
        let mut r = body;
        let mut take = |n: usize| -> Option<&[u8]> {
            let (head, rest) = r.split_at_checked(n)?;
            r = rest;
            Some(head)
        };
        let version = i32::from_be_bytes(take(4)?.try_into().ok()?);
        if !(1..=SNAPSHOT_VERSION).contains(&version) {
            return None;
        }
        let count = i32::from_be_bytes(take(4)?.try_into().ok()?);
        let mut states = Self::default();
        for _ in 0..count.max(0) {
            let id = i64::from_be_bytes(take(8)?.try_into().ok()?);
            let epoch = i16::from_be_bytes(take(2)?.try_into().ok()?);
            let open_transaction = if version >= 2 {
                Some(i64::from_be_bytes(take(8)?.try_into().ok()?)).filter(|&o| o >= 0)
            } else {
                None
            };
            let batches = i32::from_be_bytes(take(4)?.try_into().ok()?);
            if !(0..=REMEMBERED_BATCHES as i32).contains(&batches) {
                return None;
            }
            let mut entry = ProducerEntry {
                epoch,
                batches: VecDeque::new(),
                open_transaction,
            };
            for _ in 0..batches {
                entry.batches.push_back(BatchSeen {
                    first_sequence: i32::from_be_bytes(take(4)?.try_into().ok()?),
                    last_sequence: i32::from_be_bytes(take(4)?.try_into().ok()?),
                    base_offset: i64::from_be_bytes(take(8)?.try_into().ok()?),
                    last_offset: i64::from_be_bytes(take(8)?.try_into().ok()?),
                });
            }
            states.producers.insert(id, entry);
        }
        Some(states)
    }

    /// Checks a batch of an idempotent producer (producer id ≥ 0, not a control batch).
    pub(crate) fn check(&self, header: &BatchHeader) -> SequenceCheck {
        let Some(entry) = self.producers.get(&header.producer_id) else {
            // A producer new to this partition starts at sequence 0.
            return if header.base_sequence == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrder { expected: 0 }
            };
        };
        if header.producer_epoch < entry.epoch {
            return SequenceCheck::StaleEpoch {
                current: entry.epoch,
            };
        }
        if header.producer_epoch > entry.epoch {
            return if header.base_sequence == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrder { expected: 0 }
            };
        }
        let last_sequence = header.last_sequence();
        if let Some(seen) = entry
            .batches
            .iter()
            .find(|b| b.first_sequence == header.base_sequence && b.last_sequence == last_sequence)
        {
            return SequenceCheck::Duplicate {
                base_offset: seen.base_offset,
                last_offset: seen.last_offset,
            };
        }
        let expected = entry
            .batches
            .back()
            .map_or(0, |b| next_sequence(b.last_sequence));
        if header.base_sequence == expected {
            SequenceCheck::Append
        } else {
            SequenceCheck::OutOfOrder { expected }
        }
    }

    /// Records a batch written at its header's offsets; `marker` is the type of a control
    /// batch's marker.
    pub(crate) fn record(
        &mut self,
        header: &BatchHeader,
        marker: Option<ControlType>,
    ) -> TxnChange {
        if header.producer_id < 0 {
            return TxnChange::None;
        }
        let entry = self.producers.entry(header.producer_id).or_default();
        if header.is_control() {
            if header.producer_epoch > entry.epoch {
                entry.epoch = header.producer_epoch;
                entry.batches.clear();
            }
            let Some(marker) = marker else {
                return TxnChange::None;
            };
            return TxnChange::Closed {
                producer_id: header.producer_id,
                first_offset: entry.open_transaction.take(),
                marker_offset: header.base_offset,
                aborted: marker == ControlType::Abort,
            };
        }
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        // Batches a coordinator writes (transactional offset commits) carry no sequence.
        if header.base_sequence >= 0 {
            if entry.batches.len() == REMEMBERED_BATCHES {
                entry.batches.pop_front();
            }
            entry.batches.push_back(BatchSeen {
                first_sequence: header.base_sequence,
                last_sequence: header.last_sequence(),
                base_offset: header.base_offset,
                last_offset: header.last_offset(),
            });
        }
        if header.is_transactional() && entry.open_transaction.is_none() {
            entry.open_transaction = Some(header.base_offset);
            return TxnChange::Opened {
                producer_id: header.producer_id,
                first_offset: header.base_offset,
            };
        }
        TxnChange::None
    }

    /// Whether `producer_id` has a transaction open in this partition.
    pub(crate) fn has_open_transaction(&self, producer_id: i64) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.open_transaction.is_some())
    }

    /// The newest epoch seen of `producer_id`.
    pub(crate) fn epoch(&self, producer_id: i64) -> Option<i16> {
        self.producers.get(&producer_id).map(|e| e.epoch)
    }

    /// Every open transaction: (producer id, first offset).
    pub(crate) fn open_transactions(&self) -> impl Iterator<Item = (i64, Offset)> + '_ {
        self.producers
            .iter()
            .filter_map(|(&id, e)| Some((id, e.open_transaction?)))
    }

    /// Forgets the producers whose every remembered batch is below `offset` (retention deleted
    /// them) and that have no open transaction, as Kafka does.
    pub(crate) fn remove_before(&mut self, offset: Offset) {
        self.producers.retain(|_, e| {
            e.open_transaction.is_some()
                || e.batches.back().is_some_and(|b| b.last_offset >= offset)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_core::log::Record;
    use eddy_core::wire::batch::BatchBuilder;
    use eddy_core::wire::compression::Compression;

    fn header(
        producer: i64,
        epoch: i16,
        sequence: i32,
        records: usize,
        base_offset: Offset,
    ) -> BatchHeader {
        let mut builder = BatchBuilder::new(Compression::None).producer(producer, epoch, sequence);
        for _ in 0..records {
            builder.append(&Record::new("k", "v", 0));
        }
        let mut bytes = builder.build(0).unwrap();
        eddy_core::wire::batch::set_base_offset(&mut bytes, base_offset);
        BatchHeader::parse(&bytes).unwrap()
    }

    #[test]
    fn sequences_follow_on_and_retries_are_recognised() {
        let mut states = ProducerStates::default();
        let first = header(7, 0, 0, 3, 100);
        assert_eq!(states.check(&first), SequenceCheck::Append);
        states.record(&first, None);
        let second = header(7, 0, 3, 2, 103);
        assert_eq!(states.check(&second), SequenceCheck::Append);
        states.record(&second, None);
        // The first batch again: a retry, answered with its offsets.
        assert_eq!(
            states.check(&header(7, 0, 0, 3, 0)),
            SequenceCheck::Duplicate {
                base_offset: 100,
                last_offset: 102
            }
        );
        // A gap, and an unknown producer not starting at 0.
        assert_eq!(
            states.check(&header(7, 0, 9, 1, 0)),
            SequenceCheck::OutOfOrder { expected: 5 }
        );
        assert_eq!(
            states.check(&header(8, 0, 4, 1, 0)),
            SequenceCheck::OutOfOrder { expected: 0 }
        );
    }

    #[test]
    fn epochs_fence_and_reset() {
        let mut states = ProducerStates::default();
        states.record(&header(7, 2, 0, 1, 0), None);
        assert_eq!(
            states.check(&header(7, 1, 1, 1, 0)),
            SequenceCheck::StaleEpoch { current: 2 }
        );
        assert_eq!(
            states.check(&header(7, 3, 5, 1, 0)),
            SequenceCheck::OutOfOrder { expected: 0 }
        );
        let bumped = header(7, 3, 0, 1, 1);
        assert_eq!(states.check(&bumped), SequenceCheck::Append);
        states.record(&bumped, None);
        assert_eq!(
            states.check(&header(7, 2, 1, 1, 0)),
            SequenceCheck::StaleEpoch { current: 3 }
        );
    }

    #[test]
    fn snapshots_round_trip_and_damage_is_detected() {
        let mut states = ProducerStates::default();
        for n in 0..7 {
            states.record(&header(n % 3, 1, n as i32 / 3, 1, n), None);
        }
        let bytes = states.encode_snapshot();
        let back = ProducerStates::decode_snapshot(&bytes).unwrap();
        assert_eq!(back.encode_snapshot(), bytes);
        assert_eq!(
            back.check(&header(1, 1, 1, 1, 0)),
            SequenceCheck::Duplicate {
                base_offset: 4,
                last_offset: 4
            }
        );
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x10;
            assert!(
                ProducerStates::decode_snapshot(&damaged).is_none(),
                "damage at {i} went unseen"
            );
        }
        assert!(ProducerStates::decode_snapshot(&bytes[..bytes.len() - 1]).is_none());
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut states = ProducerStates::default();
        for n in 0..6 {
            states.record(&header(1, 0, n, 1, n as i64), None);
        }
        assert_eq!(
            states.check(&header(1, 0, 0, 1, 0)),
            SequenceCheck::OutOfOrder { expected: 6 }
        );
        assert_eq!(
            states.check(&header(1, 0, 1, 1, 0)),
            SequenceCheck::Duplicate {
                base_offset: 1,
                last_offset: 1
            }
        );
    }
}
