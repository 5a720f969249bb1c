//! The system's wall clock, read in one place. The broker's coordinators and the runtime build
//! their clocks on it (each follows tokio's time from there, so paused-time tests move them);
//! nothing else in eddy reads `SystemTime`.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::log::Timestamp;

/// Milliseconds since the Unix epoch by the system's wall clock; 0 if the clock is set before
/// 1970, `i64::MAX` past the year 292 million.
pub fn system_time_ms() -> Timestamp {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_milliseconds_since_the_epoch() {
        // 2020-01-01T00:00:00Z and 2100-01-01T00:00:00Z: a reading in seconds or microseconds
        // would fall outside.
        let now = system_time_ms();
        assert!(
            (1_577_836_800_000..4_102_444_800_000).contains(&now),
            "{now}"
        );
    }
}
