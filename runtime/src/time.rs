//! The runtime's one clock. Deadlines, intervals and timeouts of the client and the stream
//! threads are tokio [`Instant`]s, so a test that pauses tokio's time (`start_paused`,
//! `tokio::time::advance`) moves heartbeats, session and poll timeouts, linger, retries, the
//! commit interval, `max.task.idle.ms`, probing rebalances and wall-clock punctuation with it.
//! Wall-clock milliseconds — record timestamps, wall-clock punctuation — come from [`now_ms`].

use std::future::Future;
use std::time::Duration;

use eddy_core::log::Timestamp;

pub(crate) use tokio::time::Instant;

/// How long a wait that should be short goes before [`reported`] reports it (and again
/// each time as long after).
pub(crate) const REPORT_WAITS_AFTER: Duration = Duration::from_secs(30);

/// Awaits `work`; each `every` it is still not done, `report` is called with the time
/// waited so far (to log what is waited for: a wait that never ends says where it stands).
pub(crate) async fn reported<F: Future>(
    work: F,
    every: Duration,
    mut report: impl FnMut(Duration),
) -> F::Output {
    tokio::pin!(work);
    let mut waited = Duration::ZERO;
    loop {
        match tokio::time::timeout(every, work.as_mut()).await {
            Ok(done) => return done,
            Err(_) => {
                waited += every;
                report(waited);
            }
        }
    }
}

/// Wall-clock milliseconds since the Unix epoch, on tokio's clock: the system's wall time
/// while tokio's time runs (so clock corrections reach it, as Kafka's `Time.SYSTEM`), and,
/// while a test has tokio's time paused, the wall time shifted by how far tokio's clock is
/// from the real one — frozen while paused, moved by exactly what `advance` moves.
pub(crate) fn now_ms() -> Timestamp {
    let tokio_now = Instant::now().into_std();
    let wall = eddy_core::clock::system_time_ms();
    let real_now = std::time::Instant::now();
    let shift = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    match tokio_now.checked_duration_since(real_now) {
        Some(ahead) => wall.saturating_add(shift(ahead)),
        None => wall.saturating_sub(shift(real_now.duration_since(tokio_now))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_long_wait_is_reported_at_each_period_until_it_ends() {
        let mut reports = Vec::new();
        let done = reported(
            async {
                tokio::time::sleep(Duration::from_secs(95)).await;
                7
            },
            Duration::from_secs(30),
            |waited| reports.push(waited.as_secs()),
        )
        .await;
        assert_eq!(done, 7);
        assert_eq!(reports, [30, 60, 90]);
        let mut none = 0;
        reported(async {}, Duration::from_secs(30), |_| none += 1).await;
        assert_eq!(none, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn wall_time_stands_while_paused_and_moves_by_what_is_advanced() {
        let before = now_ms();
        std::thread::sleep(Duration::from_millis(30));
        let frozen = now_ms();
        assert!((frozen - before).abs() <= 1, "moved {} ms", frozen - before);
        tokio::time::advance(Duration::from_secs(90)).await;
        let after = now_ms();
        assert!(
            (after - before - 90_000).abs() <= 1,
            "moved {} ms",
            after - before
        );
    }

    #[tokio::test]
    async fn wall_time_is_the_systems_while_time_runs() {
        let system = eddy_core::clock::system_time_ms();
        let ours = now_ms();
        assert!((ours - system).abs() <= 5, "{ours} against {system}");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(now_ms() - ours >= 20);
    }
}
