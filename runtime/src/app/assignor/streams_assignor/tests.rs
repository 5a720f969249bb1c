use std::time::Duration;

use eddy_core::serde::{I64Serde, Nullable, StringSerde};
use eddy_core::streams::windows::JoinWindows;
use eddy_core::streams::{Consumed, Grouped, Materialized, Produced, StreamJoined, StreamsBuilder};

use super::*;

const CONFIG: PlacementConfig = PlacementConfig {
    standby_replicas: 1,
    acceptable_recovery_lag: 10_000,
    max_warmup_replicas: 2,
};

/// Orders joined with payments within 5 s (inputs that must be co-partitioned), then
/// counted per customer after a re-key.
fn topology() -> Arc<Topology> {
    let builder = StreamsBuilder::new();
    let strings = || Consumed::with(StringSerde, StringSerde);
    let windows = JoinWindows::of_time_difference_with_no_grace(Duration::from_secs(5)).unwrap();
    builder
        .stream("orders", strings())
        .join(
            builder.stream("payments", strings()),
            |o: &String, p: &String| format!("{o}{p}"),
            windows,
            StreamJoined::with(StringSerde, StringSerde, StringSerde),
        )
        .select_key(|_k: &String, v: &String| v.clone())
        .group_by_key(Grouped::with(StringSerde, StringSerde))
        .count(Materialized::named("per-customer"))
        .to_stream()
        .to("counts", Produced::with(StringSerde, Nullable(I64Serde)));
    Arc::new(builder.build().unwrap())
}

fn member(
    id: &str,
    process: &str,
    owned: &[TaskId],
    owned_partitions: Vec<TopicPartition>,
) -> MemberSubscription {
    let assignor = StreamsAssignor::new(
        topology(),
        "app",
        CONFIG,
        LocalState {
            process: process.into(),
            owned_tasks: owned.iter().copied().collect(),
            offset_sums: owned
                .iter()
                .map(|&t| (t, super::super::placement::RUNNING))
                .collect(),
            endpoint: Some(format!("{process}:80")),
            ..LocalState::default()
        },
    );
    MemberSubscription {
        member_id: id.into(),
        group_instance_id: None,
        topics: Vec::new(),
        owned_partitions,
        generation_id: 1,
        user_data: assignor.subscription_user_data(&[], &[]),
    }
}

fn counts() -> BTreeMap<String, i32> {
    BTreeMap::from([("orders".to_string(), 4), ("payments".to_string(), 4)])
}

fn assignor() -> StreamsAssignor {
    StreamsAssignor::new(topology(), "app", CONFIG, LocalState::default())
}

#[test]
fn every_partition_goes_to_one_thread_with_its_task() {
    let members = [
        member("m1", "p1", &[], vec![]),
        member("m2", "p1", &[], vec![]),
        member("m3", "p2", &[], vec![]),
    ];
    let assignments = assignor().assign(&counts(), &members);
    let mut seen: BTreeMap<TopicPartition, &str> = BTreeMap::new();
    let mut tasks_run = BTreeSet::new();
    for (member, assignment) in &assignments {
        for tp in &assignment.partitions {
            assert!(seen.insert(tp.clone(), member).is_none(), "{tp:?} twice");
        }
        let info = TaskAssignment::decode(assignment.user_data.as_deref().unwrap()).unwrap();
        assert_eq!(info.error, None);
        for task in &info.active {
            assert!(tasks_run.insert(*task), "{task:?} twice");
            // Partition p of both joined topics is with task 0_p.
            if task.0 == 0 {
                for topic in ["orders", "payments"] {
                    assert_eq!(
                        seen.get(&TopicPartition::new(topic, task.1)),
                        Some(&member.as_str())
                    );
                }
            }
        }
        // No standby of a task beside the task.
        assert!(info.standby.iter().all(|t| !info.active.contains(t)));
        assert_eq!(info.partitions_by_host.len(), 2);
    }
    // Two sub-topologies of four tasks each; every source partition (orders, payments and
    // the repartition topic) is read once.
    assert_eq!(tasks_run.len(), 8);
    assert_eq!(seen.len(), 12);
    // The instance with two threads runs about two thirds.
    let p1: usize = ["m1", "m2"]
        .iter()
        .map(|m| assignments[*m].partitions.len())
        .sum();
    assert!((7..=9).contains(&p1), "{p1}");
}

