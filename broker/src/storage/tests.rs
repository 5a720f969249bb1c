//! The storage engine on real files: appends, reads, rolls, recovery from torn tails,
//! restarts and retention.

use std::fs;
use std::path::Path;

use bytes::Bytes;
use eddy_core::log::{Record, TopicPartition};
use eddy_core::wire::batch::{decode_records, BatchBuilder, Batches};
use eddy_core::wire::compression::Compression;

use super::*;

fn batch(first: usize, count: usize, timestamp: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    for i in first..first + count {
        builder.append(&Record::new(
            format!("key-{}", i % 7),
            format!("value-{i:06}"),
            timestamp,
        ));
    }
    builder.build(0).unwrap()
}

fn tp() -> TopicPartition {
    TopicPartition::new("orders", 0)
}

fn open(dir: &Path, config: LogConfig) -> Partition {
    Partition::open(tp(), dir, config, 0).unwrap()
}

/// Every record in the partition from `from`, reading batch after batch.
fn read_all(partition: &Partition, from: i64) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    let mut offset = from;
    loop {
        let fetched = partition.read(offset, 4096).unwrap();
        if fetched.records.is_empty() {
            return out;
        }
        for item in Batches::new(&fetched.records) {
            let (_, bytes) = item.unwrap();
            let (header, records) =
                decode_records(&Bytes::copy_from_slice(bytes), 1 << 20).unwrap();
            for r in records.into_iter().filter(|r| r.offset >= offset) {
                let value = String::from_utf8(r.record.value.unwrap().to_vec()).unwrap();
                out.push((r.offset, value));
            }
            offset = header.next_offset();
        }
    }
}

fn values(range: std::ops::Range<usize>) -> Vec<(i64, String)> {
    range.map(|i| (i as i64, format!("value-{i:06}"))).collect()
}

#[tokio::test]
async fn appended_batches_get_consecutive_offsets_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), LogConfig::default());
    for b in 0..100 {
        let info = partition
            .append(&batch(b * 10, 10, 1000 + b as i64), 5)
            .unwrap();
        assert_eq!(
            (info.base_offset, info.last_offset),
            (b as i64 * 10, b as i64 * 10 + 9)
        );
        partition.wait_durable(info.last_offset).await.unwrap();
    }
    assert_eq!(partition.high_watermark(), 1000);
    assert_eq!(read_all(&partition, 0), values(0..1000));
    // A read from the middle of a batch returns that whole batch first.
    let fetched = partition.read(555, 1).unwrap();
    let (header, _) = Batches::new(&fetched.records).next().unwrap().unwrap();
    assert_eq!(header.base_offset, 550);
    assert_eq!(
        fetched.records.len(),
        header.size(),
        "max_bytes 1 still returns one batch"
    );
    assert_eq!(read_all(&partition, 555), values(555..1000));
}

#[tokio::test]
async fn consumers_see_only_what_is_fsynced() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), LogConfig::default());
    let info = partition.append(&batch(0, 5, 1), 0).unwrap();
    assert_eq!(partition.high_watermark(), 0);
    assert!(partition.read(0, 1 << 20).unwrap().records.is_empty());
    partition.wait_durable(info.last_offset).await.unwrap();
    assert_eq!(partition.high_watermark(), 5);
    assert_eq!(read_all(&partition, 0), values(0..5));

    let relaxed = tempfile::tempdir().unwrap();
    let config = LogConfig {
        fsync_before_ack: false,
        ..LogConfig::default()
    };
    let partition = open(relaxed.path(), config);
    partition.append(&batch(0, 5, 1), 0).unwrap();
    assert_eq!(
        partition.high_watermark(),
        5,
        "page-cache mode exposes appends at once"
    );
}

