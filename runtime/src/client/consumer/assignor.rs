//! Partition assignment, run by the group's leader in the client as Kafka's classic protocol
//! does: the [`Assignor`] trait, and Kafka's `range`, `roundrobin` and `cooperative-sticky`
//! assignors. An assignor may carry its own data in the subscription and the assignment
//! (`user_data`): the streams runtime's task assignor does.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

use bytes::Bytes;
use eddy_core::log::TopicPartition;

/// Whether members give up every partition before a rebalance (eager) or only those that
/// move (cooperative, KIP-429).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebalanceProtocol {
    /// Every member revokes all its partitions before joining.
    Eager,
    /// Members keep their partitions through a rebalance; a partition that moves is revoked
    /// by its owner first, then assigned in a second rebalance.
    Cooperative,
}

/// What a member sent when it joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSubscription {
    /// The member id.
    pub member_id: String,
    /// Its `group.instance.id`, for static members.
    pub group_instance_id: Option<String>,
    /// The topics it reads.
    pub topics: Vec<String>,
    /// The partitions it holds now (cooperative protocols).
    pub owned_partitions: Vec<TopicPartition>,
    /// The generation of those partitions, or -1.
    pub generation_id: i32,
    /// The assignor's own data.
    pub user_data: Option<Bytes>,
}

impl MemberSubscription {
    /// The key members are ordered by: the instance id of static members, else the member id.
    fn sort_key(&self) -> &str {
        self.group_instance_id.as_deref().unwrap_or(&self.member_id)
    }
}

/// A member's share.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// Its partitions.
    pub partitions: Vec<TopicPartition>,
    /// The assignor's own data.
    pub user_data: Option<Bytes>,
}

/// A partition assignment strategy (`partition.assignment.strategy`).
pub trait Assignor: Send + Sync + Debug {
    /// The protocol name members vote with (`range`, `cooperative-sticky`, …).
    fn name(&self) -> &str;

    /// Eager or cooperative.
    fn rebalance_protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Eager
    }

    /// Data for this member's subscription, given what it holds now.
    fn subscription_user_data(
        &self,
        _topics: &[String],
        _owned: &[TopicPartition],
    ) -> Option<Bytes> {
        None
    }

    /// The leader's work: each member's assignment, by member id, given the partition count
    /// of every topic any member reads (topics that do not exist are left out).
    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> BTreeMap<String, Assignment>;

    /// Told to every member when its assignment arrives.
    fn on_assignment(&self, _assignment: &Assignment, _generation_id: i32) {}
}

fn members_sorted(members: &[MemberSubscription]) -> Vec<&MemberSubscription> {
    let mut sorted: Vec<_> = members.iter().collect();
    sorted.sort_by(|a, b| a.sort_key().cmp(b.sort_key()));
    sorted
}

fn empty_assignments(members: &[MemberSubscription]) -> BTreeMap<String, Assignment> {
    members
        .iter()
        .map(|m| (m.member_id.clone(), Assignment::default()))
        .collect()
}

/// Kafka's `range`: per topic, the partitions in order cut into consecutive ranges, one per
/// subscribed member in order; the first members get one more when they do not divide.
#[derive(Debug, Clone, Copy, Default)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &str {
        "range"
    }

    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> BTreeMap<String, Assignment> {
        let mut out = empty_assignments(members);
        let sorted = members_sorted(members);
        for (topic, &count) in partitions_per_topic {
            let readers: Vec<_> = sorted.iter().filter(|m| m.topics.contains(topic)).collect();
            if readers.is_empty() {
                continue;
            }
            let n = readers.len() as i32;
            let (each, extra) = (count / n, count % n);
            let mut next = 0;
            for (i, member) in readers.iter().enumerate() {
                let take = each + i32::from((i as i32) < extra);
                let share = out
                    .get_mut(&member.member_id)
                    .expect("every member has an entry");
                share
                    .partitions
                    .extend((next..next + take).map(|p| TopicPartition::new(topic.as_str(), p)));
                next += take;
            }
        }
        out
    }
}

/// Kafka's `roundrobin`: every partition of every topic in order, dealt to the members in
/// turn, skipping members that do not read the partition's topic.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
    fn name(&self) -> &str {
        "roundrobin"
    }

    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> BTreeMap<String, Assignment> {
        let mut out = empty_assignments(members);
        let sorted = members_sorted(members);
        if sorted.is_empty() {
            return out;
        }
        let mut turn = 0;
        for (topic, &count) in partitions_per_topic {
            for p in 0..count {
                for _ in 0..sorted.len() {
                    let member = sorted[turn % sorted.len()];
                    turn += 1;
                    if member.topics.contains(topic) {
                        out.get_mut(&member.member_id)
                            .expect("every member has an entry")
                            .partitions
                            .push(TopicPartition::new(topic.as_str(), p));
                        break;
                    }
                }
            }
        }
        out
    }
}

/// Kafka's `cooperative-sticky`: a balanced assignment (counts differ by at most one among
/// members reading the same topics) that keeps as many partitions as possible where they
/// are. Used with the cooperative protocol: a partition that must move is first left out
/// of the assignment, so that its owner revokes it; the rebalance that follows gives it to
/// its new member.
#[derive(Debug, Clone, Copy, Default)]
pub struct CooperativeStickyAssignor;

