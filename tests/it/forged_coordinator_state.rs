//! Clients that try to forge or poison the coordinators' state, against a real broker
//! (embedded, or the one `EDDY_TEST_BOOTSTRAP` names, as `.ci/run` does with Apache Kafka):
//!
//! - ids longer than a string field may be (32,767 bytes) through every API that takes one:
//!   Kafka refuses such a request as malformed and closes the connection, and so must eddy.
//!   Stored with a narrowed length, `"x" * 65,536 + "victim"` would have read back as the
//!   group or transactional id `"victim"` after a restart;
//! - produce into the internal topics, which only the coordinators write;
//!
//! then (the embedded broker only) a restart: the broker starts, and no other group or
//! transaction changed.

use bytes::Bytes;
use eddy_tests::{wait_until, TestBroker, WireConnection};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Request, StrBytes};

/// The longest string a Kafka request may carry.
const LONGEST: usize = i16::MAX as usize;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Stands in a request for the over-long id, which the codec refuses to encode: it is put in
/// its place on the wire.
const PLACEHOLDER: &str = "over-long-id-placeholder";

fn placeholder() -> StrBytes {
    text(PLACEHOLDER)
}

/// An id that an i16 length cast would store as `victim`.
fn forged(victim: &str) -> Vec<u8> {
    format!("{}{victim}", "x".repeat(65_536)).into_bytes()
}

fn commit_request(group: StrBytes, topic: StrBytes, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(group))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(topic))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])])
}

/// Commits `offset` for partition 0 of `topic` from outside the group: the error code.
async fn commit(bootstrap: &str, group: &str, topic: &str, offset: i64) -> i16 {
    let mut conn = WireConnection::connect(bootstrap).await.unwrap();
    let response = conn
        .request(8, &commit_request(text(group), text(topic), offset))
        .await
        .unwrap();
    response.topics[0].partitions[0].error_code
}

/// The committed offset of partition 0 of `topic` (-1 for none).
async fn committed(bootstrap: &str, group: &str, topic: &str) -> i64 {
    let mut conn = WireConnection::connect(bootstrap).await.unwrap();
    let request =
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(TopicName(text(topic)))
                .with_partition_indexes(vec![0])]))]);
    let response = conn.request(8, &request).await.unwrap();
    let group = &response.groups[0];
    assert_eq!(group.error_code, 0);
    group.topics[0].partitions[0].committed_offset
}

/// The groups ListGroups names.
async fn listed_groups(bootstrap: &str) -> Vec<String> {
    let mut conn = WireConnection::connect(bootstrap).await.unwrap();
    let response = conn
        .request(4, &ListGroupsRequest::default())
        .await
        .unwrap();
    assert_eq!(response.error_code, 0);
    response
        .groups
        .iter()
        .map(|g| g.group_id.0.to_string())
        .collect()
}

/// Sends `request` at `version` on a connection of its own, with `id` in the placeholder's
/// place, and expects the broker to close it without an answer.
async fn refused<R: Request>(bootstrap: &str, what: &str, version: i16, request: R, id: &[u8]) {
    let mut conn = WireConnection::connect(bootstrap).await.unwrap();
    let answer = conn
        .request_replacing(version, &request, PLACEHOLDER, id)
        .await;
    assert!(
        answer.is_err(),
        "{what}: answered instead of closing the connection"
    );
}

fn join(group: StrBytes, instance: Option<StrBytes>) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(group))
        .with_group_instance_id(instance)
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(text("range"))
            .with_metadata(Bytes::from_static(b"\x00\x00"))])
}

/// Every API that takes a group id, transactional id, member or instance id, or topic, with
/// one that is too long.
async fn send_every_over_long_id(bootstrap: &str, victim: &str, topic: &str) {
    let group = || GroupId(placeholder());
    let txn = || TransactionalId(placeholder());
    let id = forged(victim);
    refused(
        bootstrap,
        "FindCoordinator v3",
        3,
        FindCoordinatorRequest::default().with_key(placeholder()),
        &id,
    )
    .await;
    refused(
        bootstrap,
        "FindCoordinator v4",
        4,
        FindCoordinatorRequest::default()
            .with_key_type(1)
            .with_coordinator_keys(vec![placeholder()]),
        &id,
    )
    .await;
    refused(bootstrap, "JoinGroup", 9, join(placeholder(), None), &id).await;
    refused(
        bootstrap,
        "JoinGroup with an over-long instance id",
        9,
        join(text(victim), Some(placeholder())),
        &id,
    )
    .await;
    refused(
        bootstrap,
        "SyncGroup",
        5,
        SyncGroupRequest::default()
            .with_group_id(group())
            .with_member_id(text("m"))
            .with_generation_id(1),
        &id,
    )
    .await;
    refused(
        bootstrap,
        "Heartbeat",
        4,
        HeartbeatRequest::default()
            .with_group_id(group())
            .with_member_id(text("m"))
            .with_generation_id(1),
        &id,
    )
    .await;
    refused(
        bootstrap,
        "LeaveGroup",
        5,
        LeaveGroupRequest::default()
            .with_group_id(group())
            .with_members(vec![MemberIdentity::default().with_member_id(placeholder())]),
        &id,
    )
    .await;
    refused(
        bootstrap,
        "OffsetCommit",
        8,
        commit_request(placeholder(), text(topic), 999),
        &id,
    )
    .await;
    refused(
        bootstrap,
        "OffsetCommit with an over-long topic",
        8,
        commit_request(text(victim), placeholder(), 999),
        &forged(topic),
    )
    .await;
    refused(
        bootstrap,
        "OffsetFetch",
        8,
        OffsetFetchRequest::default().with_groups(vec![
            OffsetFetchRequestGroup::default().with_group_id(group())
        ]),
        &id,
    )
    .await;
    refused(
        bootstrap,
        "DescribeGroups",
        5,
        DescribeGroupsRequest::default().with_groups(vec![group()]),
        &id,
    )
    .await;
    refused(
        bootstrap,
        "DeleteGroups",
        2,
        DeleteGroupsRequest::default().with_groups_names(vec![group()]),
        &id,
    )
    .await;
    refused(
        bootstrap,
        "InitProducerId",
        4,
        InitProducerIdRequest::default()
            .with_transactional_id(Some(txn()))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
        &id,
    )
    .await;
    refused(
        bootstrap,
        "AddPartitionsToTxn",
        3,
        AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn())
            .with_v3_and_below_producer_id(ProducerId(1))
            .with_v3_and_below_producer_epoch(0)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(text(topic)))
                .with_partitions(vec![0])]),
        &id,
    )
    .await;
    for (what, transactional_id, group_id) in [
        ("AddOffsetsToTxn", txn(), GroupId(text(victim))),
        (
            "AddOffsetsToTxn with an over-long group",
            TransactionalId(text(victim)),
            group(),
        ),
    ] {
        refused(
            bootstrap,
            what,
            3,
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(transactional_id)
                .with_group_id(group_id)
                .with_producer_id(ProducerId(1))
                .with_producer_epoch(0),
            &id,
        )
        .await;
    }
    refused(
        bootstrap,
        "EndTxn",
        3,
        EndTxnRequest::default()
            .with_transactional_id(txn())
            .with_producer_id(ProducerId(1))
            .with_producer_epoch(0)
            .with_committed(true),
        &id,
    )
    .await;
    refused(
        bootstrap,
        "TxnOffsetCommit",
        3,
        TxnOffsetCommitRequest::default()
            .with_transactional_id(txn())
            .with_group_id(group())
            .with_producer_id(ProducerId(1))
            .with_producer_epoch(0)
            .with_generation_id(-1)
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(text(topic)))
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(999)])]),
        &id,
    )
    .await;
}

