//! Transactions in the storage engine on real files: the last stable offset, markers, the
//! aborted-transaction index across restarts and rolls, verification of a producer's first
//! batch in a partition, and compaction of transactional records.

use std::path::Path;

use eddy_core::log::{Record, TopicPartition};
use eddy_core::wire::batch::{control_batch, BatchBuilder, ControlType};
use eddy_core::wire::compression::Compression;

use super::*;
use crate::storage::log::AppendInfo;

fn open(dir: &Path, config: LogConfig) -> Partition {
    Partition::open(TopicPartition::new("payments", 0), dir, config, 0).unwrap()
}

/// A transactional batch of `count` records keyed `key`.
fn txn_batch(producer: i64, sequence: i32, key: &str, count: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None)
        .producer(producer, 0, sequence)
        .transactional();
    for i in 0..count {
        builder.append(&Record::new(
            key.to_string(),
            format!("{producer}-{key}-{i}"),
            0,
        ));
    }
    builder.build(0).unwrap()
}

/// A batch of one record of a producer that is not transactional.
fn plain(key: String, value: String) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    builder.append(&Record::new(key, value, 0));
    builder.build(0).unwrap()
}

/// Every appended offset made durable.
async fn make_durable(partition: &Partition) {
    let last = partition.log_end_offset() - 1;
    partition.wait_durable(last).await.unwrap();
}

fn compacted() -> LogConfig {
    LogConfig {
        compact: true,
        segment_bytes: 250,
        ..LogConfig::default()
    }
}

fn allow(_: i64, _: i16) -> Result<(), StorageError> {
    Ok(())
}

fn produce(partition: &Partition, batch: &[u8]) -> AppendInfo {
    partition
        .append_from(batch, 0, Origin::Client { verify: &allow })
        .unwrap()
}

fn end(partition: &Partition, producer: i64, marker: ControlType) -> AppendInfo {
    partition
        .append_from(
            &control_batch(producer, 0, marker, 0, 0),
            0,
            Origin::Coordinator,
        )
        .unwrap()
}

fn aborted(partition: &Partition) -> Vec<(i64, i64, i64)> {
    partition
        .aborted_transactions(0, i64::MAX)
        .iter()
        .map(|a| (a.producer_id, a.first_offset, a.last_offset))
        .collect()
}

#[tokio::test]
async fn the_last_stable_offset_follows_open_transactions_and_markers() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), LogConfig::default());
    produce(&partition, &txn_batch(1, 0, "a", 2)); // 0..=1
    produce(&partition, &txn_batch(2, 0, "b", 2)); // 2..=3
    partition.wait_durable(3).await.unwrap();
    assert_eq!(partition.high_watermark(), 4);
    assert_eq!(
        partition.last_stable_offset(),
        0,
        "producer 1's transaction is open"
    );
    let commit = end(&partition, 1, ControlType::Commit); // 4
    assert_eq!(
        partition.last_stable_offset(),
        0,
        "the marker is not durable yet"
    );
    partition.wait_durable(commit.last_offset).await.unwrap();
    assert_eq!(
        partition.last_stable_offset(),
        2,
        "producer 2's transaction holds it"
    );
    let abort = end(&partition, 2, ControlType::Abort); // 5
    partition.wait_durable(abort.last_offset).await.unwrap();
    assert_eq!(partition.last_stable_offset(), 6);
    assert_eq!(aborted(&partition), vec![(2, 2, 5)]);
    assert!(partition.aborted_transactions(6, 10).is_empty());
    // Client batches may not be markers.
    assert!(matches!(
        partition.append_from(
            &control_batch(1, 0, ControlType::Commit, 0, 0),
            0,
            Origin::Client { verify: &allow }
        ),
        Err(StorageError::InvalidBatch(_))
    ));
}

#[tokio::test]
async fn a_transactional_batch_opening_a_transaction_is_verified_first() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), LogConfig::default());
    // Not added to the transaction: refused, nothing written.
    assert!(matches!(
        partition.append(&txn_batch(1, 0, "a", 1), 0),
        Err(StorageError::NotInTransaction { producer_id: 1 })
    ));
    assert_eq!(partition.log_end_offset(), 0);
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let counting = |_: i64, _: i16| {
        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    };
    for sequence in 0..3 {
        partition
            .append_from(
                &txn_batch(1, sequence, "a", 1),
                0,
                Origin::Client { verify: &counting },
            )
            .unwrap();
    }
    assert_eq!(
        calls.into_inner(),
        1,
        "only the batch that opens the transaction is verified"
    );
    end(&partition, 1, ControlType::Commit);
    // The next transaction is verified again.
    assert!(partition.append(&txn_batch(1, 3, "a", 1), 0).is_err());
    // A marker from an older epoch than the partition has seen is refused.
    partition
        .append_from(
            &control_batch(1, 4, ControlType::Abort, 0, 0),
            0,
            Origin::Coordinator,
        )
        .unwrap();
    assert!(matches!(
        partition.append_from(
            &control_batch(1, 3, ControlType::Abort, 0, 0),
            0,
            Origin::Coordinator
        ),
        Err(StorageError::InvalidProducerEpoch { current: 4, .. })
    ));
}

