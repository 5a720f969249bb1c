use proptest::prelude::*;

use super::*;

fn t(subtopology: u32, partition: i32) -> TaskId {
    TaskId {
        subtopology,
        partition,
    }
}

const CONFIG: PlacementConfig = PlacementConfig {
    standby_replicas: 1,
    acceptable_recovery_lag: 100,
    max_warmup_replicas: 2,
};

fn tasks(subtopologies: u32, partitions: i32) -> BTreeSet<TaskId> {
    (0..subtopologies)
        .flat_map(|s| (0..partitions).map(move |p| t(s, p)))
        .collect()
}

fn running(tasks: &BTreeSet<TaskId>) -> Instance {
    Instance {
        threads: 1,
        previous_active: tasks.clone(),
        offset_sums: tasks.iter().map(|t| (*t, RUNNING)).collect(),
    }
}

#[test]
fn a_stable_group_keeps_its_tasks_where_they_are() {
    let all = tasks(2, 4);
    let (a, b): (BTreeSet<_>, BTreeSet<_>) = all.iter().partition(|t| t.partition % 2 == 0);
    let instances = BTreeMap::from([
        ("a".to_string(), running(&a)),
        ("b".to_string(), running(&b)),
    ]);
    let placement = place(&instances, &all, &all, &BTreeMap::new(), CONFIG);
    assert_eq!(placement.instances["a"].active, a);
    assert_eq!(placement.instances["b"].active, b);
    // Each keeps a standby of the other's tasks.
    assert_eq!(placement.instances["a"].standby, b);
    assert!(!placement.probing_rebalance);
}

#[test]
fn a_new_instance_warms_up_before_stateful_tasks_move_and_takes_stateless_ones_at_once() {
    let stateful = tasks(1, 6);
    let stateless: BTreeSet<TaskId> = (0..6).map(|p| t(1, p)).collect();
    let all: BTreeSet<TaskId> = stateful.union(&stateless).copied().collect();
    let old = Instance {
        threads: 1,
        previous_active: all.clone(),
        offset_sums: stateful.iter().map(|t| (*t, RUNNING)).collect(),
    };
    let instances = BTreeMap::from([
        ("old".to_string(), old),
        (
            "new".to_string(),
            Instance {
                threads: 1,
                ..Instance::default()
            },
        ),
    ]);
    let ends: BTreeMap<TaskId, i64> = stateful.iter().map(|t| (*t, 1_000_000)).collect();
    let placement = place(&instances, &all, &stateful, &ends, CONFIG);
    let new = &placement.instances["new"];
    // Every stateful task stays with its state; two warm up on the new instance.
    assert!(placement.instances["old"].active.is_superset(&stateful));
    assert_eq!(new.warmup.len(), 2);
    assert!(new.warmup.is_subset(&stateful));
    assert!(placement.probing_rebalance);
    // The stateless tasks balance what the warmups do not yet.
    assert_eq!(new.active.len(), 4, "{new:?}");
    assert!(new.active.is_subset(&stateless));
}

#[test]
fn a_caught_up_warmup_takes_its_task_over() {
    let all = tasks(1, 2);
    let old = running(&all);
    let new = Instance {
        threads: 1,
        previous_active: BTreeSet::new(),
        // Within acceptable.recovery.lag of the ends.
        offset_sums: all.iter().map(|t| (*t, 950)).collect(),
    };
    let instances = BTreeMap::from([("new".to_string(), new), ("old".to_string(), old)]);
    let ends = all.iter().map(|t| (*t, 1_000)).collect();
    let placement = place(&instances, &all, &all, &ends, CONFIG);
    assert_eq!(placement.instances["new"].active.len(), 1);
    assert_eq!(placement.instances["old"].active.len(), 1);
    assert!(!placement.probing_rebalance);
}

#[test]
fn tasks_of_a_lost_instance_go_where_their_state_is_warmest() {
    let all = tasks(1, 3);
    let survivor_with_standbys = Instance {
        threads: 1,
        previous_active: BTreeSet::new(),
        offset_sums: all.iter().map(|t| (*t, 990)).collect(),
    };
    let fresh = Instance {
        threads: 1,
        ..Instance::default()
    };
    let instances = BTreeMap::from([
        ("fresh".to_string(), fresh),
        ("standby".to_string(), survivor_with_standbys),
    ]);
    let ends = all.iter().map(|t| (*t, 1_000)).collect();
    let placement = place(&instances, &all, &all, &ends, CONFIG);
    // The survivor is caught up on all three: it takes as many as its share, the rest move
    // to the fresh instance only through warmups.
    assert_eq!(placement.instances["standby"].active, all);
    assert_eq!(placement.instances["fresh"].warmup.len(), 1);
}

