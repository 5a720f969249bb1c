//! Topics: create (with partitions and configs), delete, add partitions, list, describe (with
//! their configs), and look up offsets by position or time in each partition's leader.

use std::collections::BTreeMap;
use std::time::Duration;

use eddy_core::log::TopicPartition;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    MetadataRequest, MetadataResponse, TopicName,
};

use super::{text, Admin, OffsetSpec};
use crate::client::offsets;
use crate::client::ClientError;
use crate::time::Instant;

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// The name.
    pub name: String,
    /// Partitions.
    pub partitions: i32,
    /// Replicas of each partition (1 on a single broker).
    pub replication_factor: i16,
    /// Topic configs (`cleanup.policy`, `retention.ms`, …).
    pub configs: BTreeMap<String, String>,
}

impl NewTopic {
    /// A topic with `partitions` partitions, one replica each, and default configs.
    pub fn new(name: impl Into<String>, partitions: i32) -> Self {
        Self {
            name: name.into(),
            partitions,
            replication_factor: 1,
            configs: BTreeMap::new(),
        }
    }

    /// Sets a topic config.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.insert(key.into(), value.into());
        self
    }
}

/// A partition as Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDescription {
    /// The partition number.
    pub partition: i32,
    /// The leader's broker id, or -1.
    pub leader: i32,
    /// Brokers holding a replica.
    pub replicas: Vec<i32>,
    /// Replicas in sync with the leader.
    pub isr: Vec<i32>,
}

/// A topic as Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDescription {
    /// The name.
    pub name: String,
    /// Whether it is one of the broker's own topics (`__consumer_offsets`, …).
    pub internal: bool,
    /// Its partitions, in order.
    pub partitions: Vec<PartitionDescription>,
}

