//! What an application sets up on the cluster when it starts, before any task runs: the
//! topics of its [`TopicPlan`], created where they are missing and checked where they exist
//! (an internal topic with other partition counts than the plan's would send a key's
//! records or state to the wrong task, so it is refused).

use std::collections::HashMap;

use eddy_core::streams::Topology;

use super::topics::{plan, TopicError, TopicPlan};
use super::StreamsConfig;
use crate::client::{Admin, ClientError, NewTopic};

/// Why an application could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The topology's topics cannot be used as they are.
    #[error(transparent)]
    Topics(#[from] TopicError),
    /// An internal topic exists with other partitions than the application needs.
    #[error(
        "internal topic {topic} has {actual} partitions, but the application needs {expected} \
         (delete it, or reset the application, to start afresh)"
    )]
    InternalTopicPartitions {
        /// The topic.
        topic: String,
        /// What the plan needs.
        expected: i32,
        /// What it has.
        actual: i32,
    },
    /// The cluster could not be asked or did not do what was asked.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The application was started already (it is in this state).
    #[error("the application is {0:?}, not created: it starts once")]
    NotCreated(super::State),
    /// The application's state directory (or the embedded broker's log in it) cannot be used.
    #[error("the state directory {}: {source}", dir.display())]
    StateDir {
        /// The directory.
        dir: std::path::PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
}

/// Works out the application's topics from what the cluster holds, creates the internal
/// topics that are missing (with the plan's partitions and configs, and `replication.factor`)
/// and checks those that exist.
pub async fn create_internal_topics(
    admin: &Admin,
    topology: &Topology,
    config: &StreamsConfig,
) -> Result<TopicPlan, StartError> {
    let app = &config.application_id;
    let existing = admin.list_topics(false).await?;
    let mut wanted: Vec<String> = topology
        .subtopologies()
        .iter()
        .flat_map(|s| {
            s.source_topics
                .iter()
                .map(|t| topology.full_topic_name(app, t))
        })
        .chain(
            topology
                .internal_topics()
                .iter()
                .map(|t| format!("{app}-{}", t.name)),
        )
        .filter(|t| existing.contains(t))
        .collect();
    wanted.sort();
    wanted.dedup();
    let mut partitions = HashMap::new();
    if !wanted.is_empty() {
        let names: Vec<&str> = wanted.iter().map(String::as_str).collect();
        for topic in admin.describe_topics(&names).await? {
            let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
            partitions.insert(topic.name, count);
        }
    }
    let plan = plan(topology, app, |t| partitions.get(t).copied())?;
    for spec in &plan.internal {
        match partitions.get(&spec.name) {
            Some(&actual) if actual != spec.partitions => {
                return Err(StartError::InternalTopicPartitions {
                    topic: spec.name.clone(),
                    expected: spec.partitions,
                    actual,
                });
            }
            Some(_) => {}
            None => {
                let topic = NewTopic {
                    name: spec.name.clone(),
                    partitions: spec.partitions,
                    replication_factor: config.replication_factor,
                    configs: spec.configs.iter().cloned().collect(),
                };
                // Another instance may create it at the same moment.
                admin.ensure_topic(&topic).await?;
            }
        }
    }
    Ok(plan)
}
