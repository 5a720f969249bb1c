//! The settings of one partition's log, typed. Topic configurations (`retention.ms`, …) are
//! parsed into this by the metadata layer.

/// How a partition's log is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogConfig {
    /// Roll to a new segment when the active one would pass this size (`segment.bytes`,
    /// defaults to 1 GiB).
    pub segment_bytes: u64,
    /// Roll when the active segment is this old (`segment.ms`, defaults to 7 days).
    pub segment_ms: i64,
    /// Delete closed segments whose newest record is older than this; -1 keeps them
    /// (`retention.ms`, defaults to 7 days).
    pub retention_ms: i64,
    /// Delete the oldest closed segments while the log is larger than this; -1 for no limit
    /// (`retention.bytes`, defaults to -1).
    pub retention_bytes: i64,
    /// `cleanup.policy` includes `delete`: retention applies (the default).
    pub delete: bool,
    /// `cleanup.policy` includes `compact`: closed segments keep the latest record per key.
    pub compact: bool,
    /// How long tombstones survive compaction (`delete.retention.ms`, defaults to 1 day).
    pub delete_retention_ms: i64,
    /// The largest record batch accepted (`max.message.bytes`, defaults to 1048588).
    pub max_message_bytes: usize,
    /// Bytes between offset-index entries (`index.interval.bytes`, defaults to 4096).
    pub index_interval_bytes: u64,
    /// Answer produce requests only once their batches are fsynced (`flush.messages=1`, the
    /// default). Any larger `flush.messages` leaves durability to the page cache, like
    /// Kafka's own default, with an fsync every `flush.ms`.
    pub fsync_before_ack: bool,
    /// With the page cache: fsync at least this often (`flush.ms`, defaults to 1000).
    pub flush_ms: i64,
    /// The broker stamps batches with its clock (`message.timestamp.type=LogAppendTime`)
    /// instead of keeping the producer's timestamps (`CreateTime`, the default).
    pub log_append_time: bool,
    /// With `CreateTime`, refuse records older than the broker's clock by more than this
    /// (`message.timestamp.before.max.ms`, defaults to no limit, `i64::MAX`).
    pub timestamp_before_max_ms: i64,
    /// With `CreateTime`, refuse records newer than the broker's clock by more than this
    /// (`message.timestamp.after.max.ms`, defaults to 1 hour, as in Kafka 4).
    pub timestamp_after_max_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3_600_000,
            retention_ms: 7 * 24 * 3_600_000,
            retention_bytes: -1,
            delete: true,
            compact: false,
            delete_retention_ms: 24 * 3_600_000,
            max_message_bytes: 1_048_588,
            index_interval_bytes: 4096,
            fsync_before_ack: true,
            flush_ms: 1000,
            log_append_time: false,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: 3_600_000,
        }
    }
}