impl Assignor for CooperativeStickyAssignor {
    fn name(&self) -> &str {
        "cooperative-sticky"
    }

    fn rebalance_protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Cooperative
    }

    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> BTreeMap<String, Assignment> {
        let sticky = sticky_assignment(partitions_per_topic, members);
        // Owners as the members reported them, the newest generation winning a dispute.
        let mut owner: BTreeMap<&TopicPartition, (&str, i32)> = BTreeMap::new();
        for m in members {
            for tp in &m.owned_partitions {
                let claim = (m.member_id.as_str(), m.generation_id);
                match owner.get(tp) {
                    Some(&(_, generation)) if generation >= m.generation_id => {}
                    _ => {
                        owner.insert(tp, claim);
                    }
                }
            }
        }
        sticky
            .into_iter()
            .map(|(member, partitions)| {
                // A partition still owned by someone else waits for its owner to revoke it.
                let kept = partitions
                    .into_iter()
                    .filter(|tp| owner.get(tp).is_none_or(|&(o, _)| o == member))
                    .collect();
                (
                    member,
                    Assignment {
                        partitions: kept,
                        user_data: None,
                    },
                )
            })
            .collect()
    }
}

/// The balanced, sticky assignment before the cooperative adjustment.
fn sticky_assignment(
    partitions_per_topic: &BTreeMap<String, i32>,
    members: &[MemberSubscription],
) -> BTreeMap<String, Vec<TopicPartition>> {
    let sorted = members_sorted(members);
    let mut out: BTreeMap<String, Vec<TopicPartition>> = members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect();
    let exists = |tp: &TopicPartition| {
        partitions_per_topic
            .get(&tp.topic)
            .is_some_and(|&n| (0..n).contains(&tp.partition))
    };
    // Group members by the exact set of topics they read; balance within each group of
    // partitions they share. (With one subscription for the whole group, as is usual, this
    // is one pass over everything.)
    let mut by_topics: BTreeMap<BTreeSet<&str>, Vec<&MemberSubscription>> = BTreeMap::new();
    for m in &sorted {
        let topics: BTreeSet<&str> = m
            .topics
            .iter()
            .map(String::as_str)
            .filter(|t| partitions_per_topic.contains_key(*t))
            .collect();
        by_topics.entry(topics).or_default().push(m);
    }
    let mut taken: BTreeSet<TopicPartition> = BTreeSet::new();
    for (topics, group) in by_topics {
        let all: Vec<TopicPartition> = topics
            .iter()
            .flat_map(|t| (0..partitions_per_topic[*t]).map(move |p| TopicPartition::new(*t, p)))
            .filter(|tp| !taken.contains(tp))
            .collect();
        let n = group.len();
        let (floor, extra) = (all.len() / n, all.len() % n);
        // Keep owned partitions up to the quota: `extra` members may keep floor + 1.
        let mut ceilings_left = extra;
        let mut kept: Vec<Vec<TopicPartition>> = Vec::with_capacity(n);
        let mut newest: BTreeMap<&TopicPartition, i32> = BTreeMap::new();
        for m in &group {
            for tp in &m.owned_partitions {
                let g = newest.entry(tp).or_insert(m.generation_id);
                *g = (*g).max(m.generation_id);
            }
        }
        // Members holding the most choose first, so the +1 slots go to those already there.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(group[i].owned_partitions.len()));
        kept.resize_with(n, Vec::new);
        for &i in &order {
            let m = group[i];
            let mut mine: Vec<TopicPartition> = m
                .owned_partitions
                .iter()
                .filter(|tp| {
                    exists(tp)
                        && topics.contains(tp.topic.as_str())
                        && !taken.contains(*tp)
                        && newest.get(tp) == Some(&m.generation_id)
                })
                .cloned()
                .collect();
            mine.sort();
            mine.dedup();
            let quota = if ceilings_left > 0 && mine.len() > floor {
                ceilings_left -= 1;
                floor + 1
            } else {
                floor
            };
            mine.truncate(quota);
            taken.extend(mine.iter().cloned());
            kept[i] = mine;
        }
        // The rest go to whoever has least, in member order.
        let free: Vec<TopicPartition> = all.into_iter().filter(|tp| !taken.contains(tp)).collect();
        for tp in free {
            let target = (0..n)
                .filter(|&i| kept[i].len() < floor || (kept[i].len() == floor && ceilings_left > 0))
                .min_by_key(|&i| (kept[i].len(), i))
                .or_else(|| (0..n).min_by_key(|&i| (kept[i].len(), i)))
                .expect("the group has members");
            if kept[target].len() == floor {
                ceilings_left = ceilings_left.saturating_sub(1);
            }
            taken.insert(tp.clone());
            kept[target].push(tp);
        }
        for (i, m) in group.iter().enumerate() {
            let mut mine = std::mem::take(&mut kept[i]);
            mine.sort();
            out.insert(m.member_id.clone(), mine);
        }
    }
    out
}

#[cfg(test)]
mod tests;
