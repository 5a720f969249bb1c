//! Metadata: the broker (this one), and each topic with its partitions, all led by this
//! broker. Unknown topics are created here only when auto-creation is on.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{ProtocolError, Reply, RequestContext};
use crate::metadata::{MetadataError, Topic};
use crate::state::BrokerState;

/// Topics that hold the broker's own state.
pub(crate) fn is_internal(topic: &str) -> bool {
    matches!(topic, "__consumer_offsets" | "__transaction_state")
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

fn describe_topic(state: &BrokerState, topic: &Topic, version: i16) -> MetadataResponseTopic {
    let node = BrokerId(state.config.node_id);
    let partitions = (0..topic.partitions)
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(node)
                .with_leader_epoch(if version >= 7 { 0 } else { -1 })
                .with_replica_nodes(vec![node])
                .with_isr_nodes(vec![node])
        })
        .collect();
    let mut described = MetadataResponseTopic::default()
        .with_name(Some(topic_name(&topic.name)))
        .with_is_internal(is_internal(&topic.name))
        .with_partitions(partitions);
    if version >= 10 {
        described = described.with_topic_id(topic.id);
    }
    described
}

fn unknown_topic(name: Option<TopicName>, id: uuid::Uuid, version: i16) -> MetadataResponseTopic {
    let code = if name.is_none() {
        ResponseError::UnknownTopicId.code()
    } else {
        ResponseError::UnknownTopicOrPartition.code()
    };
    let mut t = MetadataResponseTopic::default()
        .with_error_code(code)
        .with_name(name);
    if version >= 10 {
        t = t.with_topic_id(id);
    }
    t
}

pub(super) fn handle(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: MetadataRequest,
) -> Result<Reply, ProtocolError> {
    let version = ctx.version;
    let topics = match request.topics {
        None => state
            .metadata
            .topics()
            .iter()
            .map(|t| describe_topic(state, t, version))
            .collect(),
        Some(wanted) => {
            // Each topic once, in the order first asked for, as Kafka answers a set of names:
            // a request naming one topic a million times gets one answer.
            // The set borrows the names; sized once, it never grows (and never holds two
            // tables at once) however many names come.
            let mut seen = std::collections::HashSet::with_capacity(wanted.len());
            wanted
                .iter()
                .filter(|w| seen.insert(w.name.as_ref().map(|n| n.0.as_str()).ok_or(w.topic_id)))
                .map(|w| {
                    let found = match &w.name {
                        Some(name) => state.metadata.topic(name.0.as_str()),
                        None => state.metadata.topic_by_id(w.topic_id),
                    };
                    match (found, w.name.clone()) {
                        (Some(topic), _) => describe_topic(state, &topic, version),
                        (None, Some(name))
                            if state.config.auto_create_topics
                                && request.allow_auto_topic_creation =>
                        {
                            match auto_create(state, name.0.as_str()) {
                                Ok(topic) => describe_topic(state, &topic, version),
                                Err(e) => {
                                    let code = super::errors::metadata_code(&e);
                                    MetadataResponseTopic::default()
                                        .with_error_code(code)
                                        .with_name(Some(name))
                                }
                            }
                        }
                        (None, name) => unknown_topic(name, w.topic_id, version),
                    }
                })
                .collect()
        }
    };
    let (host, port) = &state.advertised;
    let broker = MetadataResponseBroker::default()
        .with_node_id(BrokerId(state.config.node_id))
        .with_host(StrBytes::from_string(host.clone()))
        .with_port(i32::from(*port));
    let mut response = MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_topics(topics);
    if version >= 2 {
        response = response.with_cluster_id(Some(StrBytes::from_string(state.cluster_id.clone())));
    }
    if version >= 1 {
        response = response.with_controller_id(BrokerId(state.config.node_id));
    }
    ctx.reply(&response)
}

fn auto_create(state: &BrokerState, name: &str) -> Result<Topic, MetadataError> {
    match state.create_topic(name, state.config.num_partitions, Default::default(), false) {
        Err(MetadataError::TopicExists(_)) => state
            .metadata
            .topic(name)
            .ok_or_else(|| MetadataError::UnknownTopic(name.to_string())),
        other => {
            if let Ok(t) = &other {
                tracing::info!(topic = %t.name, partitions = t.partitions, "auto-created a topic");
            }
            other
        }
    }
}
