//! The group coordinator on real logs: offsets expiry, commit order, partition placement,
//! member ids, replay of damaged or forged records, and what a full disk does to commits,
//! assignments, leaves and returning static members.

use super::*;
use eddy_core::clock::system_time_ms as now_ms;

fn coordinator_in(dir: &std::path::Path, partitions: i32) -> Arc<GroupCoordinator> {
    let logs = (0..partitions)
        .map(|p| {
            let tp = eddy_core::log::TopicPartition::new(OFFSETS_TOPIC, p);
            Arc::new(Partition::open(tp, &dir.join(p.to_string()), Default::default(), 0).unwrap())
        })
        .collect();
    Arc::new(GroupCoordinator::open(GroupConfig::default(), Clock::new(), logs).unwrap())
}

fn offset(offset: i64, commit_timestamp: i64) -> OffsetValue {
    OffsetValue {
        offset,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp,
    }
}

/// Commits `value` for partition 0 of "orders" from outside the group (as an admin would).
async fn commit_from_outside(
    coordinator: &Arc<GroupCoordinator>,
    group: &str,
    value: OffsetValue,
) -> Result<Vec<Result<(), GroupError>>, GroupError> {
    coordinator
        .commit_offsets(group, -1, "", None, vec![("orders".into(), 0, value)])
        .await
}

#[tokio::test]
async fn offsets_of_idle_groups_expire_and_stay_expired() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator = coordinator_in(dir.path(), 3);
    let day = 24 * 3_600_000;
    let recent = now_ms();
    let commit = |group, at| commit_from_outside(&coordinator, group, offset(7, at));
    commit("idle", recent - 8 * day).await.unwrap();
    commit("active", recent - 8 * day).await.unwrap();
    commit("active", recent - day).await.unwrap();
    coordinator.expire_offsets(recent).await;
    let fetched =
        |c: &GroupCoordinator, group| c.fetch_offsets(group, Some(vec![("orders".into(), 0)]));
    assert_eq!(
        fetched(&coordinator, "idle")[0].2,
        None,
        "7 days idle: expired"
    );
    assert_eq!(
        fetched(&coordinator, "active")[0]
            .2
            .as_ref()
            .map(|o| o.offset),
        Some(7)
    );
    drop(coordinator);
    let replayed = coordinator_in(dir.path(), 3);
    assert_eq!(
        fetched(&replayed, "idle")[0].2,
        None,
        "the expiry was stored"
    );
    assert_eq!(
        fetched(&replayed, "active")[0].2.as_ref().map(|o| o.offset),
        Some(7)
    );
}

#[test]
fn a_commit_appended_earlier_but_applied_later_does_not_win() {
    // Two commits of one partition: appended at log offsets 9 and 10, their fsync waits
    // ending in the other order.
    let mut entry = GroupEntry::new("g");
    let key = ("t".to_string(), 0);
    entry.apply_offset(key.clone(), offset(200, 0), 10);
    entry.apply_offset(key.clone(), offset(100, 0), 9);
    assert_eq!(entry.offsets[&key].offset, 200);
    entry.apply_offset(key.clone(), offset(300, 0), 11);
    assert_eq!(entry.offsets[&key].offset, 300);
}

