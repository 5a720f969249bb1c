//! Where each task runs, worked out by the group's leader after KIP-441 (Kafka Streams'
//! high-availability assignor): a stateful task runs where its state is caught up (within
//! `acceptable.recovery.lag` of its changelogs' ends), preferring the instance that ran it;
//! load is balanced by instance capacity (its stream threads); a task that should move for
//! balance to an instance without its state gets a warmup replica there first (at most
//! `max.warmup.replicas` at once) and moves at a later probing rebalance, once caught up;
//! each stateful task gets `num.standby.replicas` standbys on other instances, where its
//! state is most caught up. The same inputs always give the same placement.

use std::collections::{BTreeMap, BTreeSet};

use eddy_core::streams::TaskId;

/// The offset sum an instance reports for a task it runs as active: caught up by definition
/// (Kafka's `Task.LATEST_OFFSET`).
pub(crate) const RUNNING: i64 = -2;

/// What the leader knows of one instance of the application.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Instance {
    /// How many stream threads it runs: its share of the load.
    pub(crate) threads: usize,
    /// The tasks it ran as active before this rebalance.
    pub(crate) previous_active: BTreeSet<TaskId>,
    /// For each task whose state it holds, the sum of its changelog offsets ([`RUNNING`] for
    /// a task it runs as active).
    pub(crate) offset_sums: BTreeMap<TaskId, i64>,
}

/// The settings placement follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlacementConfig {
    /// `num.standby.replicas`.
    pub(crate) standby_replicas: usize,
    /// `acceptable.recovery.lag`.
    pub(crate) acceptable_recovery_lag: u64,
    /// `max.warmup.replicas`.
    pub(crate) max_warmup_replicas: usize,
}

/// One instance's tasks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Placed {
    /// Tasks it runs.
    pub(crate) active: BTreeSet<TaskId>,
    /// Tasks it keeps a warm copy of, warmups included.
    pub(crate) standby: BTreeSet<TaskId>,
    /// Of the standbys, those that warm up to take the task over.
    pub(crate) warmup: BTreeSet<TaskId>,
}

/// The placement of every task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    /// By instance.
    pub(crate) instances: BTreeMap<String, Placed>,
    /// Whether warmups wait to take tasks over: a probing rebalance should follow.
    pub(crate) probing_rebalance: bool,
}

/// How far behind `end` the state of `task` on `instance` is.
fn lag(instance: &Instance, task: TaskId, end: Option<&i64>) -> u64 {
    match instance.offset_sums.get(&task) {
        Some(&RUNNING) => 0,
        Some(&sum) => end
            .map_or(0, |end| end.saturating_sub(sum.max(0)))
            .unsigned_abs(),
        None => u64::MAX,
    }
}

