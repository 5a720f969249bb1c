//! The transaction coordinator on real partition logs: transactions from InitProducerId to
//! their markers, transactional offset commits, a crash between decision and markers, and
//! the timeout.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use eddy_core::log::{Record, TopicPartition};
use eddy_core::wire::batch::{control_type, BatchBuilder, ControlType};
use eddy_core::wire::compression::Compression;

use super::*;
use crate::clock::Clock;
use crate::group::{GroupConfig, GroupCoordinator, OffsetValue, OFFSETS_TOPIC};
use crate::storage::{LogConfig, LogStore, Origin, Partition, StorageError};
use crate::txn::state::TxnState;

/// A broker's worth of coordinators over the logs in `dir`: 3 partitions of each internal
/// topic and a user topic `orders` with 2.
struct Coordinators {
    logs: Arc<LogStore>,
    groups: Arc<GroupCoordinator>,
    txns: Arc<TransactionCoordinator>,
}

fn open(dir: &Path, config: TxnConfig) -> Coordinators {
    let logs = Arc::new(LogStore::new(dir).unwrap());
    let internal = |topic: &str| -> Vec<Arc<Partition>> {
        (0..3)
            .map(|p| {
                logs.open_partition(TopicPartition::new(topic, p), LogConfig::default(), 0)
                    .unwrap()
            })
            .collect()
    };
    for p in 0..2 {
        logs.open_partition(TopicPartition::new("orders", p), LogConfig::default(), 0)
            .unwrap();
    }
    let clock = Clock::new();
    let groups = Arc::new(
        GroupCoordinator::open(GroupConfig::default(), clock, internal(OFFSETS_TOPIC)).unwrap(),
    );
    let ids = Arc::new(ProducerIds::open(dir).unwrap());
    let txns = TransactionCoordinator::open(
        config,
        clock,
        internal(TRANSACTION_STATE_TOPIC),
        Arc::clone(&logs),
        Arc::clone(&groups),
        ids,
    )
    .unwrap();
    Coordinators {
        logs,
        groups,
        txns: Arc::new(txns),
    }
}

impl Coordinators {
    fn orders(&self, p: i32) -> Arc<Partition> {
        self.logs.get(&TopicPartition::new("orders", p)).unwrap()
    }

    /// A transactional produce of `count` records to orders-`p`, verified as the produce
    /// handler does.
    fn produce(
        &self,
        producer: (i64, i16),
        sequence: i32,
        p: i32,
        count: usize,
    ) -> Result<(), StorageError> {
        let mut builder = BatchBuilder::new(Compression::None)
            .producer(producer.0, producer.1, sequence)
            .transactional();
        for i in 0..count {
            builder.append(&Record::new("k", format!("v{i}"), 0));
        }
        let verify = |id: i64, epoch: i16| self.txns.verify(id, epoch, "orders", p);
        let partition = self.orders(p);
        partition.append_from(
            &builder.build(0).unwrap(),
            0,
            Origin::Client { verify: &verify },
        )?;
        Ok(())
    }
}

/// The coordinators in `dir`, and a producer of transactional id `id` just initialised.
async fn started(dir: &Path, id: &str, timeout_ms: i32) -> (Coordinators, (i64, i16)) {
    let c = open(dir, TxnConfig::default());
    let producer = c.txns.init_producer_id(id, timeout_ms, None).await.unwrap();
    (c, producer)
}

fn orders(p: i32) -> (String, i32) {
    ("orders".to_string(), p)
}

/// The markers in a partition: (producer id, epoch, is commit).
fn markers(partition: &Partition) -> Vec<(i64, i16, bool)> {
    let mut found = Vec::new();
    partition
        .replay(|header, records| {
            if header.is_control() {
                let commit = control_type(&records[0].record) == Some(ControlType::Commit);
                found.push((header.producer_id, header.producer_epoch, commit));
            }
        })
        .unwrap();
    found
}