#[test]
fn a_transactional_commit_found_durable_after_its_marker_ends_with_its_transaction() {
    // A zombie's offsets at log offset 90, the marker of the abort that fenced it at 100,
    // applied before the offsets' batch was found durable; then a commit of the same
    // producer's next transaction at 120.
    let mut entry = GroupEntry::new("g");
    entry.end_transaction(7, false, Some(100));
    assert_eq!(entry.ended_after(7, 90), Some(false));
    assert_eq!(
        entry.ended_after(7, 100),
        None,
        "a record after the marker is not ended"
    );
    assert_eq!(
        entry.ended_after(8, 90),
        None,
        "another producer's transaction"
    );
    entry.end_transaction(7, true, Some(120));
    assert_eq!(
        entry.ended_after(7, 90),
        Some(false),
        "the first marker after it ended it"
    );
    assert_eq!(entry.ended_after(7, 110), Some(true));
    // A replay meets records in order and remembers nothing.
    entry.end_transaction(9, true, None);
    assert_eq!(entry.ended_after(9, 0), None);
    // What is remembered stays bounded: a few markers of each of the latest producers.
    for producer in 0..(ENDED_PRODUCERS as i64 * 2) {
        for marker in 0..(ENDED_PER_PRODUCER as i64 * 2) {
            entry.end_transaction(1_000 + producer, true, Some(1_000 * producer + marker));
        }
    }
    assert_eq!(entry.ended.len(), ENDED_PRODUCERS);
    assert!(entry
        .ended
        .values()
        .all(|ends| ends.len() == ENDED_PER_PRODUCER));
    let newest = 1_000 + ENDED_PRODUCERS as i64 * 2 - 1;
    assert!(entry.ended.contains_key(&newest) && !entry.ended.contains_key(&1_000));
}

#[test]
fn member_ids_fit_their_stored_length_whatever_the_client_id() {
    assert!(new_member_id("billing").starts_with("billing-"));
    assert_eq!(new_member_id("billing").len(), "billing".len() + 37);
    for client_id in ["x".repeat(40_000), "\u{e9}".repeat(16_383)] {
        let id = new_member_id(&client_id);
        assert!(id.len() <= i16::MAX as usize, "{} bytes", id.len());
        assert!(id.len() > i16::MAX as usize - 40);
    }
}

/// (group id, Java's `hashCode`, partition of 50), printed by Java 17.
const JAVA: &[(&str, i32, usize)] = &[
    ("billing", -109829509, 9),
    ("my-group", -1906497762, 12),
    ("\u{e9}t\u{e9}", 227742, 42),
    ("", 0, 0),
    ("group-with-a-long-name-1234", -130707336, 36),
    ("polygenelubricants", i32::MIN, 0),
];

