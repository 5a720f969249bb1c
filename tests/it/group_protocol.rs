//! The group protocol driven by hand on the wire, out of order and with stale or unknown
//! identities: every mistake gets Kafka's error code and the broker stays up.

use bytes::Bytes;
use eddy::embedded::EmbeddedBroker;
use eddy_tests::WireConnection;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, HeartbeatRequest, JoinGroupRequest,
    LeaveGroupRequest, OffsetCommitRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const UNKNOWN_MEMBER_ID: i16 = 25;
const ILLEGAL_GENERATION: i16 = 22;
const INVALID_SESSION_TIMEOUT: i16 = 26;
const MEMBER_ID_REQUIRED: i16 = 79;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const FENCED_INSTANCE_ID: i16 = 82;
const NON_EMPTY_GROUP: i16 = 68;
const GROUP_ID_NOT_FOUND: i16 = 69;
const INVALID_GROUP_ID: i16 = 24;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn join(
    group: &str,
    member: &str,
    instance: Option<&str>,
    session_ms: i32,
    protocol: &str,
) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(session_ms)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(member))
        .with_group_instance_id(instance.map(s))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s(protocol))
            .with_metadata(Bytes::from_static(b"subscription"))])
}

fn heartbeat(group: &str, member: &str, generation: i32) -> HeartbeatRequest {
    HeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_generation_id(generation)
}

#[tokio::test]
async fn mistakes_get_kafkas_error_codes() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let mut conn = WireConnection::connect(&broker.bootstrap()).await.unwrap();

    // SyncGroup and Heartbeat before any JoinGroup: the member is unknown.
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id(1)
        .with_member_id(s("nobody"));
    assert_eq!(
        conn.request(5, &sync).await.unwrap().error_code,
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        conn.request(4, &heartbeat("g", "nobody", 1))
            .await
            .unwrap()
            .error_code,
        UNKNOWN_MEMBER_ID
    );

    // Bad joins.
    assert_eq!(
        conn.request(7, &join("", "", None, 10_000, "range"))
            .await
            .unwrap()
            .error_code,
        INVALID_GROUP_ID
    );
    assert_eq!(
        conn.request(7, &join("g", "", None, 10, "range"))
            .await
            .unwrap()
            .error_code,
        INVALID_SESSION_TIMEOUT
    );
    assert_eq!(
        conn.request(7, &join("g", "made-up", None, 10_000, "range"))
            .await
            .unwrap()
            .error_code,
        UNKNOWN_MEMBER_ID
    );

    // A proper join (v4+: the member id first), a sync and heartbeats.
    let first = conn
        .request(7, &join("g", "", None, 10_000, "range"))
        .await
        .unwrap();
    assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
    let member = first.member_id.to_string();
    assert!(!member.is_empty());
    let joined = conn
        .request(7, &join("g", &member, None, 10_000, "range"))
        .await
        .unwrap();
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.leader.as_str(), member, "the only member leads");
    assert_eq!(joined.members.len(), 1, "the leader gets the members");
    let generation = joined.generation_id;
    let assignment = Bytes::from_static(b"partitions");
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id(generation)
        .with_member_id(s(&member))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(s(&member))
            .with_assignment(assignment.clone())]);
    let synced = conn.request(5, &sync).await.unwrap();
    assert_eq!((synced.error_code, synced.assignment), (0, assignment));
    assert_eq!(
        conn.request(4, &heartbeat("g", &member, generation))
            .await
            .unwrap()
            .error_code,
        0
    );
    assert_eq!(
        conn.request(4, &heartbeat("g", &member, generation + 1))
            .await
            .unwrap()
            .error_code,
        ILLEGAL_GENERATION
    );
    assert_eq!(
        conn.request(4, &heartbeat("g", "stranger", generation))
            .await
            .unwrap()
            .error_code,
        UNKNOWN_MEMBER_ID
    );

    // A commit from an old generation is refused; so is one from outside a group with members.
    let commit = |generation: i32, member: &str| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(s(member))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("__consumer_offsets")))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default().with_committed_offset(5)
                ])])
    };
    let stale = conn
        .request(8, &commit(generation - 1, &member))
        .await
        .unwrap();
    assert_eq!(stale.topics[0].partitions[0].error_code, ILLEGAL_GENERATION);
    let outsider = conn.request(8, &commit(-1, "")).await.unwrap();
    assert_eq!(
        outsider.topics[0].partitions[0].error_code,
        UNKNOWN_MEMBER_ID
    );
    let current = conn.request(8, &commit(generation, &member)).await.unwrap();
    assert_eq!(current.topics[0].partitions[0].error_code, 0);

    // A member offering no protocol the group speaks.
    let other = conn
        .request(7, &join("g", "", None, 10_000, "nonsense"))
        .await
        .unwrap();
    assert_eq!(other.error_code, INCONSISTENT_GROUP_PROTOCOL);

    // A group with members cannot be deleted; an unknown one is not found.
    let delete =
        |group: &str| DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(group))]);
    assert_eq!(
        conn.request(2, &delete("g")).await.unwrap().results[0].error_code,
        NON_EMPTY_GROUP
    );
    assert_eq!(
        conn.request(2, &delete("no-such")).await.unwrap().results[0].error_code,
        GROUP_ID_NOT_FOUND
    );

    // Leaving empties the group; then it can go.
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_members(vec![MemberIdentity::default().with_member_id(s(&member))]);
    let left = conn.request(5, &leave).await.unwrap();
    assert_eq!(left.members[0].error_code, 0);
    let described = conn
        .request(
            5,
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]),
        )
        .await
        .unwrap();
    assert_eq!(described.groups[0].group_state.as_str(), "Empty");
    assert_eq!(
        conn.request(2, &delete("g")).await.unwrap().results[0].error_code,
        0
    );
    broker.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_second_instance_with_the_same_id_fences_the_first() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let mut conn = WireConnection::connect(&broker.bootstrap()).await.unwrap();
    let first = conn
        .request(7, &join("s", "", Some("host-1"), 10_000, "range"))
        .await
        .unwrap();
    assert_eq!(
        first.error_code, 0,
        "a static member needs no MEMBER_ID_REQUIRED round"
    );
    let old = first.member_id.to_string();
    let second = conn
        .request(7, &join("s", "", Some("host-1"), 10_000, "range"))
        .await
        .unwrap();
    assert_eq!(second.error_code, 0);
    assert_ne!(second.member_id.to_string(), old);
    let fenced = conn
        .request(
            4,
            &heartbeat("s", &old, second.generation_id).with_group_instance_id(Some(s("host-1"))),
        )
        .await
        .unwrap();
    assert_eq!(fenced.error_code, FENCED_INSTANCE_ID);
    broker.shutdown().await.unwrap();
}