#[tokio::test]
async fn group_commit_serves_every_waiting_producer() {
    let dir = tempfile::tempdir().unwrap();
    let partition = std::sync::Arc::new(open(dir.path(), LogConfig::default()));
    let mut waits = Vec::new();
    for b in 0..50 {
        let info = partition.append(&batch(b * 2, 2, 0), 0).unwrap();
        let p = std::sync::Arc::clone(&partition);
        waits.push(tokio::spawn(async move {
            p.wait_durable(info.last_offset).await
        }));
    }
    for w in waits {
        w.await.unwrap().unwrap();
    }
    assert_eq!(partition.high_watermark(), 100);
}

#[tokio::test]
async fn segments_roll_by_size_and_reads_cross_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 2000,
        index_interval_bytes: 300,
        ..LogConfig::default()
    };
    let partition = open(dir.path(), config.clone());
    for b in 0..60 {
        let info = partition.append(&batch(b * 5, 5, 0), 0).unwrap();
        partition.wait_durable(info.last_offset).await.unwrap();
    }
    let logs = fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".log")
        })
        .count();
    assert!(logs > 5, "expected several segments, found {logs}");
    assert_eq!(read_all(&partition, 0), values(0..300));
    for start in [0, 1, 99, 150, 299] {
        assert_eq!(
            read_all(&partition, start),
            values(start as usize..300),
            "from {start}"
        );
    }

    // A restart uses the closed segments' saved indexes and sees the same log.
    partition.close().unwrap();
    drop(partition);
    let reopened = open(dir.path(), config.clone());
    assert_eq!(reopened.log_end_offset(), 300);
    assert_eq!(read_all(&reopened, 123), values(123..300));
    drop(reopened);

    // Damaged index files are rebuilt from the batches.
    for entry in fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "index") {
            fs::write(&path, b"garbage").unwrap();
        }
    }
    let rebuilt = open(dir.path(), config);
    assert_eq!(read_all(&rebuilt, 77), values(77..300));
}

#[tokio::test]
async fn a_torn_or_corrupt_tail_is_cut_at_the_first_bad_byte() {
    let pristine = tempfile::tempdir().unwrap();
    let mut ends = vec![0u64];
    {
        let partition = open(pristine.path(), LogConfig::default());
        for b in 0..8 {
            partition.append(&batch(b * 3, 3, 0), 0).unwrap();
            ends.push(partition.size());
        }
    }
    let log_file = "00000000000000000000.log";
    let full = fs::read(pristine.path().join(log_file)).unwrap();
    let damaged_positions: Vec<u64> = (0..full.len() as u64).step_by(7).collect();
    for &cut in &damaged_positions {
        for corrupt in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let mut bytes = full.clone();
            if corrupt {
                bytes[cut as usize] ^= 0x5a;
            } else {
                bytes.truncate(cut as usize);
            }
            fs::write(dir.path().join(log_file), &bytes).unwrap();
            let partition = open(dir.path(), LogConfig::default());
            // Every batch that ends at or before the damage survives; nothing after it does.
            // (The partition leader epoch, bytes 12..16 of a batch, is outside the CRC, as in
            // Kafka: damage there goes unnoticed and harms nothing.)
            let damaged = ends.iter().rposition(|&end| end <= cut).unwrap();
            let in_epoch = (12..16).contains(&(cut - ends[damaged]));
            let intact = if corrupt && in_epoch && damaged < 8 {
                8
            } else {
                damaged
            };
            assert_eq!(
                partition.log_end_offset(),
                intact as i64 * 3,
                "damage at {cut} (corrupt: {corrupt})"
            );
            assert_eq!(read_all(&partition, 0), values(0..intact * 3));
            // And the log takes new writes right after the surviving data.
            let info = partition.append(&batch(intact * 3, 3, 0), 0).unwrap();
            assert_eq!(info.base_offset, intact as i64 * 3);
            partition.wait_durable(info.last_offset).await.unwrap();
            assert_eq!(read_all(&partition, 0), values(0..intact * 3 + 3));
        }
    }
}

