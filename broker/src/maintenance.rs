//! Background work on the logs: retention on its interval, and for topics that leave
//! durability to the page cache, an fsync every `flush.ms`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::state::{now_ms, BrokerState};

pub(crate) async fn run(state: Arc<BrokerState>, mut stop: watch::Receiver<bool>) {
    let mut next_retention = Instant::now() + state.config.retention_check_interval;
    let mut last_flush = HashMap::new();
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
        if now >= next_retention {
            next_retention = now + state.config.retention_check_interval;
            let state = Arc::clone(&state);
            let swept = tokio::task::spawn_blocking(move || {
                let wall = now_ms();
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
