//! A failed fsync takes a partition offline: nothing is appended, made durable or read until
//! the log is opened again (a restart), which serves what is on disk.

use std::path::Path;

use eddy_core::log::{Record, TopicPartition};
use eddy_core::wire::batch::BatchBuilder;
use eddy_core::wire::compression::Compression;

use super::*;

fn batch(value: &str) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    builder.append(&Record::new("k", value.to_string(), 0));
    builder.build(0).unwrap()
}

fn open(dir: &Path, faults: &StorageFaults, config: LogConfig) -> Partition {
    Partition::open(TopicPartition::new("orders", 0), dir, config, 0)
        .unwrap()
        .with_faults(faults)
}

#[tokio::test]
async fn a_failed_fsync_takes_the_partition_offline_until_it_is_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let faults = StorageFaults::default();
    let partition = open(dir.path(), &faults, LogConfig::default());
    let first = partition.append(&batch("durable"), 0).unwrap();
    partition.wait_durable(first.last_offset).await.unwrap();

    let second = partition.append(&batch("unsure"), 0).unwrap();
    faults.fail_fsyncs(true);
    let failed = partition.wait_durable(second.last_offset).await;
    assert!(
        matches!(failed, Err(StorageError::FsyncFailed(_))),
        "{failed:?}"
    );
    // The disk seems fine again, but a retried fsync could succeed without the lost pages:
    // the partition stays offline.
    faults.fail_fsyncs(false);
    assert!(matches!(
        partition.wait_durable(second.last_offset).await,
        Err(StorageError::Offline)
    ));
    assert!(matches!(
        partition.append(&batch("later"), 0),
        Err(StorageError::Offline)
    ));
    assert!(matches!(
        partition.locate(0, 1 << 20),
        Err(StorageError::Offline)
    ));
    assert_eq!(partition.high_watermark(), first.last_offset + 1);

    drop(partition);
    let reopened = open(dir.path(), &faults, LogConfig::default());
    // What reached the disk is served again, and appends go on after it.
    assert_eq!(reopened.log_end_offset(), second.last_offset + 1);
    let third = reopened.append(&batch("after the restart"), 0).unwrap();
    reopened.wait_durable(third.last_offset).await.unwrap();
    assert_eq!(third.base_offset, second.last_offset + 1);
}

#[tokio::test]
async fn a_segment_roll_whose_fsync_fails_takes_the_partition_offline() {
    let dir = tempfile::tempdir().unwrap();
    let faults = StorageFaults::default();
    let config = LogConfig {
        segment_bytes: 1,
        ..LogConfig::default()
    };
    let partition = open(dir.path(), &faults, config);
    partition.append(&batch("fills the segment"), 0).unwrap();
    faults.fail_fsyncs(true);
    let rolled = partition.append(&batch("rolls"), 0);
    assert!(
        matches!(rolled, Err(StorageError::FsyncFailed(_))),
        "{rolled:?}"
    );
    faults.fail_fsyncs(false);
    assert!(matches!(
        partition.append(&batch("later"), 0),
        Err(StorageError::Offline)
    ));
}
