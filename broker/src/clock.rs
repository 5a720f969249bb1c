//! The one clock the coordinators read: session, rebalance and transaction timeouts, and the
//! times they store, all come from it. It follows tokio's clock, so a test that pauses time
//! (`#[tokio::test(start_paused = true)]`) moves every coordinator deadline with it, and the
//! wall-clock milliseconds it gives advance with the same clock from the wall time it was
//! made at (monotonic, never stepping back).

use tokio::time::Instant;

/// A moment, as a deadline (`instant`) and as wall-clock milliseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Now {
    /// For deadlines.
    pub(crate) instant: Instant,
    /// For what is stored and shown (commit and state times).
    pub(crate) wall_ms: i64,
}

/// The coordinators' clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    base: Instant,
    base_wall_ms: i64,
}

impl Clock {
    /// A clock reading the wall time now, advancing with tokio's clock from here on.
    pub(crate) fn new() -> Self {
        Self {
            base: Instant::now(),
            base_wall_ms: eddy_core::clock::system_time_ms(),
        }
    }

    /// The moment it is.
    pub(crate) fn now(&self) -> Now {
        let instant = Instant::now();
        let elapsed =
            i64::try_from(instant.duration_since(self.base).as_millis()).unwrap_or(i64::MAX);
        Now {
            instant,
            wall_ms: self.base_wall_ms.saturating_add(elapsed),
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn wall_time_moves_with_tokios_clock() {
        let clock = Clock::new();
        let before = clock.now();
        tokio::time::advance(Duration::from_secs(45)).await;
        let after = clock.now();
        assert_eq!(after.instant - before.instant, Duration::from_secs(45));
        assert_eq!(after.wall_ms - before.wall_ms, 45_000);
    }
}
