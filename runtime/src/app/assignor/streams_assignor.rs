//! [`StreamsAssignor`]: the consumer-protocol assignor of a streams application. Each member
//! subscribes with what its instance holds ([`protocol::Subscription`]); the leader works out
//! the tasks from the topology and the topics' partition counts, places them
//! ([`placement::place`]), deals each instance's tasks to its stream threads (keeping a task
//! on the thread that ran it), and gives each member its tasks' partitions with a
//! [`protocol::TaskAssignment`]. Assignment is cooperative: a task whose partitions another
//! member still owns waits for that member to give them up, one rebalance later.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use eddy_core::log::TopicPartition;
use eddy_core::streams::{TaskId, Topology};

use super::placement::{place, Instance, PlacementConfig, RUNNING};
use super::protocol::{Subscription, TaskAssignment, WirePartition, WireTask, VERSION};
use crate::app::topics::plan;
use crate::client::{Assignment, Assignor, MemberSubscription, RebalanceProtocol};

/// What this member reports when it joins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LocalState {
    /// The instance's id, shared by its stream threads.
    pub(crate) process: String,
    /// The tasks this thread runs.
    pub(crate) owned_tasks: BTreeSet<TaskId>,
    /// For each task whose state the instance holds, the sum of its changelog offsets.
    pub(crate) offset_sums: BTreeMap<TaskId, i64>,
    /// For each task this member holds, the sum of its changelogs' ends as last seen.
    pub(crate) end_offset_sums: BTreeMap<TaskId, i64>,
    /// `application.server`.
    pub(crate) endpoint: Option<String>,
    /// Whether this instance asks the whole application to shut down.
    pub(crate) shutdown_requested: bool,
}

/// The streams application's assignor.
pub(crate) struct StreamsAssignor {
    topology: Arc<Topology>,
    application_id: String,
    config: PlacementConfig,
    local: Mutex<LocalState>,
    received: Mutex<Option<TaskAssignment>>,
    /// Set once the application's shutdown is ordered: the member then closes without
    /// leaving the group.
    shutdown_ordered: AtomicBool,
}

impl std::fmt::Debug for StreamsAssignor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamsAssignor")
            .field("application_id", &self.application_id)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The application's tasks with their partitions, and those that keep state.
type Tasks = (BTreeMap<TaskId, Vec<TopicPartition>>, BTreeSet<TaskId>);

impl StreamsAssignor {
    /// The assignor of `topology` run as `application_id`, reporting `local`.
    pub(crate) fn new(
        topology: Arc<Topology>,
        application_id: impl Into<String>,
        config: PlacementConfig,
        local: LocalState,
    ) -> Self {
        Self {
            topology,
            application_id: application_id.into(),
            config,
            local: Mutex::new(local),
            received: Mutex::new(None),
            shutdown_ordered: AtomicBool::new(false),
        }
    }

    /// What this member reports at its next join: the tasks it runs, the offset sums of the
    /// state its instance holds, and the changelog ends it last saw.
    pub(crate) fn set_owned(
        &self,
        owned: BTreeSet<TaskId>,
        offset_sums: BTreeMap<TaskId, i64>,
        end_offset_sums: BTreeMap<TaskId, i64>,
    ) {
        let mut local = lock(&self.local);
        local.owned_tasks = owned;
        local.offset_sums = offset_sums;
        local.end_offset_sums = end_offset_sums;
    }

    /// Asks, at this member's next join, that every instance of the application shut down.
    pub(crate) fn request_application_shutdown(&self) {
        lock(&self.local).shutdown_requested = true;
    }

    /// Records that the application's shutdown was ordered to this member's instance (by
    /// the assignment of this member or of another thread of the instance).
    pub(crate) fn application_shutdown_ordered(&self) {
        self.shutdown_ordered.store(true, Ordering::Release);
    }