#[test]
fn groups_map_to_partitions_as_kafka_maps_them() {
    let coordinator = GroupCoordinator {
        config: GroupConfig::default(),
        clock: Clock::new(),
        groups: Mutex::new(HashMap::new()),
        offsets_log: Vec::new(),
        appends: Default::default(),
    };
    for &(group, hash, _) in JAVA {
        assert_eq!(java_hash(group), hash, "{group:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let partitions: Vec<_> = (0..50)
        .map(|p| {
            let tp = eddy_core::log::TopicPartition::new(OFFSETS_TOPIC, p);
            Arc::new(
                Partition::open(tp, &dir.path().join(p.to_string()), Default::default(), 0)
                    .unwrap(),
            )
        })
        .collect();
    let coordinator = GroupCoordinator {
        offsets_log: partitions,
        ..coordinator
    };
    for &(group, _, partition) in JAVA {
        assert_eq!(coordinator.partition_for(group), partition, "{group:?}");
    }
}

/// A batch with a valid CRC whose one record claims a value longer than the batch: its
/// records do not decode.
fn batch_with_undecodable_records() -> Vec<u8> {
    let mut batch = BatchBuilder::new(Compression::None);
    batch.append(&Record {
        key: Some(Bytes::from_static(b"k")),
        value: None,
        headers: Vec::new(),
        timestamp: now_ms(),
    });
    let mut bytes = batch.build(0).unwrap();
    let at = bytes.len() - 2; // the value length, -1 (null), as a zigzag varint
    bytes[at] = 40; // 20 bytes: past the end
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    bytes
}

#[tokio::test]
async fn replay_skips_what_does_not_decode_and_keeps_every_other_group() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator = coordinator_in(dir.path(), 1);
    let commit = |group, at| commit_from_outside(&coordinator, group, offset(at, now_ms()));
    commit("victim", 5).await.unwrap();
    // Records no coordinator wrote: an unknown key, a key with bytes after it, a known key
    // with a value that is not an offset.
    let victim_key = OffsetsKey::Offset {
        group: "victim".into(),
        topic: "orders".into(),
        partition: 0,
    }
    .encode()
    .unwrap();
    let mut longer_key = victim_key.to_vec();
    longer_key.extend_from_slice(b"tail");
    let forged = [
        (
            Bytes::from_static(b"\x00\x09junk"),
            Some(offset(999, 0).encode().unwrap()),
        ),
        (
            Bytes::from(longer_key),
            Some(offset(999, 0).encode().unwrap()),
        ),
        (victim_key, Some(Bytes::from_static(b"\x00\x03short"))),
    ];
    let mut batch = BatchBuilder::new(Compression::None);
    for (key, value) in forged {
        batch.append(&Record {
            key: Some(key),
            value,
            headers: Vec::new(),
            timestamp: now_ms(),
        });
    }
    let partition = Arc::clone(&coordinator.offsets_log[0]);
    let info = partition
        .append(&batch.build(0).unwrap(), now_ms())
        .unwrap();
    partition.wait_durable(info.last_offset).await.unwrap();
    commit("bystander", 7).await.unwrap();
    drop((coordinator, partition));
    // A batch whose records do not decode, written behind the log's back.
    let segment = dir.path().join("0").join("00000000000000000000.log");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap();
    std::io::Write::write_all(&mut file, &batch_with_undecodable_records()).unwrap();
    drop(file);

    let replayed = coordinator_in(dir.path(), 1);
    let fetched = |group| replayed.fetch_offsets(group, Some(vec![("orders".into(), 0)]));
    assert_eq!(fetched("victim")[0].2.as_ref().map(|o| o.offset), Some(5));
    assert_eq!(
        fetched("bystander")[0].2.as_ref().map(|o| o.offset),
        Some(7)
    );
    let groups: Vec<String> = replayed.list().into_iter().map(|(id, ..)| id).collect();
    assert_eq!(groups, ["bystander", "victim"]);
}

#[tokio::test]
async fn a_deleted_topics_offsets_are_deleted_and_stay_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator = coordinator_in(dir.path(), 3);
    let offsets = |topic: &str| {
        (0..2)
            .map(|p| (topic.to_string(), p, offset(10 + i64::from(p), now_ms())))
            .collect::<Vec<_>>()
    };
    for group in ["g1", "g2"] {
        let mut both = offsets("doomed");
        both.extend(offsets("kept"));
        coordinator
            .commit_offsets(group, -1, "", None, both)
            .await
            .unwrap();
    }
    coordinator.delete_topic_offsets("doomed").await.unwrap();
    let topics = |c: &GroupCoordinator, group| {
        let mut topics: Vec<String> = c
            .fetch_offsets(group, None)
            .into_iter()
            .map(|(t, ..)| t)
            .collect();
        topics.dedup();
        topics
    };
    for group in ["g1", "g2"] {
        assert_eq!(topics(&coordinator, group), ["kept"]);
    }
    drop(coordinator);
    let replayed = coordinator_in(dir.path(), 3);
    for group in ["g1", "g2"] {
        assert_eq!(
            topics(&replayed, group),
            ["kept"],
            "the tombstones were stored"
        );
    }
}

/// A member that joins and then falls silent, with the coordinator's timers running.
fn silent_member(session: Duration) -> JoinRequest {
    JoinRequest {
        member_id: String::new(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout: session,
        rebalance_timeout: session,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"\x00\x01"))],
        require_known_member_id: false,
    }
}

#[tokio::test(start_paused = true)]
async fn a_silent_member_leaves_when_its_session_ends_on_the_coordinators_clock() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator = coordinator_in(dir.path(), 1);
    let (stop, stopped) = watch::channel(false);
    let timers = tokio::spawn(Arc::clone(&coordinator).run_timers(stopped));
    let session = Duration::from_secs(10);
    let joined = coordinator.join("g", silent_member(session)).await;
    assert_eq!(joined.error, None);
    let members = |c: &GroupCoordinator| c.describe("g").map_or(0, |d| d.members.len());
    assert_eq!(members(&coordinator), 1);
    // No heartbeat: nothing changes before the session ends, the member goes after it.
    tokio::time::sleep(session - Duration::from_secs(1)).await;
    assert_eq!(members(&coordinator), 1, "still within its session");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(members(&coordinator), 0, "its session ended");
    assert_eq!(coordinator.describe("g").unwrap().state, GroupState::Empty);
    stop.send(true).unwrap();
    timers.await.unwrap();
}