#[tokio::test]
async fn a_transaction_commits_through_markers_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (c, producer) = started(dir.path(), "copier", 60_000).await;
    assert_eq!(producer.1, 0);
    // Not yet added: refused.
    assert!(matches!(
        c.produce(producer, 0, 0, 3),
        Err(StorageError::NotInTransaction { .. })
    ));
    c.txns
        .add_partitions("copier", producer, &[orders(0), orders(1)])
        .await
        .unwrap();
    c.produce(producer, 0, 0, 3).unwrap();
    c.produce(producer, 0, 1, 2).unwrap();
    c.orders(0).wait_durable(2).await.unwrap();
    assert_eq!(c.orders(0).last_stable_offset(), 0);
    assert_eq!(c.txns.describe("copier").unwrap().state, TxnState::Ongoing);
    c.txns
        .end_transaction("copier", producer, true)
        .await
        .unwrap();
    for p in 0..2 {
        assert_eq!(markers(&c.orders(p)), vec![(producer.0, 0, true)]);
        assert_eq!(
            c.orders(p).last_stable_offset(),
            c.orders(p).high_watermark()
        );
    }
    // A retried EndTxn succeeds; an abort of a committed transaction does not.
    c.txns
        .end_transaction("copier", producer, true)
        .await
        .unwrap();
    assert_eq!(
        c.txns.end_transaction("copier", producer, false).await,
        Err(super::TxnError::InvalidTxnState)
    );
    // After the transaction, its partitions are closed to the producer again.
    assert!(c.produce(producer, 5, 0, 1).is_err());
    drop(c);

    let again = open(dir.path(), TxnConfig::default());
    let txn = again.txns.describe("copier").unwrap();
    assert_eq!(
        (txn.state, txn.producer_id, txn.producer_epoch),
        (TxnState::CompleteCommit, producer.0, 0)
    );
    // The next producer of the id gets the next epoch, and the id keeps its producer id.
    assert_eq!(
        again.txns.init_producer_id("copier", 60_000, None).await,
        Ok((producer.0, 1))
    );
}

#[tokio::test]
async fn offsets_committed_in_a_transaction_show_when_it_commits() {
    let dir = tempfile::tempdir().unwrap();
    let (c, producer) = started(dir.path(), "copier", 60_000).await;
    let offsets_partition = c.txns.offsets_partition("readers");
    let commit = |offset: i64| {
        let (topic, partition) = offsets_partition.clone();
        let txns = Arc::clone(&c.txns);
        let verify: crate::storage::Verify =
            Arc::new(move |id: i64, epoch: i16| txns.verify(id, epoch, &topic, partition));
        let value = OffsetValue {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        };
        // Checked and queued now; the future waits for the record and holds the offset.
        c.groups.commit_transactional_offsets(
            "readers",
            producer,
            -1,
            "",
            None,
            vec![("input".to_string(), 0, value)],
            verify,
        )
    };
    let committed = |c: &Coordinators| {
        c.groups
            .fetch_offsets("readers", Some(vec![("input".into(), 0)]))[0]
            .2
            .as_ref()
            .map(|o| o.offset)
    };
    // Before AddOffsetsToTxn the group's partition is not in the transaction.
    assert_eq!(
        commit(10).await,
        Err(crate::group::GroupError::InvalidTxnState)
    );
    c.txns
        .add_partitions("copier", producer, std::slice::from_ref(&offsets_partition))
        .await
        .unwrap();
    commit(10).await.unwrap();
    assert_eq!(committed(&c), None, "pending until the transaction commits");
    assert!(c.groups.has_pending_offset("readers", "input", 0));
    c.txns
        .end_transaction("copier", producer, true)
        .await
        .unwrap();
    assert_eq!(committed(&c), Some(10));

    // Two commits of one transaction whose replies are waited for in the other order: the
    // later commit's offset is the one held, and the one that shows.
    c.txns
        .add_partitions("copier", producer, std::slice::from_ref(&offsets_partition))
        .await
        .unwrap();
    let (earlier, later) = (commit(14), commit(15));
    later.await.unwrap();
    earlier.await.unwrap();
    c.txns
        .end_transaction("copier", producer, true)
        .await
        .unwrap();
    assert_eq!(committed(&c), Some(15));

    // An aborted transaction's offsets never show, not even after a replay.
    c.txns
        .add_partitions("copier", producer, std::slice::from_ref(&offsets_partition))
        .await
        .unwrap();
    commit(20).await.unwrap();
    c.txns
        .end_transaction("copier", producer, false)
        .await
        .unwrap();
    assert_eq!(committed(&c), Some(15));
    drop(c);
    let again = open(dir.path(), TxnConfig::default());
    assert_eq!(committed(&again), Some(15));
    assert!(!again.groups.has_pending_offset("readers", "input", 0));
}