#[tokio::test]
async fn over_long_ids_are_refused_on_every_api_and_change_no_other_group() {
    let mut broker = TestBroker::start().await;
    let topic = broker.create_topic("orders", 1).await;
    let victim = broker.unique("victim");
    let longest = format!("{}{}", "g".repeat(LONGEST - victim.len()), victim);
    assert_eq!(commit(broker.bootstrap(), &victim, &topic, 5).await, 0);

    send_every_over_long_id(broker.bootstrap(), &victim, &topic).await;

    // The longest id a request may carry is served, and stored as itself.
    assert_eq!(commit(broker.bootstrap(), &longest, &topic, 6).await, 0);
    let check = |bootstrap: String| {
        let (victim, longest, topic) = (victim.clone(), longest.clone(), topic.clone());
        async move {
            assert_eq!(committed(&bootstrap, &victim, &topic).await, 5);
            assert_eq!(committed(&bootstrap, &longest, &topic).await, 6);
            let groups = listed_groups(&bootstrap).await;
            assert!(groups.contains(&victim), "{victim} not listed");
            assert!(groups.contains(&longest), "the longest group is not listed");
        }
    };
    check(broker.bootstrap().to_string()).await;
    if broker.restart().await {
        check(broker.bootstrap().to_string()).await;
    }
}

#[tokio::test]
async fn clients_cannot_produce_into_the_internal_topics() {
    let mut broker = TestBroker::start().await;
    let topic = broker.create_topic("orders", 1).await;
    let victim = broker.unique("victim");
    assert_eq!(commit(broker.bootstrap(), &victim, &topic, 5).await, 0);
    // Kafka creates __transaction_state on first use: wait until it has.
    let mut conn = WireConnection::connect(broker.bootstrap()).await.unwrap();
    let lookup = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![text(&victim)]);
    let within = std::time::Duration::from_secs(30);
    wait_until(within, "no transaction coordinator", async || {
        conn.request(4, &lookup).await.unwrap().coordinators[0].error_code == 0
    })
    .await;

    // A forged commit of 999 for the victim, and a record no coordinator can read.
    let key = [
        &1i16.to_be_bytes()[..],
        &i16::try_from(victim.len()).unwrap().to_be_bytes(),
        victim.as_bytes(),
        &i16::try_from(topic.len()).unwrap().to_be_bytes(),
        topic.as_bytes(),
        &0i32.to_be_bytes(),
    ]
    .concat();
    let value = [
        &3i16.to_be_bytes()[..],
        &999i64.to_be_bytes(),
        &(-1i32).to_be_bytes(),
        &0i16.to_be_bytes(),
        &0i64.to_be_bytes(),
    ]
    .concat();
    let mut batch =
        eddy_core::wire::batch::BatchBuilder::new(eddy_core::wire::compression::Compression::None);
    batch.append_parts(Some(&key), Some(&value), &[], 1);
    batch.append_parts(Some(b"\x00\x09garbage"), Some(b"garbage"), &[], 1);
    let batch = Bytes::from(batch.build(0).unwrap());
    for internal in ["__consumer_offsets", "__transaction_state"] {
        for partition in [0, 1] {
            let request = ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(5_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(TopicName(text(internal)))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(batch.clone()))])]);
            let response = conn.request(9, &request).await.unwrap();
            let answer = &response.responses[0].partition_responses[0];
            assert_eq!(
                answer.error_code,
                ResponseError::InvalidTopicException.code(),
                "produce to {internal}-{partition}"
            );
        }
    }
    assert_eq!(committed(broker.bootstrap(), &victim, &topic).await, 5);
    if broker.restart().await {
        assert_eq!(committed(broker.bootstrap(), &victim, &topic).await, 5);
    }
}
