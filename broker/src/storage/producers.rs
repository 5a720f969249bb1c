//! Idempotent producers' state in one partition: for each producer id, its epoch and the
//! sequence numbers and offsets of its last five batches. A retried batch is recognised and
//! answered with its original offsets instead of being written twice; a batch that skips
//! sequence numbers, or comes from an older epoch, is refused. The state is rebuilt from the
//! batch headers of the log at start.

use std::collections::{HashMap, VecDeque};

use eddy_core::log::Offset;
use eddy_core::wire::batch::BatchHeader;

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

impl ProducerStates {
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

    /// Records a batch written at its header's offsets.
    pub(crate) fn record(&mut self, header: &BatchHeader) {
        if header.producer_id < 0 || header.is_control() {
            return;
        }
        let entry = self.producers.entry(header.producer_id).or_default();
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
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
        states.record(&first);
        let second = header(7, 0, 3, 2, 103);
        assert_eq!(states.check(&second), SequenceCheck::Append);
        states.record(&second);
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
        states.record(&header(7, 2, 0, 1, 0));
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
        states.record(&bumped);
        assert_eq!(
            states.check(&header(7, 2, 1, 1, 0)),
            SequenceCheck::StaleEpoch { current: 3 }
        );
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let mut states = ProducerStates::default();
        for n in 0..6 {
            states.record(&header(1, 0, n, 1, n as i64));
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