/// A coordinator over `partitions` partitions of `__consumer_offsets` in `dir` whose disk
/// meets `faults`.
fn coordinator_with_faults(
    dir: &std::path::Path,
    partitions: i32,
    faults: &crate::storage::StorageFaults,
) -> Arc<GroupCoordinator> {
    let logs = (0..partitions)
        .map(|p| {
            let tp = eddy_core::log::TopicPartition::new(OFFSETS_TOPIC, p);
            let partition = Partition::open(tp, &dir.join(p.to_string()), Default::default(), 0);
            Arc::new(partition.unwrap().with_faults(faults))
        })
        .collect();
    Arc::new(GroupCoordinator::open(GroupConfig::default(), Clock::new(), logs).unwrap())
}

/// An operation on committed offsets: of groups g0..g2, topics t0..t1, partitions 0..1.
#[derive(Debug, Clone)]
enum OffsetsOp {
    Commit(u8, u8, i32, i64),
    DeleteGroup(u8),
    DeleteOffset(u8, u8, i32),
    DeleteTopic(u8),
}

fn offsets_op() -> impl proptest::strategy::Strategy<Value = OffsetsOp> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0u8..3, 0u8..2, 0i32..2, 0i64..1000)
            .prop_map(|(g, t, p, o)| OffsetsOp::Commit(g, t, p, o)),
        1 => (0u8..3).prop_map(OffsetsOp::DeleteGroup),
        1 => (0u8..3, 0u8..2, 0i32..2).prop_map(|(g, t, p)| OffsetsOp::DeleteOffset(g, t, p)),
        1 => (0u8..2).prop_map(OffsetsOp::DeleteTopic),
    ]
}

type OffsetsModel = std::collections::BTreeMap<(String, String, i32), i64>;

/// Every committed offset the coordinator answers with.
fn answered(coordinator: &GroupCoordinator) -> OffsetsModel {
    coordinator
        .list()
        .into_iter()
        .flat_map(|(group, ..)| {
            coordinator
                .fetch_offsets(&group, None)
                .into_iter()
                .filter_map(move |(t, p, v)| Some(((group.clone(), t, p), v?.offset)))
        })
        .collect()
}

/// What `op` does to the committed offsets when it succeeds.
fn effect(model: &OffsetsModel, op: &OffsetsOp) -> OffsetsModel {
    let name = |prefix: &str, n: u8| format!("{prefix}{n}");
    let mut after = model.clone();
    match *op {
        OffsetsOp::Commit(g, t, p, o) => {
            after.insert((name("g", g), name("t", t), p), o);
        }
        OffsetsOp::DeleteGroup(g) => after.retain(|(group, ..), _| *group != name("g", g)),
        OffsetsOp::DeleteOffset(g, t, p) => {
            after.remove(&(name("g", g), name("t", t), p));
        }
        OffsetsOp::DeleteTopic(t) => after.retain(|(_, topic, _), _| *topic != name("t", t)),
    }
    after
}

/// Runs `op`: whether the coordinator answered that it was done.
async fn apply_op(coordinator: &Arc<GroupCoordinator>, op: &OffsetsOp) -> bool {
    let name = |prefix: &str, n: u8| format!("{prefix}{n}");
    match *op {
        OffsetsOp::Commit(g, t, p, o) => {
            let commits = vec![(name("t", t), p, offset(o, now_ms()))];
            let answer = coordinator
                .commit_offsets(&name("g", g), -1, "", None, commits)
                .await;
            answer.is_ok_and(|done| done == [Ok(())])
        }
        OffsetsOp::DeleteGroup(g) => coordinator.delete_groups(&[name("g", g)]).await == [Ok(())],
        OffsetsOp::DeleteOffset(g, t, p) => {
            let partitions = [(name("t", t), p)];
            let answer = coordinator.delete_offsets(&name("g", g), &partitions).await;
            answer.is_ok_and(|done| done == [Ok(())])
        }
        OffsetsOp::DeleteTopic(t) => coordinator
            .delete_topic_offsets(&name("t", t))
            .await
            .is_ok(),
    }
}

