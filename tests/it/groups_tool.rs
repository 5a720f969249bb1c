//! `eddy groups` against a running broker: `describe` shows known offsets and lag in Kafka's
//! table (a snapshot), `reset-offsets --to-datetime` makes the group re-read exactly the
//! records at or after that time, and a group with members is not reset.

use std::collections::BTreeMap;

use bytes::Bytes;
use eddy::client::{Admin, GroupState};
use eddy::embedded::EmbeddedBroker;
use eddy::internals::tools::groups::{self, GroupsError, ResetTarget};
use eddy::internals::tools::parse_datetime;
use eddy_core::log::{Record, TopicPartition};
use eddy_core::wire::batch::{decode_records, BatchBuilder, Batches};
use eddy_core::wire::compression::Compression;
use eddy_tests::WireConnection;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    CreateTopicsRequest, FetchRequest, GroupId, JoinGroupRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const BASE: i64 = 1_795_946_400_000; // 2026-11-29T10:00:00Z

/// A topic of 3 partitions; record i goes to partition i % 3 with timestamp BASE + i minutes.
async fn orders(broker: &EmbeddedBroker) -> WireConnection {
    let mut conn = WireConnection::connect(&broker.bootstrap()).await.unwrap();
    let topic = TopicName(StrBytes::from_static_str("orders"));
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic.clone())
        .with_num_partitions(3)
        .with_replication_factor(1)]);
    conn.request(7, &create).await.unwrap();
    for i in 0..30i64 {
        let mut batch = BatchBuilder::new(Compression::None);
        batch.append(&Record::new(
            format!("order-{i}"),
            format!("{i}"),
            BASE + i * 60_000,
        ));
        let produce = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic.clone())
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index((i % 3) as i32)
                    .with_records(Some(Bytes::from(batch.build(0).unwrap())))])]);
        conn.request(9, &produce).await.unwrap();
    }
    conn
}

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("orders", p)
}

#[tokio::test]
async fn describe_shows_offsets_and_lag() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let _conn = orders(&broker).await;
    let admin = Admin::connect(&broker.bootstrap()).await.unwrap();
    admin
        .alter_group_offsets("billing", &BTreeMap::from([(tp(0), 10), (tp(1), 4)]))
        .await
        .unwrap();
    let text = groups::describe(&admin, "billing").await.unwrap();
    assert!(
        text.starts_with('\n'),
        "a blank line first, as Kafka's tool prints"
    );
    insta::assert_snapshot!(text.trim_start(), @r"
    Consumer group 'billing' has no active members.

    GROUP   TOPIC  PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    billing orders 0         10             10             0   -           -    -
    billing orders 1         4              10             6   -           -    -
    ");
    assert_eq!(groups::list(&admin).await.unwrap(), "billing\n");
    let unknown = groups::describe(&admin, "nobody").await.unwrap();
    assert_eq!(unknown, "\nConsumer group 'nobody' does not exist.\n");
    broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn reset_to_a_datetime_rereads_exactly_the_records_from_then() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let mut conn = orders(&broker).await;
    let admin = Admin::connect(&broker.bootstrap()).await.unwrap();
    let end: BTreeMap<_, _> = (0..3).map(|p| (tp(p), 10)).collect();
    admin.alter_group_offsets("billing", &end).await.unwrap();

    // Record 17 is at 10:17; everything from then on must come again.
    let at = parse_datetime("2026-11-29T10:17:00Z").unwrap();
    let dry = groups::reset_offsets(
        &admin,
        "billing",
        "orders",
        ResetTarget::Datetime(at),
        false,
    )
    .await
    .unwrap();
    assert!(dry.contains("NEW-OFFSET"), "{dry}");
    assert_eq!(
        admin.committed_offsets("billing").await.unwrap(),
        end,
        "a dry run changes nothing"
    );
    groups::reset_offsets(&admin, "billing", "orders", ResetTarget::Datetime(at), true)
        .await
        .unwrap();

    // Read on from the committed offsets: exactly records 17..30.
    let committed = admin.committed_offsets("billing").await.unwrap();
    let fetch = FetchRequest::default()
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("orders")))
            .with_partitions(
                (0..3)
                    .map(|p| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(committed[&tp(p)])
                            .with_partition_max_bytes(1 << 20)
                    })
                    .collect(),
            )]);
    let response = conn.request(12, &fetch).await.unwrap();
    let mut again = Vec::new();
    for p in &response.responses[0].partitions {
        let records = p.records.clone().unwrap();
        for item in Batches::new(&records) {
            let (_, bytes) = item.unwrap();
            let (_, decoded) = decode_records(&records.slice_ref(bytes), 1 << 20).unwrap();
            for r in decoded
                .into_iter()
                .filter(|r| r.offset >= committed[&tp(p.partition_index)])
            {
                again.push(
                    String::from_utf8(r.record.value.unwrap().to_vec())
                        .unwrap()
                        .parse::<i64>()
                        .unwrap(),
                );
            }
        }
    }
    again.sort();
    assert_eq!(again, (17..30).collect::<Vec<_>>());

    // Shifting back by 2 from there, within the partitions' bounds.
    groups::reset_offsets(&admin, "billing", "orders", ResetTarget::ShiftBy(-2), true)
        .await
        .unwrap();
    let shifted = admin.committed_offsets("billing").await.unwrap();
    for p in 0..3 {
        assert_eq!(shifted[&tp(p)], (committed[&tp(p)] - 2).max(0));
    }
    broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_group_with_members_is_not_reset() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let mut conn = orders(&broker).await;
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("busy")))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(Bytes::new())]);
    assert_eq!(conn.request(3, &join).await.unwrap().error_code, 0);
    let admin = Admin::connect(&broker.bootstrap()).await.unwrap();
    let refused =
        groups::reset_offsets(&admin, "busy", "orders", ResetTarget::Earliest, true).await;
    assert!(
        matches!(&refused, Err(GroupsError::GroupActive { state, .. }) if *state == GroupState::CompletingRebalance),
        "{refused:?}"
    );
    broker.shutdown().await.unwrap();
}