#[tokio::test]
async fn a_commit_decided_before_a_crash_is_completed_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (c, producer) = started(dir.path(), "copier", 60_000).await;
    c.txns
        .add_partitions("copier", producer, &[orders(0)])
        .await
        .unwrap();
    c.produce(producer, 0, 0, 2).unwrap();
    // The decision is stored; the broker dies before any marker is written.
    let prepared = c.txns.describe("copier").unwrap();
    let super::state::EndStep::Prepare(prepared) = prepared.end_step(true, 0).unwrap() else {
        panic!("an open transaction is prepared");
    };
    c.txns.store("copier", prepared, true).await.unwrap();
    assert!(markers(&c.orders(0)).is_empty());
    drop(c);

    let again = open(dir.path(), TxnConfig::default());
    assert_eq!(
        again.txns.describe("copier").unwrap().state,
        TxnState::PrepareCommit
    );
    // Until it is completed, a new producer of the id is told to retry.
    assert_eq!(
        again.txns.init_producer_id("copier", 60_000, None).await,
        Err(super::TxnError::ConcurrentTransactions)
    );
    again.txns.settle().await;
    assert_eq!(markers(&again.orders(0)), vec![(producer.0, 0, true)]);
    assert_eq!(
        again.txns.describe("copier").unwrap().state,
        TxnState::CompleteCommit
    );
    let orders0 = again.orders(0);
    assert_eq!(orders0.last_stable_offset(), orders0.high_watermark());
}

#[tokio::test(start_paused = true)]
async fn a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let (c, producer) = started(dir.path(), "slow", 60_000).await;
    c.txns
        .add_partitions("slow", producer, &[orders(1)])
        .await
        .unwrap();
    c.produce(producer, 0, 1, 1).unwrap();
    c.txns.settle().await;
    assert_eq!(
        c.txns.describe("slow").unwrap().state,
        TxnState::Ongoing,
        "not yet"
    );
    // The coordinator's clock is tokio's: a minute passes without waiting for it.
    tokio::time::advance(Duration::from_millis(59_000)).await;
    c.txns.settle().await;
    assert_eq!(c.txns.describe("slow").unwrap().state, TxnState::Ongoing);
    tokio::time::advance(Duration::from_millis(2_000)).await;
    c.txns.settle().await;
    let txn = c.txns.describe("slow").unwrap();
    assert_eq!(
        (txn.state, txn.producer_epoch),
        (TxnState::CompleteAbort, 1)
    );
    assert_eq!(markers(&c.orders(1)), vec![(producer.0, 1, false)]);
    assert_eq!(c.orders(1).aborted_transactions(0, i64::MAX).len(), 1);
    // The timed-out producer is fenced everywhere.
    assert!(matches!(
        c.produce(producer, 1, 1, 1),
        Err(StorageError::InvalidProducerEpoch { .. })
    ));
    assert_eq!(
        c.txns.end_transaction("slow", producer, true).await,
        Err(super::TxnError::ProducerFenced)
    );
    // Timeouts above the broker's maximum are refused.
    assert_eq!(
        c.txns.init_producer_id("greedy", 3_600_000, None).await,
        Err(super::TxnError::InvalidTransactionTimeout)
    );
}
