//! `eddy topics create | list | describe | delete`: what Kafka's `kafka-topics.sh` does, with
//! its output.

use crate::client::{Admin, ClientError, ConfigError, NewTopic};

/// Creates a topic; `configs` are `key=value` settings.
pub async fn create(
    admin: &Admin,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[String],
) -> Result<String, ClientError> {
    let mut new = NewTopic::new(topic, partitions);
    new.replication_factor = replication_factor;
    for config in configs {
        let (key, value) = config
            .split_once('=')
            .ok_or_else(|| ConfigError::invalid("--config", config))?;
        new = new.config(key.trim(), value.trim());
    }
    admin.create_topics(&[new]).await?;
    Ok(format!("Created topic {topic}.\n"))
}

/// The names of the topics, one a line (the broker's internal topics too with `internal`).
pub async fn list(admin: &Admin, internal: bool) -> Result<String, ClientError> {
    let names = admin.list_topics(internal).await?;
    Ok(names.iter().map(|n| format!("{n}\n")).collect())
}

/// A topic's partitions, leaders and replicas, in `kafka-topics.sh --describe`'s layout.
pub async fn describe(admin: &Admin, topic: &str) -> Result<String, ClientError> {
    let mut out = String::new();
    for t in admin.describe_topics(&[topic]).await? {
        let replication = t.partitions.first().map_or(0, |p| p.replicas.len());
        out.push_str(&format!(
            "Topic: {}\tPartitionCount: {}\tReplicationFactor: {}\n",
            t.name,
            t.partitions.len(),
            replication
        ));
        let list = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
        for p in &t.partitions {
            out.push_str(&format!(
                "\tTopic: {}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}\n",
                t.name,
                p.partition,
                p.leader,
                list(&p.replicas),
                list(&p.isr)
            ));
        }
    }
    Ok(out)
}

/// Deletes a topic.
pub async fn delete(admin: &Admin, topic: &str) -> Result<String, ClientError> {
    admin.delete_topics(&[topic]).await?;
    Ok(format!("Deleted topic {topic}.\n"))
}