/// Instances, every task, the stateful ones, and the changelog ends.
type Case = (
    BTreeMap<String, Instance>,
    BTreeSet<TaskId>,
    BTreeSet<TaskId>,
    BTreeMap<TaskId, i64>,
);

fn instances_strategy() -> impl Strategy<Value = Case> {
    (1usize..5, 1u32..4, 1i32..7).prop_flat_map(|(n, subtopologies, partitions)| {
        let all = tasks(subtopologies, partitions);
        let count = all.len();
        (
            proptest::collection::vec(
                (
                    1usize..4,
                    proptest::collection::vec((0usize..n + 1, 0i64..2_000), count),
                ),
                n,
            ),
            proptest::collection::vec(any::<bool>(), count),
            proptest::collection::vec(0usize..n + 1, count),
            Just(all),
        )
            .prop_map(move |(specs, stateful_flags, owners, all)| {
                let list: Vec<TaskId> = all.iter().copied().collect();
                let mut instances = BTreeMap::new();
                for (i, (threads, sums)) in specs.into_iter().enumerate() {
                    let mut instance = Instance {
                        threads,
                        ..Instance::default()
                    };
                    for (k, task) in list.iter().enumerate() {
                        if owners[k] == i {
                            instance.previous_active.insert(*task);
                            instance.offset_sums.insert(*task, RUNNING);
                        } else if sums[k].0 == i {
                            instance.offset_sums.insert(*task, sums[k].1);
                        }
                    }
                    instances.insert(format!("i{i}"), instance);
                }
                let stateful: BTreeSet<TaskId> = list
                    .iter()
                    .zip(&stateful_flags)
                    .filter(|(_, s)| **s)
                    .map(|(t, _)| *t)
                    .collect();
                let ends = stateful.iter().map(|t| (*t, 2_000)).collect();
                (instances, all, stateful, ends)
            })
    })
}

proptest! {
    /// Every task runs exactly once; standbys and warmups never sit beside their active;
    /// each stateful task has its standbys where there are instances for them; warmups stay
    /// within their limit; the same inputs give the same placement.
    #[test]
    fn every_task_runs_once_and_replicas_sit_elsewhere(
        (instances, all, stateful, ends) in instances_strategy(),
    ) {
        let placement = place(&instances, &all, &stateful, &ends, CONFIG);
        for task in &all {
            let owners = placement.instances.values().filter(|p| p.active.contains(task)).count();
            prop_assert_eq!(owners, 1, "{:?}", task);
        }
        let mut warmups = 0;
        for placed in placement.instances.values() {
            prop_assert!(placed.active.is_disjoint(&placed.standby));
            prop_assert!(placed.warmup.is_subset(&placed.standby));
            prop_assert!(placed.standby.is_subset(&stateful));
            warmups += placed.warmup.len();
        }
        prop_assert!(warmups <= CONFIG.max_warmup_replicas);
        let wanted = CONFIG.standby_replicas.min(instances.len() - 1);
        for task in &stateful {
            let standbys = placement.instances.values().filter(|p| p.standby.contains(task)).count();
            prop_assert!(standbys >= wanted, "{:?} has {} standbys", task, standbys);
        }
        prop_assert_eq!(place(&instances, &all, &stateful, &ends, CONFIG), placement);
    }

    /// Stateless tasks balance the load: no instance runs more than its share of the
    /// threads (rounded up) unless stateful tasks wait for warmups.
    #[test]
    fn without_state_the_load_follows_the_threads((instances, all, _, ends) in instances_strategy()) {
        let placement = place(&instances, &all, &BTreeSet::new(), &ends, CONFIG);
        let threads: usize = instances.values().map(|i| i.threads).sum();
        for (id, placed) in &placement.instances {
            let share = (all.len() * instances[id].threads).div_ceil(threads);
            prop_assert!(placed.active.len() <= share, "{} runs {} of {}", id, placed.active.len(), share);
        }
        prop_assert!(!placement.probing_rebalance);
    }
}
