//! The rules of Kafka's classic group coordinator that members are held to: which offset
//! commits (plain and transactional) are refused and with what, and when a join round ends
//! (every member, every member just told its id, and the initial delay of an empty group).

use super::*;
use crate::storage::Partition;

fn coordinator(dir: &std::path::Path, config: GroupConfig) -> Arc<GroupCoordinator> {
    let tp = eddy_core::log::TopicPartition::new(OFFSETS_TOPIC, 0);
    let log = Arc::new(Partition::open(tp, dir, Default::default(), 0).unwrap());
    Arc::new(GroupCoordinator::open(config, Clock::new(), vec![log]).unwrap())
}

fn member(id: &str) -> JoinRequest {
    JoinRequest {
        member_id: id.into(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout: Duration::from_secs(30),
        rebalance_timeout: Duration::from_secs(30),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"\x00\x01"))],
        require_known_member_id: true,
    }
}

fn offsets(offset: i64) -> Vec<(String, i32, OffsetValue)> {
    let value = OffsetValue {
        offset,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp: 0,
    };
    vec![("orders".into(), 0, value)]
}

/// Joins a new member as a JoinGroup v4+ client does: told its id first, then joining with
/// it. Returns the id and the join's answer, once the round ends.
async fn join_new(coordinator: &Arc<GroupCoordinator>, group: &str) -> (String, JoinResult) {
    let told = coordinator.join(group, member("")).await;
    assert_eq!(told.error, Some(GroupError::MemberIdRequired));
    let joined = coordinator.join(group, member(&told.member_id)).await;
    (told.member_id, joined)
}

/// A stable group `g` of one member: its id and generation.
async fn stable(coordinator: &Arc<GroupCoordinator>) -> (String, i32) {
    let (id, joined) = join_new(coordinator, "g").await;
    assert_eq!(joined.error, None);
    let assignment = vec![(id.clone(), Bytes::from_static(b"all"))];
    let synced = coordinator
        .sync("g", &id, None, joined.generation, assignment)
        .await;
    assert!(synced.is_ok());
    (id, joined.generation)
}

/// An OffsetCommit's answer: the whole commit's refusal, if any.
async fn commit(
    coordinator: &Arc<GroupCoordinator>,
    group: &str,
    generation: i32,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<(), GroupError> {
    let answer = coordinator
        .commit_offsets(group, generation, member_id, instance_id, offsets(7))
        .await;
    answer.map(|codes| assert_eq!(codes, [Ok(())]))
}

#[tokio::test]
async fn offset_commits_are_refused_as_kafkas_classic_coordinator_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let c = coordinator(dir.path(), GroupConfig::default());
    let _timers = TestTimers::start(&c);
    let (id, generation) = stable(&c).await;
    // The member, at its generation.
    assert_eq!(commit(&c, "g", generation, &id, None).await, Ok(()));
    // Generation -1 is not "any generation" for a member: only the group's own counts.
    assert_eq!(
        commit(&c, "g", -1, &id, None).await,
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        commit(&c, "g", generation + 1, &id, None).await,
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        commit(&c, "g", generation, "stranger", None).await,
        Err(GroupError::UnknownMemberId)
    );
    // An instance id no static member holds.
    assert_eq!(
        commit(&c, "g", generation, &id, Some("instance-9")).await,
        Err(GroupError::UnknownMemberId)
    );
    // From outside a group that has members.
    assert_eq!(
        commit(&c, "g", -1, "", None).await,
        Err(GroupError::UnknownMemberId)
    );
    // A member's commit to a group the broker does not know (OffsetCommit before v9).
    assert_eq!(
        commit(&c, "unknown", 0, "m", None).await,
        Err(GroupError::IllegalGeneration)
    );
    // From outside, to a group not yet known: a simple group is made.
    assert_eq!(commit(&c, "simple", -1, "", None).await, Ok(()));

    // The member leaves: its commits are refused from then on, whatever it names.
    let left = c.leave("g", &[(id.clone(), None)]).await;
    assert_eq!(left, Ok(vec![Ok(())]));
    assert_eq!(
        commit(&c, "g", generation, &id, None).await,
        Err(GroupError::UnknownMemberId)
    );
    // The group is empty: a commit with generation -1 is accepted, as from an admin.
    assert_eq!(commit(&c, "g", -1, &id, None).await, Ok(()));
}

#[tokio::test]
async fn a_commit_of_a_member_waiting_for_its_assignment_is_rebalance_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let c = coordinator(dir.path(), GroupConfig::default());
    let _timers = TestTimers::start(&c);
    let (id, generation) = stable(&c).await;
    // The member joins again: the round ends at once (it is the only member), and the group
    // waits for its leader's assignment.
    let rejoined = c.join("g", member(&id)).await;
    assert_eq!(rejoined.generation, generation + 1);
    assert_eq!(
        c.describe("g").unwrap().state,
        GroupState::CompletingRebalance
    );
    assert_eq!(
        commit(&c, "g", rejoined.generation, &id, None).await,
        Err(GroupError::RebalanceInProgress)
    );
    // A transactional commit is not held to the group's state.
    let verify: crate::storage::Verify = Arc::new(|_, _| Ok(()));
    let txn = c
        .commit_transactional_offsets(
            "g",
            (1, 0),
            rejoined.generation,
            &id,
            None,
            offsets(8),
            verify,
        )
        .await;
    assert!(txn.is_ok(), "{txn:?}");
}