impl Admin {
    /// Creates topics and waits until every partition has a leader that answers. A topic
    /// that exists already is an error ([`ClientError::Refused`] with code 36).
    pub async fn create_topics(&self, topics: &[NewTopic]) -> Result<(), ClientError> {
        let timeout = self.cluster.config.request_timeout;
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(timeout.as_millis() as i32)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        CreatableTopic::default()
                            .with_name(TopicName(text(&t.name)))
                            .with_num_partitions(t.partitions)
                            .with_replication_factor(t.replication_factor)
                            .with_configs(
                                t.configs
                                    .iter()
                                    .map(|(k, v)| {
                                        CreatableTopicConfig::default()
                                            .with_name(text(k))
                                            .with_value(Some(text(v)))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let cluster = &self.cluster;
        let response = cluster
            .retry(self.deadline(), || async {
                let broker = cluster.any_broker().await?;
                cluster.send(&broker, &request).await
            })
            .await?;
        for t in &response.topics {
            if t.error_code != 0 {
                let message = t.error_message.as_deref().unwrap_or("");
                return Err(ClientError::Refused {
                    addr: String::new(),
                    what: format!("CreateTopics {} {message}", t.name.0),
                    code: t.error_code,
                });
            }
        }
        for t in topics {
            self.wait_for_leaders(&t.name, t.partitions).await?;
        }
        Ok(())
    }

    /// Creates the topic unless it exists; either way waits until its partitions have
    /// leaders.
    pub async fn ensure_topic(&self, topic: &NewTopic) -> Result<(), ClientError> {
        match self.create_topics(std::slice::from_ref(topic)).await {
            Err(e) if e.error() == Some(ResponseError::TopicAlreadyExists) => {
                let count = self.partition_count(&topic.name).await?;
                self.wait_for_leaders(&topic.name, count).await
            }
            other => other,
        }
    }

    /// Waits until every partition has a leader that answers ListOffsets: Kafka names
    /// leaders in its metadata a moment before they take requests.
    async fn wait_for_leaders(&self, topic: &str, partitions: i32) -> Result<(), ClientError> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let all: Vec<TopicPartition> = (0..partitions)
            .map(|p| TopicPartition::new(topic, p))
            .collect();
        loop {
            let described = self.describe_topics(&[topic]).await;
            let ready = match &described {
                Ok(d) => d.first().is_some_and(|t| {
                    t.partitions.len() == partitions as usize
                        && t.partitions.iter().all(|p| p.leader >= 0)
                }),
                Err(_) => false,
            };
            if ready && self.list_offsets(&all, OffsetSpec::Latest).await.is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(ClientError::TimedOut(format!(
                    "waiting for leaders of every partition of {topic}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Deletes topics.
    pub async fn delete_topics(&self, topics: &[&str]) -> Result<(), ClientError> {
        let cluster = &self.cluster;
        let timeout_ms = cluster.config.request_timeout.as_millis() as i32;
        let response = cluster
            .retry(self.deadline(), || async {
                let broker = cluster.any_broker().await?;
                let version = broker.version::<DeleteTopicsRequest>()?;
                let names = topics.iter().map(|t| TopicName(text(t)));
                let request = if version >= 6 {
                    DeleteTopicsRequest::default().with_topics(
                        names
                            .map(|n| DeleteTopicState::default().with_name(Some(n)))
                            .collect(),
                    )
                } else {
                    DeleteTopicsRequest::default().with_topic_names(names.collect())
                }
                .with_timeout_ms(timeout_ms);
                cluster.send_at(&broker, version, &request).await
            })
            .await?;
        for t in response.responses {
            if t.error_code != 0 {
                return Err(Self::refused(
                    &format!(
                        "DeleteTopics {}",
                        t.name.as_ref().map_or("", |n| n.0.as_str())
                    ),
                    t.error_code,
                ));
            }
        }
        self.cluster.mark_stale();
        Ok(())
    }

    /// Grows `topic` to `total` partitions.
    pub async fn create_partitions(&self, topic: &str, total: i32) -> Result<(), ClientError> {
        let cluster = &self.cluster;
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(cluster.config.request_timeout.as_millis() as i32)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(TopicName(text(topic)))
                .with_count(total)
                .with_assignments(None)]);
        let response = cluster
            .retry(self.deadline(), || async {
                let broker = cluster.any_broker().await?;
                cluster.send(&broker, &request).await
            })
            .await?;
        for r in response.results {
            if r.error_code != 0 {
                return Err(Self::refused(
                    &format!("CreatePartitions {topic}"),
                    r.error_code,
                ));
            }
        }
        self.cluster.mark_stale();
        self.wait_for_leaders(topic, total).await
    }

    async fn metadata(&self, topics: Option<&[&str]>) -> Result<MetadataResponse, ClientError> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(text(t)))))
                    .collect()
            }))
            .with_allow_auto_topic_creation(false);
        let cluster = &self.cluster;
        cluster
            .retry(self.deadline(), || async {
                let broker = cluster.any_broker().await?;
                cluster.send(&broker, &request).await
            })
            .await
    }

    /// The names of every topic, sorted; the broker's internal topics only with `internal`.
    pub async fn list_topics(&self, internal: bool) -> Result<Vec<String>, ClientError> {
        let response = self.metadata(None).await?;
        let mut names: Vec<String> = response
            .topics
            .iter()
            .filter(|t| internal || !t.is_internal)
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .collect();
        names.sort();
        Ok(names)
    }

    /// The partitions, leaders and replicas of each topic; an unknown topic is an error.
    pub async fn describe_topics(
        &self,
        topics: &[&str],
    ) -> Result<Vec<TopicDescription>, ClientError> {
        let response = self.metadata(Some(topics)).await?;
        let mut described = Vec::new();
        for t in response.topics {
            let name = t.name.as_ref().map_or(String::new(), |n| n.0.to_string());
            if t.error_code != 0 {
                return Err(Self::refused(
                    &format!("Metadata of topic {name}"),
                    t.error_code,
                ));
            }
            let mut partitions: Vec<PartitionDescription> = t
                .partitions
                .iter()
                .map(|p| PartitionDescription {
                    partition: p.partition_index,
                    leader: p.leader_id.0,
                    replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                    isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            described.push(TopicDescription {
                name,
                internal: t.is_internal,
                partitions,
            });
        }
        Ok(described)
    }

    /// The configs set on `topic` itself (at creation or since), without the broker's
    /// defaults.
    pub async fn describe_topic_configs(
        &self,
        topic: &str,
    ) -> Result<BTreeMap<String, String>, ClientError> {
        /// DescribeConfigs' resource type of a topic.
        const TOPIC: i8 = 2;
        /// DescribeConfigs' source of a config set on the topic.
        const DYNAMIC_TOPIC_CONFIG: i8 = 1;
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(TOPIC)
                .with_resource_name(text(topic))
                .with_configuration_keys(None),
        ]);
        let cluster = &self.cluster;
        let response = cluster
            .retry(self.deadline(), || async {
                let broker = cluster.any_broker().await?;
                cluster.send(&broker, &request).await
            })
            .await?;
        let mut configs = BTreeMap::new();
        for result in response.results {
            if result.error_code != 0 {
                return Err(Self::refused(
                    &format!("DescribeConfigs of topic {topic}"),
                    result.error_code,
                ));
            }
            for config in result.configs {
                if config.config_source == DYNAMIC_TOPIC_CONFIG {
                    let value = config.value.map_or(String::new(), |v| v.to_string());
                    configs.insert(config.name.to_string(), value);
                }
            }
        }
        Ok(configs)
    }

    /// How many partitions `topic` has.
    pub async fn partition_count(&self, topic: &str) -> Result<i32, ClientError> {
        let described = self.describe_topics(&[topic]).await?;
        Ok(described.first().map_or(0, |t| t.partitions.len() as i32))
    }

    /// The offset `spec` names in each partition, asked of each partition's leader.
    pub async fn list_offsets(
        &self,
        partitions: &[TopicPartition],
        spec: OffsetSpec,
    ) -> Result<BTreeMap<TopicPartition, i64>, ClientError> {
        let timestamp = match spec {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(t) => t,
        };
        let mut found = BTreeMap::new();
        let mut missing = Vec::new();
        let listed =
            offsets::list(&self.cluster, partitions, timestamp, false, self.deadline()).await?;
        for (tp, offset) in listed {
            if offset >= 0 {
                found.insert(tp, offset);
            } else {
                missing.push(tp);
            }
        }
        // No record that late: the end of the partition, as Kafka's tools take it.
        if !missing.is_empty() {
            found.extend(Box::pin(self.list_offsets(&missing, OffsetSpec::Latest)).await?);
        }
        Ok(found)
    }
}