    /// Whether the member, stopping, stays in the group until its session times out instead
    /// of leaving. Members stopping on the application's shutdown do, as Kafka Streams'
    /// members always do: a member leaving would start a rebalance, and a member of another
    /// instance whose SyncGroup came after it would be answered with that rebalance instead
    /// of the assignment that orders it to shut down, and then be given tasks by survivors
    /// that know nothing of the order.
    pub(crate) fn stays_in_group(&self) -> bool {
        self.shutdown_ordered.load(Ordering::Acquire)
    }

    /// Whether this member asks for the application's shutdown.
    pub(crate) fn shutdown_requested(&self) -> bool {
        lock(&self.local).shutdown_requested
    }

    /// The assignment this member last received, taken.
    pub(crate) fn take_assignment(&self) -> Option<TaskAssignment> {
        lock(&self.received).take()
    }

    /// The tasks of the topology on topics with these partition counts.
    fn tasks(&self, partitions_per_topic: &BTreeMap<String, i32>) -> Result<Tasks, String> {
        let app = &self.application_id;
        let plan = plan(&self.topology, app, |t| {
            partitions_per_topic.get(t).copied()
        })
        .map_err(|e| e.to_string())?;
        let count = |topic: &str| {
            plan.internal
                .iter()
                .find(|t| t.name == topic)
                .map(|t| t.partitions)
                .or_else(|| partitions_per_topic.get(topic).copied())
                .unwrap_or(0)
        };
        let mut tasks = BTreeMap::new();
        let mut stateful = BTreeSet::new();
        for s in self.topology.subtopologies().iter().filter(|s| !s.global) {
            let Some(&(_, n)) = plan.tasks.iter().find(|(id, _)| *id == s.id) else {
                continue;
            };
            let topics: Vec<String> = s
                .source_topics
                .iter()
                .map(|t| self.topology.full_topic_name(app, t))
                .collect();
            for p in 0..n {
                let task = TaskId {
                    subtopology: s.id,
                    partition: p,
                };
                let partitions = topics
                    .iter()
                    .filter(|t| p < count(t))
                    .map(|t| TopicPartition::new(t.as_str(), p))
                    .collect();
                tasks.insert(task, partitions);
                if !s.stores.is_empty() {
                    stateful.insert(task);
                }
            }
        }
        Ok((tasks, stateful))
    }
}

/// A member as the leader reads it.
struct Member<'a> {
    id: &'a str,
    subscription: Subscription,
    owned_partitions: &'a [TopicPartition],
}

impl Assignor for StreamsAssignor {
    fn name(&self) -> &str {
        "stream"
    }

