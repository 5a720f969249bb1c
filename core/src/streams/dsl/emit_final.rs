//! Kafka's emit-on-window-close for windowed aggregations: instead of every update, each
//! window's aggregate is forwarded once, after the window closed. Like Kafka, the processor
//! looks for closed windows at most once per interval of wall-clock time
//! ([`EmitIntervals`](crate::streams::task::EmitIntervals): a second in an application, no
//! throttle in the `TestDriver`), and only when the close time moved since it last emitted;
//! what it emits is the range of windows that closed in between (by window start for time
//! and sliding windows, by session end for sessions).

use crate::log::Timestamp;

/// The close time already emitted and when the next emission may happen.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EmitFinal {
    /// The close time of the last emission; -1 before the first.
    pub(crate) last_close: Timestamp,
    next_time_to_emit: Timestamp,
}

impl Default for EmitFinal {
    fn default() -> Self {
        Self {
            last_close: -1,
            next_time_to_emit: 0,
        }
    }
}

impl EmitFinal {
    /// Kafka's `shouldEmitFinal`: whether the throttle of `interval_ms` lets an emission
    /// happen at wall-clock time `now` (which restarts the throttle) and the close time moved
    /// past the last one.
    pub(crate) fn due(&mut self, now: Timestamp, interval_ms: i64, close: Timestamp) -> bool {
        if now < self.next_time_to_emit {
            return false;
        }
        self.next_time_to_emit = now.saturating_add(interval_ms);
        self.last_close == -1 || self.last_close < close
    }

    /// Whether nothing was emitted yet.
    pub(crate) fn first(&self) -> bool {
        self.last_close == -1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emissions_are_throttled_and_need_a_later_close() {
        let mut emit = EmitFinal::default();
        assert!(emit.due(0, 1000, 10));
        emit.last_close = 10;
        // Within the second: refused whatever the close time.
        assert!(!emit.due(999, 1000, 20));
        // A second later, but the close time did not move.
        assert!(!emit.due(1_000, 1000, 10));
        // That attempt restarted the throttle.
        assert!(!emit.due(1_999, 1000, 20));
        assert!(emit.due(2_000, 1000, 20));
    }

    #[test]
    fn without_a_throttle_every_later_close_is_due() {
        let mut emit = EmitFinal::default();
        assert!(emit.due(0, 0, 10));
        emit.last_close = 10;
        assert!(emit.due(0, 0, 20));
        emit.last_close = 20;
        assert!(!emit.due(0, 0, 20), "the close time did not move");
    }
}
