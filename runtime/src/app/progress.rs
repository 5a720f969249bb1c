//! [`Progress`]: what an application did between two of its [`MetricsSnapshot`]s, as the
//! one line a tool prints while it runs an application — restoration (records restored, left
//! and the rate) while stores are being restored, processing (records, rate and lag)
//! otherwise.
//!
//! ```
//! use std::time::Duration;
//! use eddy::app::{MetricsSnapshot, Progress};
//!
//! let before = MetricsSnapshot::default();
//! let now = MetricsSnapshot {
//!     records_restored: 400_000,
//!     records_to_restore: 600_000,
//!     ..MetricsSnapshot::default()
//! };
//! let line = Progress::between(&before, &now, Duration::from_secs(2));
//! assert_eq!(
//!     line.to_string(),
//!     "restoring: 400,000 of 1,000,000 records (40%), 200,000 records/s"
//! );
//! ```

use std::fmt;
use std::time::Duration;

use super::MetricsSnapshot;

/// What an application did over an interval: see the module's documentation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Progress {
    /// Stores are being restored from their changelogs.
    Restoring {
        /// Changelog records restored so far.
        restored: u64,
        /// Changelog records left to restore.
        remaining: u64,
        /// Records restored per second over the interval.
        rate: f64,
    },
    /// Tasks are processing.
    Processing {
        /// Input records processed so far.
        processed: u64,
        /// Records processed per second over the interval.
        rate: f64,
        /// Records the running tasks' input partitions are behind their ends, together.
        lag: i64,
    },
}

impl Progress {
    /// What happened from `before` to `now`, `elapsed` apart.
    pub fn between(before: &MetricsSnapshot, now: &MetricsSnapshot, elapsed: Duration) -> Self {
        let seconds = elapsed.as_secs_f64().max(1e-3);
        let rate = |then: u64, now: u64| now.saturating_sub(then) as f64 / seconds;
        if now.records_to_restore > 0 {
            Progress::Restoring {
                restored: now.records_restored,
                remaining: now.records_to_restore,
                rate: rate(before.records_restored, now.records_restored),
            }
        } else {
            Progress::Processing {
                processed: now.records_processed,
                rate: rate(before.records_processed, now.records_processed),
                lag: now.lag.values().sum(),
            }
        }
    }
}

/// `n` with thousands separated by commas, as progress lines print counts.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Progress::Restoring {
                restored,
                remaining,
                rate,
            } => {
                let total = restored.saturating_add(remaining);
                write!(
                    f,
                    "restoring: {} of {} records ({}%), {} records/s",
                    grouped(restored),
                    grouped(total),
                    restored.saturating_mul(100) / total.max(1),
                    grouped(rate.round() as u64)
                )
            }
            Progress::Processing {
                processed,
                rate,
                lag,
            } => write!(
                f,
                "processing: {} records, {} records/s, lag {}",
                grouped(processed),
                grouped(rate.round() as u64),
                grouped(u64::try_from(lag).unwrap_or(0))
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_core::log::TopicPartition;

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    #[test]
    fn processing_shows_the_rate_over_the_interval_and_the_lag() {
        let before = MetricsSnapshot {
            records_processed: 1_000,
            ..MetricsSnapshot::default()
        };
        let mut now = MetricsSnapshot {
            records_processed: 251_000,
            records_restored: 50,
            ..MetricsSnapshot::default()
        };
        now.lag.insert(TopicPartition::new("in", 0), 7_000);
        now.lag.insert(TopicPartition::new("in", 1), 5_500);
        let line = Progress::between(&before, &now, Duration::from_millis(500));
        assert_eq!(
            line.to_string(),
            "processing: 251,000 records, 500,000 records/s, lag 12,500"
        );
    }
}
