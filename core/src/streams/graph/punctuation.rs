//! Punctuations: which clock a schedule follows, its name, and a punctuation that is due.

use crate::log::Timestamp;

/// Which clock a punctuation follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PunctuationType {
    /// The task's stream time: the largest record timestamp it has processed. Punctuations
    /// fire as records arrive, never while input is idle.
    StreamTime,
    /// The clock of the machine (in the `TestDriver`, the driver's clock).
    WallClockTime,
}

/// The name of a punctuation schedule, to tell schedules apart and to cancel one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScheduleId(pub u64);

/// A punctuation that is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Punctuation {
    /// The schedule that fired.
    pub schedule: ScheduleId,
    /// Its clock.
    pub kind: PunctuationType,
    /// The time of the clock when it fired.
    pub timestamp: Timestamp,
}
