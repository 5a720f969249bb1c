//! A slow disk holds back only what waits for it: with every fsync made to take 300 ms, a
//! producer writing one topic with acks=all waits, while heartbeats of a group and fetches
//! of another topic are answered as before. The fsyncs run off the async workers, so no
//! worker waits for the disk.

use std::time::{Duration, Instant};

use bytes::Bytes;
use eddy::client::{Admin, NewTopic, Producer, ProducerConfig, ProducerRecord};
use eddy::embedded::EmbeddedBroker;
use eddy_tests::WireConnection;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::{
    FetchRequest, GroupId, HeartbeatRequest, JoinGroupRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const FSYNC_DELAY: Duration = Duration::from_millis(300);

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

/// The round trips of `n` heartbeats and `n` fetches of `topic`, one after the other.
async fn round_trips(
    heartbeats: &mut WireConnection,
    member: &(StrBytes, i32),
    fetches: &mut WireConnection,
    topic: &str,
    n: usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let heartbeat = HeartbeatRequest::default()
        .with_group_id(GroupId(text("slow-disk-group")))
        .with_member_id(member.0.clone())
        .with_generation_id(member.1);
    let fetch = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(text(topic)))
            .with_partitions(vec![
                FetchPartition::default().with_partition_max_bytes(1 << 20)
            ])]);
    let (mut beats, mut reads) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let started = Instant::now();
        let answer = heartbeats.request(4, &heartbeat).await.unwrap();
        assert_eq!(answer.error_code, 0);
        beats.push(started.elapsed());
        let started = Instant::now();
        let answer = fetches.request(12, &fetch).await.unwrap();
        let partition = &answer.responses[0].partitions[0];
        assert_eq!(partition.error_code, 0);
        assert!(partition.records.as_ref().is_some_and(|r| !r.is_empty()));
        reads.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (beats, reads)
}

fn percentile(mut samples: Vec<Duration>, p: usize) -> Duration {
    samples.sort();
    samples[(samples.len() * p / 100).min(samples.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_disk_delays_the_producer_only() {
    let dir = tempfile::tempdir().unwrap();
    let broker = EmbeddedBroker::builder(dir.path().to_path_buf())
        .start()
        .await
        .unwrap();
    let bootstrap = broker.bootstrap();
    let admin = Admin::connect(&bootstrap).await.unwrap();
    admin
        .create_topics(&[NewTopic::new("hot", 1), NewTopic::new("cold", 1)])
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

    broker.storage_faults().set_fsync_delay(FSYNC_DELAY);
    let writing = tokio::spawn(async move {
        let started = Instant::now();
        let mut acknowledged = 0;
        while started.elapsed() < Duration::from_secs(3) {
            let delivery = producer
                .send(ProducerRecord::new("hot", "x".repeat(100)))
                .await
                .unwrap();
            delivery.await.unwrap();
            acknowledged += 1;
        }
        acknowledged
    });
    let (beats, reads) = round_trips(&mut heartbeats, &member, &mut fetches, "cold", 60).await;
    let acknowledged = writing.await.unwrap();
    // Each acknowledged record waited for a slow fsync: the disk really was slow.
    assert!(
        acknowledged <= 3_000 / 300 + 1,
        "{acknowledged} acknowledged"
    );
    let (beat, read) = (percentile(beats, 90), percentile(reads, 90));
    println!("slow disk: {acknowledged} acks in 3 s; p90 heartbeat {beat:?}, p90 fetch {read:?}");
    // Anything that waited for an fsync would take at least FSYNC_DELAY.
    assert!(
        beat < FSYNC_DELAY / 2,
        "heartbeats waited for the disk: p90 {beat:?}"
    );
    assert!(
        read < FSYNC_DELAY / 2,
        "fetches waited for the disk: p90 {read:?}"
    );
    broker.shutdown().await.unwrap();
}
