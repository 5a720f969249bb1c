//! The topics an application needs before its tasks run, as Kafka Streams works them out at
//! its first rebalance: every source topic must exist; repartition topics get as many
//! partitions as the sub-topologies writing them read at most; the inputs of each join must
//! have equal partition counts (repartition topics among them are sized to match); a
//! sub-topology runs one task per partition of its widest input; and each logged store's
//! changelog gets one partition per task, compacted (windowed stores also delete after
//! their retention and a day).

use std::collections::HashMap;

use eddy_core::streams::internals::InternalTopicKind;
use eddy_core::streams::Topology;

/// A topic the application creates for itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalTopicSpec {
    /// Its full name (`<application id>-…`).
    pub name: String,
    /// Repartition or changelog.
    pub kind: InternalTopicKind,
    /// How many partitions it has.
    pub partitions: i32,
    /// The topic configs it is created with.
    pub configs: Vec<(String, String)>,
}

/// What an application's topology needs of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPlan {
    /// The internal topics, repartition topics first, each kind in name order.
    pub internal: Vec<InternalTopicSpec>,
    /// How many tasks each sub-topology runs (by its number), global ones left out.
    pub tasks: Vec<(u32, i32)>,
}

/// Why an application cannot start on this cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// Source topics that do not exist.
    #[error(
        "source topics missing: {} (create them before the application starts)",
        .0.join(", ")
    )]
    MissingSources(Vec<String>),
    /// The inputs of a join with different partition counts.
    #[error(
        "topics joined with one another must have as many partitions each: {}",
        .0.iter().map(|(t, n)| format!("{t} has {n}")).collect::<Vec<_>>().join(", ")
    )]
    NotCopartitioned(Vec<(String, i32)>),
    /// Repartition topics whose partition count depends only on one another.
    #[error("cannot work out how many partitions these repartition topics need: {}", .0.join(", "))]
    Unresolved(Vec<String>),
}

/// The plan for `topology` run as `application_id` on a cluster where `partitions` gives
/// each existing topic's partition count.
pub fn plan(
    topology: &Topology,
    application_id: &str,
    partitions: impl Fn(&str) -> Option<i32>,
) -> Result<TopicPlan, TopicError> {
    let full = |topic: &str| topology.full_topic_name(application_id, topic);
    let repartition: Vec<&str> = topology
        .internal_topics()
        .iter()
        .filter(|t| t.kind == InternalTopicKind::Repartition)
        .map(|t| t.name.as_str())
        .collect();
    let subtopologies = topology.subtopologies();

    // Every topic read that the application does not create must exist.
    let mut counts: HashMap<String, i32> = HashMap::new();
    let mut missing = Vec::new();
    for topic in subtopologies.iter().flat_map(|s| &s.source_topics) {
        if repartition.contains(&topic.as_str()) || counts.contains_key(topic) {
            continue;
        }
        match partitions(topic) {
            Some(n) => {
                counts.insert(topic.clone(), n);
            }
            None if !missing.contains(topic) => missing.push(topic.clone()),
            None => {}
        }
    }
    if !missing.is_empty() {
        missing.sort();
        return Err(TopicError::MissingSources(missing));
    }

    // A repartition topic has as many partitions as the sub-topologies that write it read
    // at most, worked out as far upstream as it takes.
    let mut unresolved: Vec<&str> = repartition.clone();
    while !unresolved.is_empty() {
        let before = unresolved.len();
        unresolved.retain(|&topic| {
            let widest = subtopologies
                .iter()
                .filter(|s| s.sink_topics.iter().any(|t| t == topic))
                .map(|s| {
                    s.source_topics
                        .iter()
                        .map(|t| counts.get(t).copied())
                        .try_fold(0, |widest, n| n.map(|n| widest.max(n)))
                })
                .try_fold(0, |widest, n| n.map(|n| widest.max(n)));
            match widest {
                Some(n) if n > 0 => {
                    counts.insert(topic.to_string(), n);
                    false
                }
                _ => true,
            }
        });
        if unresolved.len() == before {
            let mut names: Vec<String> = unresolved.iter().map(|t| full(t)).collect();
            names.sort();
            return Err(TopicError::Unresolved(names));
        }
    }

    // The inputs of a join: topics the application does not create must agree; its own
    // repartition topics follow them.
    for group in topology.copartition_groups() {
        let (internal, external): (Vec<&String>, Vec<&String>) = group
            .iter()
            .partition(|t| repartition.contains(&t.as_str()));
        let external_counts: Vec<(String, i32)> = external
            .iter()
            .map(|t| ((*t).clone(), counts[*t]))
            .collect();
        if external_counts.windows(2).any(|w| w[0].1 != w[1].1) {
            return Err(TopicError::NotCopartitioned(external_counts));
        }
        let size = match external_counts.first() {
            Some((_, n)) => *n,
            None => internal.iter().map(|t| counts[*t]).max().unwrap_or(1),
        };
        for topic in internal {
            counts.insert(topic.clone(), size);
        }
    }

    let tasks: Vec<(u32, i32)> = subtopologies
        .iter()
        .filter(|s| !s.global)
        .map(|s| {
            let widest = s.source_topics.iter().map(|t| counts[t]).max().unwrap_or(1);
            (s.id, widest)
        })
        .collect();

    let mut internal: Vec<InternalTopicSpec> = repartition
        .iter()
        .map(|topic| InternalTopicSpec {
            name: full(topic),
            kind: InternalTopicKind::Repartition,
            partitions: counts[*topic],
            configs: configs(&[
                ("cleanup.policy", "delete"),
                ("segment.bytes", "52428800"),
                ("retention.ms", "-1"),
                ("message.timestamp.type", "CreateTime"),
            ]),
        })
        .collect();
    internal.sort_by(|a, b| a.name.cmp(&b.name));
    let mut changelogs = Vec::new();
    for store in topology.stores() {
        if !store.logging() || store.is_global() {
            continue;
        }
        let Some(partitions) = subtopologies
            .iter()
            .filter(|s| !s.global && s.stores.iter().any(|n| n == store.name()))
            .filter_map(|s| tasks.iter().find(|(id, _)| *id == s.id))
            .map(|(_, n)| *n)
            .max()
        else {
            // A store no processor uses has no task, and so no changelog.
            continue;
        };
        // As the store's kind keeps its changelog.
        let configs = store
            .kind()
            .rules()
            .changelog_configs()
            .into_iter()
            .map(|(key, value)| (key.to_string(), value))
            .collect();
        changelogs.push(InternalTopicSpec {
            name: format!("{application_id}-{}-changelog", store.name()),
            kind: InternalTopicKind::Changelog,
            partitions,
            configs,
        });
    }
    changelogs.sort_by(|a, b| a.name.cmp(&b.name));
    internal.extend(changelogs);
    Ok(TopicPlan { internal, tasks })
}

fn configs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