#[tokio::test]
async fn a_zombies_transactional_commit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let c = coordinator(dir.path(), GroupConfig::default());
    let _timers = TestTimers::start(&c);
    let (id, generation) = stable(&c).await;
    let txn_commit = |generation: i32, member_id: &str| {
        let verify: crate::storage::Verify = Arc::new(|_, _| Ok(()));
        c.commit_transactional_offsets("g", (1, 0), generation, member_id, None, offsets(9), verify)
    };
    // The member's session ends (it left): a transactional commit in its name, at its old
    // generation, is a zombie's (KIP-447) and refused.
    c.leave("g", &[(id.clone(), None)]).await.unwrap();
    let (other, rejoined) = join_new(&c, "g").await;
    assert_eq!(
        txn_commit(generation, &id).await,
        Err(GroupError::UnknownMemberId)
    );
    // A stale generation of a member still in the group is refused too.
    assert_eq!(
        txn_commit(rejoined.generation - 1, &other).await,
        Err(GroupError::IllegalGeneration)
    );
    // A transactional commit to a group the broker does not know, naming a generation.
    let verify: crate::storage::Verify = Arc::new(|_, _| Ok(()));
    let unknown = c
        .commit_transactional_offsets("unknown", (1, 0), 3, "m", None, offsets(1), verify)
        .await;
    assert_eq!(unknown, Err(GroupError::IllegalGeneration));
}

#[tokio::test]
async fn a_join_round_waits_for_members_told_their_id() {
    let dir = tempfile::tempdir().unwrap();
    let c = coordinator(dir.path(), GroupConfig::default());
    let _timers = TestTimers::start(&c);
    let (first, generation) = stable(&c).await;
    // A new consumer is told its member id; the member already in rejoins (a rebalance).
    let told = c.join("g", member("")).await;
    assert_eq!(told.error, Some(GroupError::MemberIdRequired));
    let rejoin = tokio::spawn({
        let c = Arc::clone(&c);
        async move { c.join("g", member(&first)).await }
    });
    // The round waits for the consumer told its id, though every member has rejoined.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !rejoin.is_finished(),
        "the round ended without the new consumer"
    );
    assert_eq!(
        c.describe("g").unwrap().state,
        GroupState::PreparingRebalance
    );
    let second = c.join("g", member(&told.member_id)).await;
    let first = rejoin.await.unwrap();
    assert_eq!(first.generation, generation + 1);
    assert_eq!(second.generation, first.generation);
    let leader = [&first, &second]
        .into_iter()
        .find(|j| !j.members.is_empty())
        .expect("a leader");
    assert_eq!(leader.members.len(), 2, "both are in the generation");
}

#[tokio::test(start_paused = true)]
async fn consumers_started_together_join_the_first_generation_together() {
    let dir = tempfile::tempdir().unwrap();
    let c = coordinator(dir.path(), GroupConfig::default());
    let _timers = TestTimers::start(&c);
    // The first consumer is in the group before the second is even told its id: the first
    // round of the empty group ends on the coordinator's timer, not at that join, even with
    // no initial delay, so the second still joins the first generation.
    let first = tokio::spawn({
        let c = Arc::clone(&c);
        async move { join_new(&c, "g").await.1 }
    });
    while c.describe("g").is_none_or(|g| g.members.is_empty()) {
        tokio::task::yield_now().await;
    }
    let (_, second) = join_new(&c, "g").await;
    let first = first.await.unwrap();
    assert_eq!((first.generation, second.generation), (1, 1));
    assert_eq!(c.describe("g").unwrap().members.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_first_round_of_an_empty_group_waits_the_initial_delay_while_members_come() {
    let dir = tempfile::tempdir().unwrap();
    let delay = Duration::from_secs(3);
    let config = GroupConfig {
        initial_rebalance_delay: delay,
        ..GroupConfig::default()
    };
    let c = coordinator(dir.path(), config);
    let timers = TestTimers::start(&c);
    let started = tokio::time::Instant::now();
    let first = tokio::spawn({
        let c = Arc::clone(&c);
        async move { join_new(&c, "g").await.1 }
    });
    // A second member comes within the delay: the round waits one delay more (as Kafka's
    // InitialDelayedJoin does), then ends with both.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        c.describe("g").unwrap().state,
        GroupState::PreparingRebalance
    );
    let (_, second) = join_new(&c, "g").await;
    let first = first.await.unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= 2 * delay && waited < 2 * delay + Duration::from_secs(1),
        "{waited:?}"
    );
    assert_eq!((first.generation, second.generation), (1, 1));
    // Later rounds do not wait: the group is not empty.
    let rejoin_started = tokio::time::Instant::now();
    let rejoined = tokio::join!(
        c.join("g", member(&first.member_id)),
        c.join("g", member(&second.member_id))
    );
    assert_eq!((rejoined.0.generation, rejoined.1.generation), (2, 2));
    assert!(rejoin_started.elapsed() < delay);
    drop(timers);
}