#[test]
fn bad_batches_are_refused_and_leave_the_log_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        max_message_bytes: 500,
        ..LogConfig::default()
    };
    let partition = open(dir.path(), config);
    let mut corrupt = batch(0, 3, 0);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    assert!(matches!(
        partition.append(&corrupt, 0),
        Err(StorageError::CorruptBatch(_))
    ));
    let mut trailing = batch(0, 3, 0);
    trailing.extend_from_slice(&[1, 2, 3]);
    assert!(matches!(
        partition.append(&trailing, 0),
        Err(StorageError::InvalidBatch(_))
    ));
    assert!(matches!(
        partition.append(&batch(0, 40, 0), 0),
        Err(StorageError::BatchTooLarge { max: 500, .. })
    ));
    assert!(matches!(
        partition.append(&[], 0),
        Err(StorageError::InvalidBatch(_))
    ));
    assert_eq!(partition.log_end_offset(), 0);
    assert_eq!(partition.size(), 0);
}

#[tokio::test]
async fn reads_outside_the_log_are_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), LogConfig::default());
    let info = partition.append(&batch(0, 4, 0), 0).unwrap();
    partition.wait_durable(info.last_offset).await.unwrap();
    assert!(
        partition.read(4, 100).unwrap().records.is_empty(),
        "the end is not out of range"
    );
    assert!(matches!(
        partition.read(5, 100),
        Err(StorageError::OffsetOutOfRange {
            offset: 5,
            log_start_offset: 0,
            log_end_offset: 4
        })
    ));
    assert!(matches!(
        partition.read(-1, 100),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
}

#[tokio::test]
async fn timestamps_find_the_first_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 600,
        ..LogConfig::default()
    };
    let partition = open(dir.path(), config);
    for b in 0..20 {
        // Batch b holds records at 1000 * b; b = 7 has an out-of-order early timestamp.
        let ts = if b == 7 { 50 } else { 1000 * b as i64 };
        let info = partition.append(&batch(b * 2, 2, ts), 0).unwrap();
        partition.wait_durable(info.last_offset).await.unwrap();
    }
    assert_eq!(
        partition.offset_for_timestamp(0, i64::MAX).unwrap(),
        Some((0, 0))
    );
    assert_eq!(
        partition.offset_for_timestamp(1, i64::MAX).unwrap(),
        Some((2, 1000))
    );
    assert_eq!(
        partition.offset_for_timestamp(6500, i64::MAX).unwrap(),
        Some((16, 8000))
    );
    assert_eq!(
        partition.offset_for_timestamp(19_000, i64::MAX).unwrap(),
        Some((38, 19_000))
    );
    assert_eq!(
        partition.offset_for_timestamp(19_001, i64::MAX).unwrap(),
        None
    );
}

#[tokio::test]
async fn retention_deletes_old_and_excess_segments_only() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 600,
        retention_ms: 10_000,
        ..LogConfig::default()
    };
    let partition = open(dir.path(), config.clone());
    for b in 0..30 {
        let info = partition
            .append(&batch(b * 2, 2, 1000 * b as i64), 0)
            .unwrap();
        partition.wait_durable(info.last_offset).await.unwrap();
    }
    // Records older than 10 s at "now" = 25 s: segments whose newest record is below 15 s go.
    let deleted = partition.apply_retention(25_000).unwrap();
    assert!(deleted > 0);
    let start = partition.log_start_offset();
    assert!(start > 0 && start <= 32, "log start offset {start}");
    assert!(matches!(
        partition.read(0, 100),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert_eq!(read_all(&partition, start), values(start as usize..60));
    // Far in the future everything but the active segment goes.
    partition.apply_retention(1_000_000).unwrap();
    let active_start = partition.log_start_offset();
    assert!(active_start > start);
    assert_eq!(
        read_all(&partition, active_start),
        values(active_start as usize..60)
    );
    // The start offset survives a restart.
    drop(partition);
    let reopened = open(dir.path(), config);
    assert_eq!(reopened.log_start_offset(), active_start);

    let sized = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 600,
        retention_ms: -1,
        retention_bytes: 1500,
        ..LogConfig::default()
    };
    let partition = open(sized.path(), config);
    for b in 0..30 {
        partition.append(&batch(b * 2, 2, 0), 0).unwrap();
    }
    partition.apply_retention(0).unwrap();
    assert!(
        partition.size() >= 1500,
        "retention.bytes is a floor of what stays"
    );
    assert!(
        partition.size() < 1500 + 700,
        "but no more than a segment above it stays"
    );
}

