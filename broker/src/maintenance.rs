//! Background work on the logs: retention on its interval; compaction of compacted topics
//! once a segment has closed since their last pass; and for topics that leave durability to
//! the page cache, an fsync every `flush.ms`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::state::BrokerState;

pub(crate) async fn run(state: Arc<BrokerState>, mut stop: watch::Receiver<bool>) {
    let mut next_retention = Instant::now() + state.config.retention_check_interval;
    let mut next_cleaning = Instant::now() + state.config.cleaner_backoff;
    let mut last_flush = HashMap::new();
    let mut cleaned_through = HashMap::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = stop.changed() => return,
        }
        let now = Instant::now();
        for partition in state.logs.partitions() {
            let config = partition.config();
            if config.fsync_before_ack || partition.log_end_offset() == partition.high_watermark() {
                continue;
            }
            let last = *last_flush
                .entry(partition.topic_partition().clone())
                .or_insert(now);
            if now.duration_since(last) < Duration::from_millis(config.flush_ms.max(0) as u64) {
                continue;
            }
            last_flush.insert(partition.topic_partition().clone(), now);
            if let Err(e) = partition.flush().await {
                tracing::error!(partition = %partition.topic_partition(), error = %e, "periodic flush failed");
            }
        }
        if now >= next_cleaning {
            next_cleaning = now + state.config.cleaner_backoff;
            let due: Vec<_> = state
                .logs
                .partitions()
                .into_iter()
                .filter(|p| p.config().compact)
                .filter(|p| {
                    cleaned_through.get(p.topic_partition()) != Some(&p.active_segment_base())
                })
                .collect();
            for partition in due {
                let active = partition.active_segment_base();
                let worker = Arc::clone(&partition);
                let wall = state.clock.now().wall_ms;
                let result = tokio::task::spawn_blocking(move || worker.compact(wall)).await;
                match result {
                    Ok(Ok(stats)) => {
                        cleaned_through.insert(partition.topic_partition().clone(), active);
                        if stats.records_removed > 0 {
                            tracing::info!(partition = %partition.topic_partition(), ?stats, "compacted");
                        }
                    }
                    Ok(Err(e)) => {
                        tracing::error!(partition = %partition.topic_partition(), error = %e, "compaction failed")
                    }
                    Err(e) => {
                        tracing::error!(partition = %partition.topic_partition(), error = %e, "compaction task failed")
                    }
                }
            }
        }
        if now >= next_retention {
            next_retention = now + state.config.retention_check_interval;
            let state = Arc::clone(&state);
            let wall = state.clock.now().wall_ms;
            let swept = tokio::task::spawn_blocking(move || {
                state
                    .logs
                    .partitions()
                    .into_iter()
                    .map(|p| {
                        p.apply_retention(wall).unwrap_or_else(|e| {
                            tracing::error!(partition = %p.topic_partition(), error = %e, "retention failed");
                            0
                        })
                    })
                    .sum::<usize>()
            })
            .await
            .unwrap_or(0);
            if swept > 0 {
                tracing::info!(segments = swept, "retention deleted segments");
            }
        }
    }
}