#[test]
fn a_task_whose_partitions_another_member_owns_waits_for_them() {
    // Stateless: tasks move for balance at once, but not while another member owns them.
    let builder = StreamsBuilder::new();
    builder
        .stream("orders", Consumed::with(StringSerde, StringSerde))
        .filter(|_k: &String, v: &String| !v.is_empty())
        .to("kept", Produced::with(StringSerde, StringSerde));
    let topology = Arc::new(builder.build().unwrap());
    let t = |p| TaskId {
        subtopology: 0,
        partition: p,
    };
    let subscribe = |id: &str, process: &str, owned: &[TaskId]| {
        let local = LocalState {
            process: process.into(),
            owned_tasks: owned.iter().copied().collect(),
            offset_sums: BTreeMap::new(),
            endpoint: Some(format!("{process}:80")),
            ..LocalState::default()
        };
        let me = StreamsAssignor::new(topology.clone(), "app", CONFIG, local);
        MemberSubscription {
            member_id: id.into(),
            group_instance_id: None,
            topics: vec!["orders".into()],
            owned_partitions: owned
                .iter()
                .map(|t| TopicPartition::new("orders", t.partition))
                .collect(),
            generation_id: 1,
            user_data: me.subscription_user_data(&[], &[]),
        }
    };
    let members = [
        subscribe("old", "p1", &[t(0), t(1), t(2), t(3)]),
        subscribe("new", "p2", &[]),
    ];
    let leader = StreamsAssignor::new(topology.clone(), "app", CONFIG, LocalState::default());
    let assignments = leader.assign(&BTreeMap::from([("orders".to_string(), 4)]), &members);
    let info =
        |m: &str| TaskAssignment::decode(assignments[m].user_data.as_deref().unwrap()).unwrap();
    // Two tasks are meant for the new member (the hosts' map says so) ...
    let meant: Vec<_> = info("new")
        .partitions_by_host
        .into_iter()
        .find(|(host, _)| host == "p2:80")
        .unwrap()
        .1;
    assert_eq!(meant.len(), 2);
    // ... but the old member still owns them: they wait, and the old member keeps two.
    assert!(assignments["new"].partitions.is_empty());
    assert!(info("new").active.is_empty());
    assert_eq!(assignments["old"].partitions.len(), 2);
    // Once the old member has given them up, the next rebalance hands them over.
    let members = [
        subscribe("old", "p1", &[t(0), t(1)]),
        subscribe("new", "p2", &[]),
    ];
    let assignments = leader.assign(&BTreeMap::from([("orders".to_string(), 4)]), &members);
    assert_eq!(assignments["new"].partitions.len(), 2);
    assert_eq!(assignments["old"].partitions.len(), 2);
}

#[test]
fn a_missing_source_topic_is_every_members_error() {
    let members = [member("m1", "p1", &[], vec![])];
    let assignments = assignor().assign(&BTreeMap::from([("orders".to_string(), 4)]), &members);
    let info = TaskAssignment::decode(assignments["m1"].user_data.as_deref().unwrap()).unwrap();
    assert!(info.error.unwrap().contains("payments"));
    assert!(assignments["m1"].partitions.is_empty());
}

#[test]
fn bad_user_data_makes_a_member_an_instance_without_state() {
    let mut bad = member("m1", "p1", &[], vec![]);
    bad.user_data = Some(Bytes::from_static(b"\xff\xff garbage"));
    let assignments = assignor().assign(&counts(), &[bad, member("m2", "p2", &[], vec![])]);
    assert_eq!(assignments.len(), 2);
    let total: usize = assignments.values().map(|a| a.partitions.len()).sum();
    assert_eq!(total, 12);
    // The member reads what it was given.
    let receiver = assignor();
    receiver.on_assignment(&assignments["m1"], 1);
    assert_eq!(receiver.take_assignment().unwrap().error, None);
    receiver.on_assignment(&Assignment::default(), 2);
    assert!(receiver.take_assignment().unwrap().error.is_some());
}

fn member_with(id: &str, local: LocalState) -> MemberSubscription {
    let assignor = StreamsAssignor::new(topology(), "app", CONFIG, local);
    MemberSubscription {
        member_id: id.into(),
        group_instance_id: None,
        topics: Vec::new(),
        owned_partitions: Vec::new(),
        generation_id: 1,
        user_data: assignor.subscription_user_data(&[], &[]),
    }
}