/// Every record from `from`: (offset, key, value), tombstones as `None`.
fn read_keyed(partition: &Partition, from: i64) -> Vec<(i64, String, Option<String>)> {
    let text = |b: Option<Bytes>| b.map(|b| String::from_utf8(b.to_vec()).unwrap());
    let mut out = Vec::new();
    let mut offset = from;
    loop {
        let fetched = partition.read(offset, 1 << 16).unwrap();
        if fetched.records.is_empty() {
            return out;
        }
        for item in Batches::new(&fetched.records) {
            let (header, bytes) = item.unwrap();
            let (_, records) = decode_records(&Bytes::copy_from_slice(bytes), 1 << 20).unwrap();
            for r in records.into_iter().filter(|r| r.offset >= offset) {
                out.push((r.offset, text(r.record.key).unwrap(), text(r.record.value)));
            }
            offset = header.next_offset();
        }
    }
}

/// A batch of (key, value-or-tombstone, timestamp) records.
fn keyed_batch(records: &[(String, Option<String>, i64)], compression: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(compression);
    for (k, v, ts) in records {
        builder.append_parts(
            Some(k.as_bytes()),
            v.as_deref().map(str::as_bytes),
            &[],
            *ts,
        );
    }
    builder.build(0).unwrap()
}

fn compacted_config() -> LogConfig {
    LogConfig {
        compact: true,
        delete: false,
        segment_bytes: 700,
        delete_retention_ms: 1_000,
        ..LogConfig::default()
    }
}

