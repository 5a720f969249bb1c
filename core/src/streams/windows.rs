//! Windows, as Kafka Streams defines them: time windows (tumbling and hopping) aligned to the
//! epoch, sliding windows, session windows and join windows, each with its grace period —
//! how long after a window's end records of it are still accepted, measured in stream time.
//! Times are milliseconds since the epoch, like record timestamps.

use std::time::Duration;

/// A time window `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Window {
    /// The first millisecond in the window.
    pub start: i64,
    /// The first millisecond after the window.
    pub end: i64,
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Why a window definition is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid window: {0}")]
pub struct WindowError(String);

/// Fixed-size windows aligned to the epoch: tumbling when they advance by their size, hopping
/// (overlapping) when they advance by less (Kafka's `TimeWindows`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindows {
    size: i64,
    advance: i64,
    grace: i64,
}

impl TimeWindows {
    /// Tumbling windows of `size` that accept no record after they end.
    pub fn of_size_with_no_grace(size: Duration) -> Result<Self, WindowError> {
        Self::of_size_and_grace(size, Duration::ZERO)
    }

    /// Tumbling windows of `size` that accept records up to `grace` after they end.
    pub fn of_size_and_grace(size: Duration, grace: Duration) -> Result<Self, WindowError> {
        let size = millis(size);
        if size <= 0 {
            return Err(WindowError("a window's size must be positive".into()));
        }
        Ok(Self {
            size,
            advance: size,
            grace: millis(grace),
        })
    }

    /// Hopping windows: a new window begins every `advance`, which must be positive and no
    /// longer than the size.
    pub fn advance_by(self, advance: Duration) -> Result<Self, WindowError> {
        let advance = millis(advance);
        if advance <= 0 || advance > self.size {
            return Err(WindowError(format!(
                "the advance ({advance} ms) must be positive and at most the size ({} ms)",
                self.size
            )));
        }
        Ok(Self { advance, ..self })
    }

    /// The size in milliseconds.
    pub fn size_ms(&self) -> i64 {
        self.size
    }

    /// The advance in milliseconds.
    pub fn advance_ms(&self) -> i64 {
        self.advance
    }

    /// The grace period in milliseconds.
    pub fn grace_ms(&self) -> i64 {
        self.grace
    }

    /// Every window holding `timestamp`, earliest first (Kafka's `windowsFor`). Windows
    /// start at multiples of the advance; none starts before the epoch.
    pub fn windows_for(&self, timestamp: i64) -> impl Iterator<Item = Window> + '_ {
        let first = (timestamp - self.size + self.advance).max(0) / self.advance * self.advance;
        (0..)
            .map(move |i| first + i * self.advance)
            .take_while(move |&start| start <= timestamp)
            .map(move |start| Window {
                start,
                end: start + self.size,
            })
    }

    /// Whether a window ending at `end` still accepts records when stream time is
    /// `stream_time`: until `end + grace` (Kafka drops a record once
    /// `stream_time >= end + grace`).
    pub fn is_open(&self, end: i64, stream_time: i64) -> bool {
        stream_time < end.saturating_add(self.grace)
    }
}

/// Windows of a fixed length around each record, for aggregations over "the last N"
/// (Kafka's `SlidingWindows`): two records fall in one window when their timestamps differ by
/// at most the time difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindows {
    time_difference: i64,
    grace: i64,
}

impl SlidingWindows {
    /// Sliding windows of `time_difference` accepting records up to `grace` late.
    pub fn of_time_difference_and_grace(
        time_difference: Duration,
        grace: Duration,
    ) -> Result<Self, WindowError> {
        let time_difference = millis(time_difference);
        if time_difference <= 0 {
            return Err(WindowError(
                "a sliding window's time difference must be positive".into(),
            ));
        }
        Ok(Self {
            time_difference,
            grace: millis(grace),
        })
    }