    fn rebalance_protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Cooperative
    }

    fn subscription_user_data(
        &self,
        _topics: &[String],
        _owned: &[TopicPartition],
    ) -> Option<Bytes> {
        let local = lock(&self.local);
        let subscription = Subscription {
            version: VERSION,
            process: local.process.clone(),
            owned_tasks: local.owned_tasks.iter().map(|&t| t.into()).collect(),
            offset_sums: local
                .offset_sums
                .iter()
                .map(|(&t, &s)| (t.into(), s))
                .collect(),
            end_offset_sums: local
                .end_offset_sums
                .iter()
                .map(|(&t, &s)| (t.into(), s))
                .collect(),
            endpoint: local.endpoint.clone(),
            shutdown_requested: local.shutdown_requested,
        };
        Some(subscription.encode())
    }

    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> BTreeMap<String, Assignment> {
        let members: Vec<Member<'_>> = members
            .iter()
            .map(|m| {
                let decoded = m.user_data.as_deref().map(Subscription::decode);
                let subscription = match decoded {
                    Some(Ok(s)) => s,
                    other => {
                        if let Some(Err(e)) = other {
                            tracing::warn!(member = %m.member_id, "{e}; taken as an instance without state");
                        }
                        Subscription {
                            version: VERSION,
                            process: m.member_id.clone(),
                            owned_tasks: Vec::new(),
                            offset_sums: Vec::new(),
                            end_offset_sums: Vec::new(),
                            endpoint: None,
                            shutdown_requested: false,
                        }
                    }
                };
                Member {
                    id: &m.member_id,
                    subscription,
                    owned_partitions: &m.owned_partitions,
                }
            })
            .collect();
        if let Some(asking) = members.iter().find(|m| m.subscription.shutdown_requested) {
            tracing::warn!(
                instance = %asking.subscription.process,
                "an instance asks the application to shut down"
            );
            let assignment = TaskAssignment {
                version: VERSION,
                shutdown_application: true,
                ..TaskAssignment::default()
            };
            return every_member(&members, &assignment);
        }
        let (tasks, stateful) = match self.tasks(partitions_per_topic) {
            Ok(tasks) => tasks,
            Err(error) => {
                let assignment = TaskAssignment {
                    version: VERSION,
                    error: Some(error),
                    ..TaskAssignment::default()
                };
                return every_member(&members, &assignment);
            }
        };

        // Instances, from their members.
        let mut instances: BTreeMap<String, Instance> = BTreeMap::new();
        let mut threads: BTreeMap<String, Vec<&Member<'_>>> = BTreeMap::new();
        // A changelog's end is the furthest any member saw, its state included.
        let mut ends: BTreeMap<TaskId, i64> = BTreeMap::new();
        for m in &members {
            let s = &m.subscription;
            for &(task, sum) in s.end_offset_sums.iter().chain(&s.offset_sums) {
                let end = ends.entry(task.into()).or_insert(sum);
                *end = (*end).max(sum);
            }
        }
        for m in &members {
            let s = &m.subscription;
            let instance = instances.entry(s.process.clone()).or_default();
            instance.threads += 1;
            instance
                .previous_active
                .extend(s.owned_tasks.iter().map(|&t| TaskId::from(t)));
            // The threads of an instance share its state: a task one of them runs is
            // caught up whatever another reports of it; otherwise the furthest sum counts.
            for &(task, sum) in &s.offset_sums {
                let known = instance.offset_sums.entry(task.into()).or_insert(sum);
                if *known != RUNNING && (sum == RUNNING || sum > *known) {
                    *known = sum;
                }
            }
            threads.entry(s.process.clone()).or_default().push(m);
        }
        let all: BTreeSet<TaskId> = tasks.keys().copied().collect();
        let placement = place(&instances, &all, &stateful, &ends, self.config);

        // Each instance's tasks, dealt to its threads.
        let mut active: BTreeMap<&str, BTreeSet<TaskId>> = BTreeMap::new();
        let mut standby: BTreeMap<&str, BTreeSet<TaskId>> = BTreeMap::new();
        for (process, placed) in &placement.instances {
            let members = &threads[process];
            deal(&placed.active, members, &mut active, true);
            deal(&placed.standby, members, &mut standby, false);
        }

        // Who holds which partitions now: a task waits while another member owns them.
        let mut owner: BTreeMap<&TopicPartition, &str> = BTreeMap::new();
        for m in &members {
            for tp in m.owned_partitions {
                owner.insert(tp, m.id);
            }
        }
        let partitions_of = |tasks_of: &BTreeSet<TaskId>| -> Vec<WirePartition> {
            tasks_of
                .iter()
                .flat_map(|t| tasks[t].iter().map(WirePartition::from))
                .collect()
        };
        let by_host = |of: &BTreeMap<&str, BTreeSet<TaskId>>| -> Vec<(String, Vec<WirePartition>)> {
            let mut hosts: BTreeMap<String, Vec<WirePartition>> = BTreeMap::new();
            for m in &members {
                if let (Some(endpoint), Some(t)) = (&m.subscription.endpoint, of.get(m.id)) {
                    hosts
                        .entry(endpoint.clone())
                        .or_default()
                        .extend(partitions_of(t));
                }
            }
            hosts
                .into_iter()
                .map(|(h, mut p)| {
                    p.sort();
                    (h, p)
                })
                .collect()
        };
        let partitions_by_host = by_host(&active);
        let standby_partitions_by_host = by_host(&standby);
        members
            .iter()
            .map(|m| {
                let mine: Vec<TaskId> = active
                    .get(m.id)
                    .into_iter()
                    .flatten()
                    .copied()
                    .filter(|t| {
                        tasks[t]
                            .iter()
                            .all(|tp| owner.get(tp).is_none_or(|&o| o == m.id))
                    })
                    .collect();
                let mut partitions: Vec<TopicPartition> =
                    mine.iter().flat_map(|t| tasks[t].iter().cloned()).collect();
                partitions.sort();
                let info = TaskAssignment {
                    version: VERSION,
                    active: mine.iter().map(|&t| WireTask::from(t)).collect(),
                    standby: standby
                        .get(m.id)
                        .into_iter()
                        .flatten()
                        .map(|&t| WireTask::from(t))
                        .collect(),
                    warmup: standby
                        .get(m.id)
                        .into_iter()
                        .flatten()
                        .filter(|t| {
                            placement
                                .instances
                                .get(&m.subscription.process)
                                .is_some_and(|p| p.warmup.contains(t))
                        })
                        .map(|&t| WireTask::from(t))
                        .collect(),
                    partitions_by_host: partitions_by_host.clone(),
                    standby_partitions_by_host: standby_partitions_by_host.clone(),
                    probing_rebalance: placement.probing_rebalance,
                    error: None,
                    shutdown_application: false,
                };
                let assignment = Assignment {
                    partitions,
                    user_data: Some(info.encode()),
                };
                (m.id.to_string(), assignment)
            })
            .collect()
    }

    fn on_assignment(&self, assignment: &Assignment, _generation_id: i32) {
        let received = match assignment.user_data.as_deref().map(TaskAssignment::decode) {
            Some(Ok(info)) => info,
            Some(Err(e)) => TaskAssignment {
                version: VERSION,
                error: Some(e.to_string()),
                ..TaskAssignment::default()
            },
            None => TaskAssignment {
                version: VERSION,
                error: Some("the leader sent no task assignment".into()),
                ..TaskAssignment::default()
            },
        };
        if received.shutdown_application {
            self.application_shutdown_ordered();
        }
        let mut slot = lock(&self.received);
        // An order to shut the application down is not taken back by a later round (the
        // follow-up rebalance its revocations bring) before the thread reads it.
        if slot.as_ref().is_some_and(|a| a.shutdown_application) {
            return;
        }
        *slot = Some(received);
    }
}