/// Places `tasks` (those in `stateful` have state; `end_offset_sums` gives the sum of the
/// end offsets of each stateful task's changelogs) on `instances`, by instance id.
pub(crate) fn place(
    instances: &BTreeMap<String, Instance>,
    tasks: &BTreeSet<TaskId>,
    stateful: &BTreeSet<TaskId>,
    end_offset_sums: &BTreeMap<TaskId, i64>,
    config: PlacementConfig,
) -> Placement {
    let mut placed: BTreeMap<String, Placed> = instances
        .keys()
        .map(|id| (id.clone(), Placed::default()))
        .collect();
    if instances.is_empty() {
        return Placement {
            instances: placed,
            probing_rebalance: false,
        };
    }
    let threads: usize = instances.values().map(|i| i.threads.max(1)).sum();
    let total = tasks.len();
    let total_stateful = stateful.iter().filter(|t| tasks.contains(t)).count();
    // The most of `n` tasks an instance should run: its share of the threads, rounded up.
    let share = |id: &str, n: usize| (n * instances[id].threads.max(1)).div_ceil(threads);
    let capacity = |id: &str| share(id, total);
    let lags = |task: TaskId| -> BTreeMap<&str, u64> {
        instances
            .iter()
            .map(|(id, i)| (id.as_str(), lag(i, task, end_offset_sums.get(&task))))
            .collect()
    };
    let caught_up = |lag: u64| lag <= config.acceptable_recovery_lag;
    let load = |placed: &BTreeMap<String, Placed>, id: &str| placed[id].active.len();

    // Stateful tasks first, to where their state is.
    for &task in stateful.iter().filter(|t| tasks.contains(t)) {
        let lags = lags(task);
        let ran_it = instances
            .iter()
            .find(|(_, i)| i.previous_active.contains(&task))
            .map(|(id, _)| id.as_str());
        let choice = match ran_it.filter(|id| caught_up(lags[id])) {
            Some(id) => id,
            None => {
                let best = *lags.values().min().expect("an instance");
                lags.iter()
                    .filter(|(_, &l)| {
                        if caught_up(best) {
                            caught_up(l)
                        } else {
                            l == best
                        }
                    })
                    .min_by_key(|(id, _)| (load(&placed, id), **id))
                    .map(|(id, _)| *id)
                    .expect("an instance")
            }
        };
        placed.get_mut(choice).expect("placed").active.insert(task);
    }

    // Balance the stateful tasks (their state is the load that matters most): an instance
    // over its share gives tasks to one under it — at once where the other is caught up,
    // through a warmup otherwise (the task stays until a probing rebalance finds the warmup
    // caught up; the balance counts it as moved meanwhile).
    let mut counted: BTreeMap<String, usize> = placed
        .iter()
        .map(|(id, p)| (id.clone(), p.active.len()))
        .collect();
    let mut warming: BTreeSet<TaskId> = BTreeSet::new();
    let mut probing_rebalance = false;
    loop {
        let over = counted
            .iter()
            .filter(|(id, &n)| n > share(id, total_stateful))
            .max_by_key(|(id, &n)| (n, std::cmp::Reverse((*id).clone())))
            .map(|(id, _)| id.clone());
        let under = counted
            .iter()
            .filter(|(id, &n)| n < share(id, total_stateful))
            .min_by_key(|(id, &n)| (n, (*id).clone()))
            .map(|(id, _)| id.clone());
        let (Some(over), Some(under)) = (over, under) else {
            break;
        };
        let candidates: Vec<TaskId> = placed[&over]
            .active
            .iter()
            .copied()
            .filter(|t| !warming.contains(t))
            .collect();
        let lag_on = |id: &str, t: &TaskId| lag(&instances[id], *t, end_offset_sums.get(t));
        let lag_on_under = |t: &TaskId| lag_on(&under, t);
        // A task moves at once where it is caught up, or no further behind than where it is.
        let movable = candidates
            .iter()
            .copied()
            .find(|t| caught_up(lag_on_under(t)) || lag_on_under(t) <= lag_on(&over, t));
        match movable {
            Some(task) => {
                placed.get_mut(&over).expect("placed").active.remove(&task);
                placed.get_mut(&under).expect("placed").active.insert(task);
            }
            None if warming.len() < config.max_warmup_replicas => {
                // The task least behind there warms up.
                let Some(&task) = candidates.iter().min_by_key(|t| lag_on_under(t)) else {
                    break;
                };
                let target = placed.get_mut(&under).expect("placed");
                target.warmup.insert(task);
                target.standby.insert(task);
                warming.insert(task);
                probing_rebalance = true;
            }
            None => {
                probing_rebalance = true;
                break;
            }
        }
        *counted.get_mut(&over).expect("counted") -= 1;
        *counted.get_mut(&under).expect("counted") += 1;
    }

    // Stateless tasks where there is room, sticking to where they ran.
    for &task in tasks.iter().filter(|t| !stateful.contains(t)) {
        let ran_it = instances
            .iter()
            .find(|(id, i)| i.previous_active.contains(&task) && counted[*id] < capacity(id))
            .map(|(id, _)| id.clone());
        let choice = ran_it.unwrap_or_else(|| {
            counted
                .iter()
                // The emptiest for its threads.
                .min_by_key(|(id, &n)| (n * threads / instances[*id].threads.max(1), (*id).clone()))
                .map(|(id, _)| id.clone())
                .expect("an instance")
        });
        placed.get_mut(&choice).expect("placed").active.insert(task);
        *counted.get_mut(&choice).expect("counted") += 1;
    }

    // Standbys where the state is most caught up, never beside the active.
    for &task in stateful.iter().filter(|t| tasks.contains(t)) {
        let lags = lags(task);
        let mut others: Vec<&str> = placed
            .iter()
            .filter(|(_, p)| !p.active.contains(&task))
            .map(|(id, _)| id.as_str())
            .collect();
        others.sort_by_key(|id| (lags[id], placed[*id].standby.len(), id.to_string()));
        let have = others
            .iter()
            .filter(|id| placed[**id].standby.contains(&task))
            .count();
        let wanted = config.standby_replicas.saturating_sub(have);
        let chosen: Vec<String> = others
            .iter()
            .filter(|id| !placed[**id].standby.contains(&task))
            .take(wanted)
            .map(|id| id.to_string())
            .collect();
        for id in chosen {
            placed.get_mut(&id).expect("placed").standby.insert(task);
        }
    }
    Placement {
        instances: placed,
        probing_rebalance,
    }
}

#[cfg(test)]
mod tests;