#[tokio::test]
async fn compaction_keeps_the_latest_record_of_each_key_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), compacted_config());
    let now = 1_000_000;
    let mut written = Vec::new();
    for b in 0..60 {
        let records: Vec<_> = (0..4)
            .map(|i| {
                let n = b * 4 + i;
                match n {
                    // An old tombstone, long past delete.retention.ms, and a recent one.
                    9 => ("old-gone".to_string(), None, 10),
                    3 => ("old-gone".to_string(), Some("v3".to_string()), 5),
                    200 => ("recent-gone".to_string(), None, now - 10),
                    _ => (format!("k{}", n % 10), Some(format!("v{n}")), n as i64),
                }
            })
            .collect();
        written.extend(records.iter().cloned());
        let info = partition
            .append(&keyed_batch(&records, Compression::Lz4), 0)
            .unwrap();
        partition.wait_durable(info.last_offset).await.unwrap();
    }
    let before = read_keyed(&partition, 0);
    let active = partition.active_segment_base();
    assert!(
        active > 100,
        "the test needs closed segments, active starts at {active}"
    );

    let stats = partition.compact(now).unwrap();
    assert!(stats.records_removed > 100, "{stats:?}");
    let after = read_keyed(&partition, 0);

    // Every surviving record is the one that was at its offset.
    for row in &after {
        assert_eq!(
            Some(row),
            before.iter().find(|b| b.0 == row.0),
            "offset {}",
            row.0
        );
    }
    // The active segment is untouched.
    let tail = |rows: &[(i64, String, Option<String>)]| {
        rows.iter()
            .filter(|r| r.0 >= active)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(tail(&after), tail(&before));
    // Among closed segments each key appears once, at its latest offset there.
    let closed: Vec<_> = after.iter().filter(|r| r.0 < active).collect();
    let mut keys: Vec<_> = closed.iter().map(|r| r.1.clone()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(
        keys.len(),
        closed.len(),
        "a key appears twice in closed segments"
    );
    assert!(
        !closed.iter().any(|r| r.1 == "old-gone"),
        "an expired tombstone survived"
    );
    assert!(
        after.iter().any(|r| r.1 == "recent-gone" && r.2.is_none()),
        "a recent tombstone went"
    );
    // Reading the log start to end gives every key its latest value, as before.
    let latest = |rows: &[(i64, String, Option<String>)]| {
        let mut map = std::collections::BTreeMap::new();
        for (_, k, v) in rows {
            map.insert(k.clone(), v.clone());
        }
        map.retain(|k, v| v.is_some() || k != "old-gone");
        map
    };
    assert_eq!(latest(&after), latest(&before));

    // Compacting again changes nothing; a restart reads the same log.
    assert_eq!(partition.compact(now).unwrap().records_removed, 0);
    drop(partition);
    let reopened = open(dir.path(), compacted_config());
    assert_eq!(read_keyed(&reopened, 0), after);
    let info = reopened
        .append(
            &keyed_batch(&[("k1".into(), Some("new".into()), 1)], Compression::None),
            0,
        )
        .unwrap();
    assert_eq!(info.base_offset, 240, "offsets go on after compaction");
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 24, ..Default::default() })]

    #[test]
    fn compaction_preserves_the_latest_value_of_every_key(
        writes in proptest::collection::vec((0u8..6, proptest::option::weighted(0.85, 0u16..1000)), 1..160),
        batch_len in 1usize..6,
        segment_bytes in 200u64..2000,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig { segment_bytes, delete_retention_ms: i64::MAX / 4, ..compacted_config() };
        let partition = open(dir.path(), config);
        let mut model = std::collections::BTreeMap::new();
        for chunk in writes.chunks(batch_len) {
            let records: Vec<_> = chunk
                .iter()
                .map(|(k, v)| (format!("key{k}"), v.map(|v| format!("value{v}")), 0))
                .collect();
            for (k, v, _) in &records {
                model.insert(k.clone(), v.clone());
            }
            partition.append(&keyed_batch(&records, Compression::None), 0).unwrap();
        }
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(partition.wait_durable(partition.log_end_offset() - 1)).unwrap();
        let before = read_keyed(&partition, 0);
        partition.compact(0).unwrap();
        let after = read_keyed(&partition, 0);
        let mut latest = std::collections::BTreeMap::new();
        for (offset, k, v) in &after {
            proptest::prop_assert!(before.iter().any(|b| b.0 == *offset && &b.1 == k && &b.2 == v));
            latest.insert(k.clone(), v.clone());
        }
        proptest::prop_assert_eq!(latest, model);
    }
}

#[tokio::test]
async fn segments_roll_by_age_too() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_ms: 1_000,
        ..LogConfig::default()
    };
    let partition = Partition::open(tp(), dir.path(), config, 0).unwrap();
    partition.append(&batch(0, 2, 0), 10).unwrap();
    partition.append(&batch(2, 2, 0), 999).unwrap();
    assert_eq!(
        partition.active_segment_base(),
        0,
        "younger than segment.ms: no roll"
    );
    let info = partition.append(&batch(4, 2, 0), 1_000).unwrap();
    assert_eq!(
        partition.active_segment_base(),
        4,
        "as old as segment.ms: a new segment"
    );
    partition.wait_durable(info.last_offset).await.unwrap();
    assert_eq!(read_all(&partition, 0), values(0..6));
}

fn idempotent_batch(
    producer: i64,
    epoch: i16,
    sequence: i32,
    first: usize,
    count: usize,
) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None).producer(producer, epoch, sequence);
    for i in first..first + count {
        builder.append(&Record::new("k", format!("value-{i:06}"), 0));
    }
    builder.build(0).unwrap()
}