/// What the disk does during an operation.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Disk {
    Fine,
    Full,
    FailingFsyncs,
}

fn disk() -> impl proptest::strategy::Strategy<Value = Disk> {
    use proptest::prelude::*;
    prop_oneof![6 => Just(Disk::Fine), 2 => Just(Disk::Full), 1 => Just(Disk::FailingFsyncs)]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

    /// Offsets operations, some with a full disk or failing fsyncs: after each, the
    /// coordinator holds what it answered (a refused operation changed nothing), and replaying
    /// its topic gives the same. A failed fsync takes its partitions offline and leaves the
    /// operation's outcome unknown, as in Kafka: after a restart the coordinator holds each
    /// offset as before the operation or after it, and goes on from there.
    #[test]
    fn replay_finds_what_was_answered_whatever_failed(
        ops in proptest::collection::vec((offsets_op(), disk()), 1..24)
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let faults = crate::storage::StorageFaults::default();
            let mut coordinator = coordinator_with_faults(dir.path(), 2, &faults);
            let mut model = OffsetsModel::new();
            for (op, disk) in &ops {
                let done = effect(&model, op);
                faults.fill_disk(*disk == Disk::Full);
                faults.fail_fsyncs(*disk == Disk::FailingFsyncs);
                let answered_done = apply_op(&coordinator, op).await;
                faults.fill_disk(false);
                faults.fail_fsyncs(false);
                if answered_done {
                    model = done.clone();
                }
                assert_eq!(answered(&coordinator), model, "after {op:?} (disk: {disk:?})");
                if *disk == Disk::FailingFsyncs && !answered_done {
                    drop(coordinator);
                    coordinator = coordinator_with_faults(dir.path(), 2, &faults);
                    // Each offset as before the operation or after it: an operation over
                    // several groups (a topic's deletion) may be done for some and not others.
                    let replayed = answered(&coordinator);
                    for key in model.keys().chain(done.keys()).chain(replayed.keys()) {
                        let now = replayed.get(key);
                        assert!(
                            now == model.get(key) || now == done.get(key),
                            "after {op:?} with a failed fsync and a restart, {key:?} is {now:?}"
                        );
                    }
                    model = replayed;
                }
            }
            drop(coordinator);
            let replayed = coordinator_with_faults(dir.path(), 2, &faults);
            assert_eq!(answered(&replayed), model, "replayed");
        });
    }
}

/// A one-member group in `dir` whose disk meets `faults`, joined and assigned `assignment`:
/// the coordinator, the member's join result.
async fn stable_group(
    dir: &std::path::Path,
    faults: &crate::storage::StorageFaults,
    member: JoinRequest,
) -> (Arc<GroupCoordinator>, JoinResult) {
    let coordinator = coordinator_with_faults(dir, 1, faults);
    // The first round of a new group ends on the coordinator's timer.
    let timers = TestTimers::start(&coordinator);
    let joined = coordinator.join("g", member).await;
    drop(timers);
    assert_eq!(joined.error, None);
    let assignment = coordinator
        .sync(
            "g",
            &joined.member_id,
            None,
            joined.generation,
            vec![(joined.member_id.clone(), Bytes::from_static(b"first"))],
        )
        .await;
    assert_eq!(assignment.as_deref(), Ok(&b"first"[..]));
    (coordinator, joined)
}

