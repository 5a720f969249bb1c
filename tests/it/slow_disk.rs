//! A slow disk holds back only what waits for it: with every fsync made to take 300 ms and
//! every append 400 ms, a producer writing one topic with acks=all (into segments small enough
//! to roll at every other append) waits, and so does a consumer committing offsets for its
//! group; a heartbeat of another group and a fetch of another topic sent while both are under
//! way are answered at once. Appends, segment rolls and fsyncs run off the async workers, and
//! the group coordinator appends outside its lock, so neither a worker nor the coordinator
//! waits for the disk.

use std::time::{Duration, Instant};

use bytes::Bytes;
use eddy::client::{Admin, NewTopic, Producer, ProducerConfig, ProducerRecord};
use eddy::embedded::EmbeddedBroker;
use eddy_tests::{fetch_from_start, WireConnection};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const FSYNC_DELAY: Duration = Duration::from_millis(300);
const WRITE_DELAY: Duration = Duration::from_millis(400);
/// How long after the slow writes start the heartbeat and the fetch are sent.
const INTO_THE_WRITES: Duration = Duration::from_millis(50);

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Joins `group` as its only member: (member id, generation).
async fn join(conn: &mut WireConnection, group: &str) -> (StrBytes, i32) {
    let request = |member: StrBytes| {
        JoinGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_member_id(member)
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_protocol_type(text("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(text("range"))
                .with_metadata(Bytes::from_static(b"\x00\x01\x00\x00\x00\x00"))])
    };
    let first = conn.request(9, &request(text(""))).await.unwrap();
    let joined = conn.request(9, &request(first.member_id)).await.unwrap();
    assert_eq!(joined.error_code, 0);
    let synced = conn
        .request(
            5,
            &SyncGroupRequest::default()
                .with_group_id(GroupId(text(group)))
                .with_member_id(joined.member_id.clone())
                .with_generation_id(joined.generation_id)
                .with_protocol_type(Some(text("consumer")))
                .with_protocol_name(Some(text("range"))),
        )
        .await
        .unwrap();
    assert_eq!(synced.error_code, 0);
    (joined.member_id, joined.generation_id)
}

fn heartbeat(member: &(StrBytes, i32)) -> HeartbeatRequest {
    HeartbeatRequest::default()
        .with_group_id(GroupId(text("slow-disk-group")))
        .with_member_id(member.0.clone())
        .with_generation_id(member.1)
}

fn commit(offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(text("slow-committer")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(text("cold")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_disk_delays_only_what_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = EmbeddedBroker::builder(dir.path().to_path_buf())
        .start()
        .await
        .unwrap();
    let bootstrap = broker.bootstrap();
    let admin = Admin::connect(&bootstrap).await.unwrap();
    admin
        .create_topics(&[
            // Two records fill a segment: appends roll segments all the time.
            NewTopic::new("hot", 1).config("segment.bytes", "1024"),
            NewTopic::new("cold", 1),
        ])
        .await
        .unwrap();
    let producer = Producer::new(ProducerConfig::new(&bootstrap)).unwrap();
    producer
        .send(ProducerRecord::new("cold", "read me"))
        .await
        .unwrap()
        .await
        .unwrap();
    let mut heartbeats = WireConnection::connect(&bootstrap).await.unwrap();
    let member = join(&mut heartbeats, "slow-disk-group").await;
    let mut fetches = WireConnection::connect(&bootstrap).await.unwrap();
    let mut committer = WireConnection::connect(&bootstrap).await.unwrap();
    let producer = std::sync::Arc::new(producer);

    broker.storage_faults().set_fsync_delay(FSYNC_DELAY);
    broker.storage_faults().set_write_delay(WRITE_DELAY);
    let (mut beats, mut reads, mut slow_writes) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..4 {
        let started = Instant::now();
        let committing = tokio::spawn(async move {
            let answer = committer.request(8, &commit(round)).await.unwrap();
            assert_eq!(answer.topics[0].partitions[0].error_code, 0);
            committer
        });
        let sender = std::sync::Arc::clone(&producer);
        let producing = tokio::spawn(async move {
            let delivery = sender
                .send(ProducerRecord::new("hot", "x".repeat(600)))
                .await
                .unwrap();
            delivery.await.unwrap();
        });
        tokio::time::sleep(INTO_THE_WRITES).await;

        let sent = Instant::now();
        let answer = heartbeats.request(4, &heartbeat(&member)).await.unwrap();
        assert_eq!(answer.error_code, 0);
        beats.push(sent.elapsed());
        let sent = Instant::now();
        let answer = fetches
            .request(12, &fetch_from_start("cold"))
            .await
            .unwrap();
        let partition = &answer.responses[0].partitions[0];
        assert_eq!(partition.error_code, 0);
        assert!(partition.records.as_ref().is_some_and(|r| !r.is_empty()));
        reads.push(sent.elapsed());

        committer = committing.await.unwrap();
        producing.await.unwrap();
        slow_writes.push(started.elapsed());
    }
    let slowest = |samples: &[Duration]| samples.iter().max().copied().unwrap_or_default();
    let (beat, read, write) = (slowest(&beats), slowest(&reads), slowest(&slow_writes));
    println!("slow disk: slowest heartbeat {beat:?}, fetch {read:?}; commit and produce {write:?}");
    // The commits and records really waited for the slow disk.
    assert!(write >= WRITE_DELAY + FSYNC_DELAY, "writes took {write:?}");
    // Anything that waited for a write would take at least WRITE_DELAY - INTO_THE_WRITES.
    assert!(
        beat < WRITE_DELAY / 2,
        "a heartbeat waited for the disk: {beats:?}"
    );
    assert!(
        read < WRITE_DELAY / 2,
        "a fetch waited for the disk: {reads:?}"
    );
    broker.shutdown().await.unwrap();
}