#[tokio::test]
async fn open_and_aborted_transactions_survive_restarts_rolls_and_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 300,
        ..LogConfig::default()
    };
    let partition = open(dir.path(), config.clone());
    let mut expected = Vec::new();
    for producer in 0..6i64 {
        let first = produce(&partition, &txn_batch(producer, 0, "k", 2)).base_offset;
        let marker = if producer % 2 == 0 {
            ControlType::Abort
        } else {
            ControlType::Commit
        };
        let m = end(&partition, producer, marker);
        if marker == ControlType::Abort {
            expected.push((producer, first, m.last_offset));
        }
    }
    let open_first = produce(&partition, &txn_batch(9, 0, "k", 1)).base_offset;
    let last = partition.log_end_offset() - 1;
    partition.wait_durable(last).await.unwrap();
    assert!(
        partition.active_segment_base() > 0,
        "the test needs closed segments"
    );
    assert_eq!(aborted(&partition), expected);
    assert_eq!(partition.last_stable_offset(), open_first);
    // A crash: no clean shutdown.
    drop(partition);
    let reopened = open(dir.path(), config.clone());
    assert_eq!(aborted(&reopened), expected);
    assert_eq!(reopened.last_stable_offset(), open_first);
    assert!(reopened.has_open_transaction(9));
    // A clean shutdown, then a restart.
    reopened.close().unwrap();
    drop(reopened);
    let again = open(dir.path(), config.clone());
    assert_eq!(aborted(&again), expected);
    assert_eq!(again.last_stable_offset(), open_first);
    drop(again);
    // Damaged index files: the log is read again and tells the same.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "txnindex") {
            std::fs::write(path, b"garbage").unwrap();
        }
    }
    let rebuilt = open(dir.path(), config.clone());
    assert_eq!(aborted(&rebuilt), expected);
    assert_eq!(rebuilt.last_stable_offset(), open_first);
    drop(rebuilt);
    // The rebuild wrote the index files again.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "txnindex") {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                super::transactions::Transactions::decode_index(&bytes).is_some(),
                "{} is still damaged",
                path.display()
            );
        }
    }
    assert_eq!(aborted(&open(dir.path(), config)), expected);
}

#[tokio::test]
async fn compaction_drops_aborted_records_and_spares_open_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), compacted());
    // "k" committed, then overwritten by an aborted transaction: "k" must keep its value.
    produce(&partition, &txn_batch(1, 0, "k", 1));
    end(&partition, 1, ControlType::Commit);
    produce(&partition, &txn_batch(2, 0, "k", 1));
    end(&partition, 2, ControlType::Abort);
    for i in 0..6 {
        partition
            .append(&plain(format!("filler-{i}"), "x".into()), 0)
            .unwrap();
    }
    make_durable(&partition).await;
    let stats = partition.compact(0).unwrap();
    assert_eq!(
        stats.records_removed, 1,
        "only the aborted record goes: {stats:?}"
    );
    let fetched = partition.read(0, 1 << 20).unwrap();
    let mut values = Vec::new();
    for item in eddy_core::wire::batch::Batches::new(&fetched.records) {
        let (header, bytes) = item.unwrap();
        if header.is_control() {
            continue;
        }
        let (_, records) =
            eddy_core::wire::batch::decode_records(&bytes::Bytes::copy_from_slice(bytes), 1 << 20)
                .unwrap();
        values.extend(records.into_iter().filter_map(|r| r.record.value));
    }
    let values: Vec<_> = values
        .iter()
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    assert_eq!(
        values.first().map(String::as_str),
        Some("1-k-0"),
        "{values:?}"
    );
    assert!(!values.iter().any(|v| v == "2-k-0"), "{values:?}");

    // An open transaction in a closed segment keeps that segment out of compaction.
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), compacted());
    produce(&partition, &txn_batch(3, 0, "k", 1));
    for i in 0..6 {
        partition
            .append(&plain("k".into(), format!("plain-{i}")), 0)
            .unwrap();
    }
    make_durable(&partition).await;
    assert!(partition.active_segment_base() > 0);
    assert_eq!(partition.compact(0).unwrap().records_removed, 0);
}