#[tokio::test]
async fn an_assignment_that_cannot_be_stored_is_not_handed_out_and_the_group_rebalances() {
    let dir = tempfile::tempdir().unwrap();
    let faults = crate::storage::StorageFaults::default();
    let (coordinator, joined) = stable_group(dir.path(), &faults, silent_member(SESSION)).await;
    let member = JoinRequest {
        member_id: joined.member_id.clone(),
        ..silent_member(SESSION)
    };
    // A new rebalance, whose assignment meets a full disk.
    let rejoined = coordinator.join("g", member.clone()).await;
    assert_eq!(rejoined.error, None);
    assert_eq!(rejoined.generation, joined.generation + 1);
    faults.fill_disk(true);
    let refused = coordinator
        .sync(
            "g",
            &rejoined.member_id,
            None,
            rejoined.generation,
            vec![(rejoined.member_id.clone(), Bytes::from_static(b"second"))],
        )
        .await;
    faults.fill_disk(false);
    // As Kafka: the storage error is answered as NOT_COORDINATOR, nobody gets the
    // assignment, and the group prepares another rebalance.
    assert_eq!(refused, Err(GroupError::NotStored(NotStored::DiskFailed)));
    let described = coordinator.describe("g").unwrap();
    assert_eq!(described.state, GroupState::PreparingRebalance);
    assert!(described.members.iter().all(|m| m.assignment.is_empty()));
    assert_eq!(
        coordinator.heartbeat("g", &rejoined.member_id, None, rejoined.generation),
        Err(GroupError::RebalanceInProgress)
    );
    // The stored group is the last assignment answered.
    drop(coordinator);
    let replayed = coordinator_with_faults(dir.path(), 1, &faults);
    let stored = replayed.lock()["g"].group.stored();
    assert_eq!(stored.generation, joined.generation);
}

#[tokio::test]
async fn a_leave_that_cannot_be_stored_answers_the_storage_error() {
    let dir = tempfile::tempdir().unwrap();
    let faults = crate::storage::StorageFaults::default();
    let (coordinator, joined) = stable_group(dir.path(), &faults, silent_member(SESSION)).await;
    faults.fill_disk(true);
    let left = coordinator
        .leave("g", &[(joined.member_id.clone(), None)])
        .await;
    faults.fill_disk(false);
    assert_eq!(left, Err(GroupError::NotStored(NotStored::DiskFailed)));
    // The member asked to go and is gone; only the group's empty generation was not stored,
    // which Kafka too leaves at that (no member is in it).
    let left = coordinator.leave("g", &[(joined.member_id, None)]).await;
    assert_eq!(left, Ok(vec![Err(GroupError::UnknownMemberId)]));
    assert_eq!(coordinator.describe("g").unwrap().state, GroupState::Empty);
}

#[tokio::test]
async fn a_static_member_whose_new_id_cannot_be_stored_keeps_its_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let faults = crate::storage::StorageFaults::default();
    let static_member = JoinRequest {
        group_instance_id: Some("instance-1".into()),
        ..silent_member(SESSION)
    };
    let (coordinator, joined) = stable_group(dir.path(), &faults, static_member.clone()).await;
    // The instance comes back without its member id (a restart): its new id meets a full
    // disk, so the join fails and the old id stays the member's, as Kafka has it.
    faults.fill_disk(true);
    let returned = coordinator.join("g", static_member.clone()).await;
    faults.fill_disk(false);
    assert_eq!(
        returned.error,
        Some(GroupError::NotStored(NotStored::DiskFailed))
    );
    let instance = Some("instance-1");
    assert_eq!(
        coordinator.heartbeat("g", &joined.member_id, instance, joined.generation),
        Ok(())
    );
    // With the disk back, the instance takes a new id and the old one is fenced.
    let returned = coordinator.join("g", static_member).await;
    assert_eq!(returned.error, None);
    assert_ne!(returned.member_id, joined.member_id);
    assert_eq!(
        coordinator.heartbeat("g", &joined.member_id, instance, joined.generation),
        Err(GroupError::FencedInstanceId)
    );
}

const SESSION: Duration = Duration::from_secs(30);
