//! What fetched records take in memory, against the bytes they took on the wire. A fetch
//! asks the broker for bytes of batches, but a consumer holds more than those bytes: every
//! record decoded from them is an entry of its own beside them (its offset, key, value,
//! headers and timestamp: [`DECODED_RECORD`] bytes), and small records take several times
//! their size that way (a record of a 7-byte key and a 1-byte value is about 20 bytes in its
//! batch and 125 in memory). So that `fetch.max.bytes` bounds what a consumer holds, the
//! fetcher counts each answer at what it holds, and asks the broker for the bytes that would
//! hold what is left of `fetch.max.bytes`, at the ratio of held to fetched bytes its last
//! answer had ([`Expansion`]). A compressed batch's records are slices of its decompressed
//! bytes, which are not counted: compressed answers of small records still hold more than
//! `fetch.max.bytes`.

use eddy_core::log::Record;

/// The bytes a decoded record takes beside its batch's bytes (its key and value are slices
/// of them; headers, when a record has any, take a little more that is not counted).
pub(super) const DECODED_RECORD: usize = std::mem::size_of::<(i64, Record)>();

/// What an answer of `wire` bytes of batches holds once room for `records` records is made.
pub(super) fn held_bytes(wire: usize, records: usize) -> usize {
    wire.saturating_add(records.saturating_mul(DECODED_RECORD))
}

/// Sixteenths of a byte: the ratio's unit.
const UNIT: usize = 16;

/// The ratio of held bytes to fetched bytes that a fetch is expected to have: the last
/// answer's that had records. Before any has come, that of records of 64 bytes in their
/// batches, which a first fetch with nothing held may overshoot for smaller ones, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Expansion {
    sixteenths: usize,
}

impl Default for Expansion {
    fn default() -> Self {
        Self::observed(64, held_bytes(64, 1))
    }
}

impl Expansion {
    /// The ratio of an answer of `wire` bytes that holds `held`, rounded up (at least one:
    /// an answer holds at least its bytes).
    pub(super) fn observed(wire: usize, held: usize) -> Self {
        let sixteenths = held.saturating_mul(UNIT).div_ceil(wire.max(1)).max(UNIT);
        Self { sixteenths }
    }

    /// What an answer of `wire` bytes is expected to hold.
    pub(super) fn held(self, wire: usize) -> usize {
        wire.saturating_mul(self.sixteenths) / UNIT
    }

    /// The bytes to fetch so that the answer is expected to hold at most `held` (one at
    /// least).
    pub(super) fn wire(self, held: usize) -> usize {
        (held.saturating_mul(UNIT) / self.sixteenths).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_of_small_records_holds_several_times_its_bytes() {
        // Twenty-byte records: each decoded one takes more than its bytes.
        let expansion = Expansion::observed(20_000, held_bytes(20_000, 1_000));
        // Rounded up, by a sixteenth of the bytes at most.
        let held = held_bytes(20_000, 1_000);
        assert!((held..=held + 20_000 / 16).contains(&expansion.held(20_000)));
        let asked = expansion.wire(16 << 20);
        assert!(expansion.held(asked) <= 16 << 20);
        assert!(expansion.held(asked + 64) > (16 << 20) - 64);
        assert!(asked < (16 << 20) / 4, "{asked}");
    }

    #[test]
    fn an_answer_holds_at_least_its_bytes_and_a_fetch_asks_for_one_at_least() {
        let none = Expansion::observed(1 << 20, 0);
        assert_eq!(none.held(1 << 20), 1 << 20);
        assert_eq!(none.wire(1 << 20), 1 << 20);
        assert_eq!(Expansion::observed(0, 0).wire(0), 1);
        assert!(Expansion::default().held(64) >= 64 + DECODED_RECORD);
        // Lengths near the limits saturate rather than overflow.
        let most = Expansion::observed(usize::MAX, usize::MAX);
        assert!(most.wire(usize::MAX) >= 1 && most.held(usize::MAX) > 0);
    }
}