#[tokio::test]
async fn an_idempotent_producers_retries_are_written_once_even_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), LogConfig::default());
    let first = partition
        .append(&idempotent_batch(7, 0, 0, 0, 3), 0)
        .unwrap();
    let second = partition
        .append(&idempotent_batch(7, 0, 3, 3, 2), 0)
        .unwrap();
    assert_eq!((first.base_offset, second.base_offset), (0, 3));
    // A retry of the first batch: its offsets again, nothing written.
    let retry = partition
        .append(&idempotent_batch(7, 0, 0, 0, 3), 0)
        .unwrap();
    assert_eq!((retry.base_offset, retry.last_offset), (0, 2));
    assert_eq!(partition.log_end_offset(), 5);
    // A gap and an old epoch are refused.
    assert!(matches!(
        partition.append(&idempotent_batch(7, 0, 9, 5, 1), 0),
        Err(StorageError::OutOfOrderSequence {
            expected: 5,
            got: 9,
            ..
        })
    ));
    partition
        .append(&idempotent_batch(7, 1, 0, 5, 1), 0)
        .unwrap();
    assert!(matches!(
        partition.append(&idempotent_batch(7, 0, 5, 6, 1), 0),
        Err(StorageError::InvalidProducerEpoch { current: 1, .. })
    ));
    partition.wait_durable(5).await.unwrap();
    drop(partition);

    // After a restart the producers' state is rebuilt from the log.
    let reopened = open(dir.path(), LogConfig::default());
    let retry = reopened
        .append(&idempotent_batch(7, 1, 0, 5, 1), 0)
        .unwrap();
    assert_eq!(
        retry.base_offset, 5,
        "the retry is recognised after the restart"
    );
    assert_eq!(reopened.log_end_offset(), 6);
    assert_eq!(
        reopened
            .append(&idempotent_batch(7, 1, 1, 6, 1), 0)
            .unwrap()
            .base_offset,
        6
    );
    reopened.wait_durable(6).await.unwrap();
    assert_eq!(read_all(&reopened, 0), values(0..7));
}

#[tokio::test]
async fn the_producer_state_comes_from_the_snapshot_and_the_tail_only() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 400,
        ..LogConfig::default()
    };
    let partition = open(dir.path(), config.clone());
    for n in 0..4 {
        partition
            .append(&idempotent_batch(7, 0, n, n as usize, 1), 0)
            .unwrap();
    }
    // A plain batch that does not fit: the segment of producer 7's batches closes.
    partition.append(&batch(4, 1, 0), 0).unwrap();
    let closed_through = partition.active_segment_base();
    assert_eq!(
        closed_through, 4,
        "the test needs producer 7's batches in one closed segment"
    );
    partition.wait_durable(4).await.unwrap();
    drop(partition); // no clean shutdown: only the snapshot written when the segment closed

    // Erase the producer id from the closed segment's headers: reading them now tells
    // nothing of producer 7, so only the snapshot can.
    let log = dir.path().join("00000000000000000000.log");
    let mut bytes = fs::read(&log).unwrap();
    let mut at = 0;
    while at + 61 <= bytes.len() {
        let size = 12 + i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        bytes[at + 43..at + 51].copy_from_slice(&(-1i64).to_be_bytes());
        at += size;
    }
    fs::write(&log, &bytes).unwrap();

    let last = closed_through - 1;
    let retry = || idempotent_batch(7, 0, last as i32, last as usize, 1);
    let reopened = open(dir.path(), config.clone());
    let again = reopened.append(&retry(), 0).unwrap();
    assert_eq!(
        again.base_offset, last,
        "the snapshot knew producer 7's last batch"
    );
    assert_eq!(
        reopened.log_end_offset(),
        closed_through + 1,
        "nothing was written again"
    );
    drop(reopened);

    // Without the snapshot the same retry is not recognised: the test tells the two apart.
    for entry in fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "snapshot") {
            fs::remove_file(path).unwrap();
        }
    }
    let without = open(dir.path(), config);
    assert!(matches!(
        without.append(&retry(), 0),
        Err(StorageError::OutOfOrderSequence { .. })
    ));
}
