//! Retention: whole closed segments go once their newest record is older than `retention.ms`,
//! or, oldest first, while the log without them stays at least `retention.bytes` large. The
//! active segment is never deleted.

use std::io;

use super::log::Log;

/// Deletes the segments that retention allows to go; returns how many went.
pub(crate) fn apply(log: &mut Log, now_ms: i64) -> io::Result<usize> {
    let config = &log.config;
    if !config.delete {
        return Ok(0);
    }
    let (retention_ms, retention_bytes) = (config.retention_ms, config.retention_bytes);
    let mut size = log.size() as i64;
    let mut delete_before = None;
    for (_, next_offset, segment_size, max_timestamp) in log.closed_segments() {
        let too_old =
            retention_ms >= 0 && max_timestamp >= 0 && now_ms - max_timestamp > retention_ms;
        let too_big = retention_bytes >= 0 && size - segment_size as i64 >= retention_bytes;
        if !(too_old || too_big) {
            break;
        }
        size -= segment_size as i64;
        delete_before = Some(next_offset);
    }
    match delete_before {
        Some(offset) => log.delete_segments_before(offset),
        None => Ok(0),
    }
}