/// The same assignment, without partitions, for every member.
fn every_member(
    members: &[Member<'_>],
    assignment: &TaskAssignment,
) -> BTreeMap<String, Assignment> {
    members
        .iter()
        .map(|m| {
            let a = Assignment {
                partitions: Vec::new(),
                user_data: Some(assignment.encode()),
            };
            (m.id.to_string(), a)
        })
        .collect()
}

/// Deals `tasks` to an instance's `members` (its threads) as evenly as they go; actives
/// first stay on the thread that ran them.
fn deal<'a>(
    tasks: &BTreeSet<TaskId>,
    members: &[&Member<'a>],
    into: &mut BTreeMap<&'a str, BTreeSet<TaskId>>,
    sticky: bool,
) {
    let share = tasks.len().div_ceil(members.len().max(1));
    let mut left: Vec<TaskId> = Vec::new();
    for &task in tasks {
        let ran_it = sticky
            .then(|| {
                members.iter().find(|m| {
                    m.subscription.owned_tasks.contains(&task.into())
                        && into.get(m.id).map_or(0, BTreeSet::len) < share
                })
            })
            .flatten();
        match ran_it {
            Some(m) => {
                into.entry(m.id).or_default().insert(task);
            }
            None => left.push(task),
        }
    }
    for task in left {
        let least = members
            .iter()
            .min_by_key(|m| (into.get(m.id).map_or(0, BTreeSet::len), m.id))
            .expect("an instance has a thread");
        into.entry(least.id).or_default().insert(task);
    }
}

#[cfg(test)]
mod tests;
