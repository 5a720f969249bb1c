//! Transactions over the wire with eddy's own transactional load (`eddy bench
//! transactions`): every transaction commits with one marker per partition and none is left
//! open, a read_committed consumer never sees an open transaction's records, and
//! `eddy transactions` shows the producers and their open transactions.

use std::time::Duration;

use bytes::Bytes;
use eddy::client::Admin;
use eddy::embedded::EmbeddedBroker;
use eddy::internals::bench::{produce_transactionally, ProduceLoad};
use eddy::internals::tools::transactions;
use eddy_core::log::{Record, TopicPartition};
use eddy_core::wire::batch::BatchBuilder;
use eddy_core::wire::compression::Compression;
use eddy_tests::WireConnection;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, InitProducerIdRequest, ListOffsetsRequest, ProduceRequest,
    ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

const PARTITIONS: i32 = 3;

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// The latest offset of each partition of `topic` for `isolation` (0 uncommitted, 1 committed).
async fn ends(conn: &mut WireConnection, topic: &str, isolation: i8) -> Vec<i64> {
    let request = ListOffsetsRequest::default()
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(name(topic)))
            .with_partitions(
                (0..PARTITIONS)
                    .map(|p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(p)
                            .with_timestamp(-1)
                    })
                    .collect(),
            )]);
    let response = conn.request(5, &request).await.unwrap();
    response.topics[0]
        .partitions
        .iter()
        .map(|p| {
            assert_eq!(p.error_code, 0);
            p.offset
        })
        .collect()
}

#[tokio::test]
async fn transactions_commit_with_a_marker_in_each_partition_and_none_stays_open() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let load = ProduceLoad {
        topic: "payments".into(),
        partitions: PARTITIONS,
        records: 30_000,
        record_size: 100,
        batch_records: 500,
        in_flight: 4,
        acks: -1,
        compression: Compression::None,
    };
    let run = produce_transactionally(
        &broker.bootstrap(),
        &load,
        "payments-writer",
        Duration::from_millis(1),
    )
    .await
    .unwrap();
    let transactions = run.end_txn.len() as i64;
    assert!(transactions > 1, "the run needs several transactions");
    let mut conn = WireConnection::connect(&broker.bootstrap()).await.unwrap();
    let uncommitted = ends(&mut conn, "payments", 0).await;
    // Each transaction wrote to every partition, and ended there with one COMMIT marker.
    let expected = 30_000 / i64::from(PARTITIONS) + transactions;
    assert_eq!(uncommitted, vec![expected; PARTITIONS as usize]);
    assert_eq!(ends(&mut conn, "payments", 1).await, uncommitted);

    let admin = Admin::connect(&broker.bootstrap()).await.unwrap();
    insta::assert_snapshot!(transactions::list(&admin).await.unwrap(), @r"
    TransactionalId ProducerId TransactionState
    payments-writer 0          CompleteCommit
    ");
}

#[tokio::test]
async fn an_open_transaction_holds_back_read_committed_and_shows_in_describe() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let load = ProduceLoad {
        topic: "ledger".into(),
        partitions: PARTITIONS,
        records: 300,
        record_size: 10,
        batch_records: 10,
        in_flight: 1,
        acks: -1,
        compression: Compression::None,
    };
    // Creates the topic with committed records in it.
    produce_transactionally(
        &broker.bootstrap(),
        &load,
        "ledger-writer",
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    let mut conn = WireConnection::connect(&broker.bootstrap()).await.unwrap();
    let committed_before = ends(&mut conn, "ledger", 1).await;

    // Another producer opens a transaction in partition 1 and writes to it.
    let id = TransactionalId(name("ledger-slow"));
    let init = conn
        .request(
            3,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(id.clone()))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
        .await
        .unwrap();
    assert_eq!(init.error_code, 0);
    let added = conn
        .request(
            3,
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(id.clone())
                .with_v3_and_below_producer_id(init.producer_id)
                .with_v3_and_below_producer_epoch(init.producer_epoch)
                .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(name("ledger")))
                    .with_partitions(vec![1])]),
        )
        .await
        .unwrap();
    assert_eq!(
        added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
    let produce = |partition: i32| {
        let mut batch = BatchBuilder::new(Compression::None)
            .producer(init.producer_id.0, init.producer_epoch, 0)
            .transactional();
        batch.append(&Record::new("k", "pending", 0));
        ProduceRequest::default()
            .with_transactional_id(Some(id.clone()))
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(name("ledger")))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(Bytes::from(batch.build(0).unwrap())))])])
    };
    let written = conn.request(9, &produce(1)).await.unwrap();
    assert_eq!(written.responses[0].partition_responses[0].error_code, 0);
    // Partition 0 was not added to the transaction: refused (KIP-890), nothing written.
    let refused = conn.request(9, &produce(0)).await.unwrap();
    assert_eq!(
        refused.responses[0].partition_responses[0].error_code,
        kafka_protocol::error::ResponseError::InvalidTxnState.code()
    );

    let uncommitted = ends(&mut conn, "ledger", 0).await;
    assert_eq!(uncommitted[1], committed_before[1] + 1);
    assert_eq!(uncommitted[0], committed_before[0]);
    assert_eq!(
        ends(&mut conn, "ledger", 1).await,
        committed_before,
        "the open transaction holds the last stable offset back"
    );

    let admin = Admin::connect(&broker.bootstrap()).await.unwrap();
    let described = admin.describe_transaction("ledger-slow").await.unwrap();
    assert_eq!(described.state, "Ongoing");
    assert_eq!(described.partitions, vec![TopicPartition::new("ledger", 1)]);
    assert_eq!(described.timeout_ms, 60_000);
    let table = transactions::describe_table(&described, described.start_time_ms + 1500);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        row,
        [
            "ledger-slow",
            &init.producer_id.0.to_string(),
            "0",
            "Ongoing",
            "60000",
            &described.start_time_ms.to_string(),
            "1500",
            "ledger-1"
        ]
    );
    assert!(admin.describe_transaction("nobody").await.is_err());
}