    /// The time difference in milliseconds.
    pub fn time_difference_ms(&self) -> i64 {
        self.time_difference
    }

    /// The grace period in milliseconds.
    pub fn grace_ms(&self) -> i64 {
        self.grace
    }
}

/// Sessions: runs of records of one key with no gap longer than the inactivity gap
/// (Kafka's `SessionWindows`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionWindows {
    gap: i64,
    grace: i64,
}

impl SessionWindows {
    /// Sessions closed by `gap` of inactivity, accepting no record after they close.
    pub fn of_inactivity_gap_with_no_grace(gap: Duration) -> Result<Self, WindowError> {
        Self::of_inactivity_gap_and_grace(gap, Duration::ZERO)
    }

    /// Sessions closed by `gap` of inactivity, accepting records up to `grace` late.
    pub fn of_inactivity_gap_and_grace(
        gap: Duration,
        grace: Duration,
    ) -> Result<Self, WindowError> {
        let gap = millis(gap);
        if gap <= 0 {
            return Err(WindowError(
                "a session's inactivity gap must be positive".into(),
            ));
        }
        Ok(Self {
            gap,
            grace: millis(grace),
        })
    }

    /// The inactivity gap in milliseconds.
    pub fn inactivity_gap_ms(&self) -> i64 {
        self.gap
    }

    /// The grace period in milliseconds.
    pub fn grace_ms(&self) -> i64 {
        self.grace
    }

    /// Whether a record at `timestamp` joins a session `[start, end]` (both bounds in the
    /// session): when it is within the gap of either end.
    pub fn joins(&self, session: (i64, i64), timestamp: i64) -> bool {
        timestamp >= session.0.saturating_sub(self.gap)
            && timestamp <= session.1.saturating_add(self.gap)
    }
}

/// How far apart two records of a stream-stream join may be (Kafka's `JoinWindows`): a record
/// of the left stream at `t` joins right records in `[t - before, t + after]`, both bounds
/// included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinWindows {
    before: i64,
    after: i64,
    grace: i64,
}

impl JoinWindows {
    /// Records at most `difference` apart join; none joins after the window closed.
    pub fn of_time_difference_with_no_grace(difference: Duration) -> Result<Self, WindowError> {
        Self::of_time_difference_and_grace(difference, Duration::ZERO)
    }

    /// Records at most `difference` apart join, accepting records up to `grace` late.
    pub fn of_time_difference_and_grace(
        difference: Duration,
        grace: Duration,
    ) -> Result<Self, WindowError> {
        let difference = millis(difference);
        Ok(Self {
            before: difference,
            after: difference,
            grace: millis(grace),
        })
    }

    /// Sets how far before a left record right records may be.
    pub fn before(self, before: Duration) -> Result<Self, WindowError> {
        self.checked(millis(before), self.after)
    }

    /// Sets how far after a left record right records may be.
    pub fn after(self, after: Duration) -> Result<Self, WindowError> {
        self.checked(self.before, millis(after))
    }

    fn checked(self, before: i64, after: i64) -> Result<Self, WindowError> {
        // Kafka allows negative bounds as long as the window is not empty.
        if before.saturating_add(after) < 0 {
            return Err(WindowError(format!(
                "before ({before} ms) plus after ({after} ms) must not be negative"
            )));
        }
        Ok(Self {
            before,
            after,
            ..self
        })
    }

    /// How far before, in milliseconds.
    pub fn before_ms(&self) -> i64 {
        self.before
    }

    /// How far after, in milliseconds.
    pub fn after_ms(&self) -> i64 {
        self.after
    }

    /// The grace period in milliseconds.
    pub fn grace_ms(&self) -> i64 {
        self.grace
    }

    /// Whether a left record at `left` and a right record at `right` join.
    pub fn joins(&self, left: i64, right: i64) -> bool {
        right >= left.saturating_sub(self.before) && right <= left.saturating_add(self.after)
    }
}

#[cfg(test)]
mod tests;