#[test]
fn a_newcomer_warms_up_and_takes_over_once_caught_up_by_the_ends_members_report() {
    let counting = |p| TaskId {
        subtopology: 1,
        partition: p,
    };
    let all: Vec<TaskId> = (0..4)
        .flat_map(|p| {
            [
                TaskId {
                    subtopology: 0,
                    partition: p,
                },
                counting(p),
            ]
        })
        .collect();
    let ends: BTreeMap<TaskId, i64> = (0..4).map(|p| (counting(p), 50_000)).collect();
    let veteran = LocalState {
        process: "p1".into(),
        owned_tasks: all.iter().copied().collect(),
        offset_sums: all
            .iter()
            .map(|&t| (t, super::super::placement::RUNNING))
            .collect(),
        end_offset_sums: ends.clone(),
        endpoint: None,
        shutdown_requested: false,
    };
    let decode = |a: &Assignment| TaskAssignment::decode(a.user_data.as_deref().unwrap()).unwrap();
    let stateful_active = |info: &TaskAssignment| info.active.iter().filter(|t| t.0 == 1).count();

    // Without state, the newcomer gets warmups only, and a probing rebalance is asked for.
    let newcomer = LocalState {
        process: "p2".into(),
        ..LocalState::default()
    };
    let members = [
        member_with("m1", veteran.clone()),
        member_with("m2", newcomer),
    ];
    let assignments = assignor().assign(&counts(), &members);
    let info = decode(&assignments["m2"]);
    assert_eq!(stateful_active(&info), 0, "{info:?}");
    assert_eq!(info.warmup.len(), 2, "max.warmup.replicas: {info:?}");
    assert!(info.warmup.iter().all(|t| info.standby.contains(t)));
    assert!(info.probing_rebalance);
    assert!(decode(&assignments["m1"]).warmup.is_empty());

    // Its warmups within acceptable.recovery.lag of the ends the veteran reports: they
    // become its active tasks.
    let warmed: Vec<TaskId> = info.warmup.iter().map(|&t| t.into()).collect();
    let newcomer = LocalState {
        process: "p2".into(),
        offset_sums: warmed.iter().map(|&t| (t, 45_000)).collect(),
        ..LocalState::default()
    };
    let members = [
        member_with("m1", veteran.clone()),
        member_with("m2", newcomer),
    ];
    let info = decode(&assignor().assign(&counts(), &members)["m2"]);
    for task in &warmed {
        assert!(
            info.active.contains(&(*task).into()),
            "{task} not moved: {info:?}"
        );
    }

    // Further behind than that, they stay warmups.
    let newcomer = LocalState {
        process: "p2".into(),
        offset_sums: warmed.iter().map(|&t| (t, 30_000)).collect(),
        ..LocalState::default()
    };
    let members = [member_with("m1", veteran), member_with("m2", newcomer)];
    let info = decode(&assignor().assign(&counts(), &members)["m2"]);
    assert_eq!(stateful_active(&info), 0, "{info:?}");
}

#[test]
fn a_member_asking_for_the_applications_shutdown_stops_every_member() {
    let asking = StreamsAssignor::new(topology(), "app", CONFIG, LocalState::default());
    asking.request_application_shutdown();
    let members = [
        member("m1", "p1", &[], vec![]),
        MemberSubscription {
            member_id: "m2".into(),
            group_instance_id: None,
            topics: Vec::new(),
            owned_partitions: Vec::new(),
            generation_id: 1,
            user_data: asking.subscription_user_data(&[], &[]),
        },
    ];
    let assignments = assignor().assign(&counts(), &members);
    assert_eq!(assignments.len(), 2);
    for assignment in assignments.values() {
        let info = TaskAssignment::decode(assignment.user_data.as_deref().unwrap()).unwrap();
        assert!(info.shutdown_application);
        assert!(info.active.is_empty() && assignment.partitions.is_empty());
    }
}

#[test]
fn an_order_to_shut_down_stands_until_the_thread_reads_it() {
    let asking = StreamsAssignor::new(topology(), "app", CONFIG, LocalState::default());
    asking.request_application_shutdown();
    let subscription = |id: &str, user_data| MemberSubscription {
        member_id: id.into(),
        group_instance_id: None,
        topics: Vec::new(),
        owned_partitions: Vec::new(),
        generation_id: 1,
        user_data,
    };
    let stopping = assignor().assign(
        &counts(),
        &[subscription("m1", asking.subscription_user_data(&[], &[]))],
    );
    let receiver = assignor();
    assert!(!receiver.stays_in_group());
    receiver.on_assignment(&stopping["m1"], 1);
    // Stopping on the order, the member will not leave the group.
    assert!(receiver.stays_in_group());
    // The round its revocations bring follows before the thread looks: the order stands.
    let normal = assignor().assign(&counts(), &[member("m1", "p1", &[], vec![])]);
    receiver.on_assignment(&normal["m1"], 2);
    let taken = receiver.take_assignment().expect("an assignment");
    assert!(taken.shutdown_application, "{taken:?}");
}
