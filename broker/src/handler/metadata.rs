//! Metadata: the broker (this one), and each topic with its partitions, all led by this
//! broker. Unknown topics are created here only when auto-creation is on. The request is read
//! and the response written one topic at a time (see `metadata_wire`), so what a request
//! makes the broker hold is its frame, the set of names it asks for, and the answer.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::metadata_wire::{ResponseHead, ResponseWriter, WantedTopics};
use super::{topic_name, ProtocolError, Reply, RequestContext};
use crate::metadata::{MetadataError, Topic};
use crate::state::BrokerState;

/// Topics that hold the broker's own state.
pub(crate) fn is_internal(topic: &str) -> bool {
    matches!(topic, "__consumer_offsets" | "__transaction_state")
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
    body: &mut Bytes,
) -> Result<Reply, ProtocolError> {
    let version = ctx.version;
    let wanted = WantedTopics::read(body, version).map_err(|e| ProtocolError::Malformed {
        api: ctx.api,
        version,
        reason: e.to_string(),
    })?;
    let failed = |e: anyhow::Error| ProtocolError::Encode {
        api: ctx.api,
        version,
        reason: e.to_string(),
    };
    let (host, port) = &state.advertised;
    let brokers = [MetadataResponseBroker::default()
        .with_node_id(BrokerId(state.config.node_id))
        .with_host(StrBytes::from_string(host.clone()))
        .with_port(i32::from(*port))];
    let cluster_id = StrBytes::from_string(state.cluster_id.clone());
    let head = ResponseHead {
        correlation_id: ctx.correlation_id,
        brokers: &brokers,
        cluster_id: Some(&cluster_id),
        controller_id: state.config.node_id,
    };
    let frame = if wanted.all() {
        let topics = state.metadata.topics();
        let mut writer = ResponseWriter::new(version, &head, topics.len()).map_err(failed)?;
        for topic in &topics {
            writer
                .topic(&describe_topic(state, topic, version))
                .map_err(failed)?;
        }
        writer.finish().map_err(failed)?
    } else {
        // Each topic once, in the order first asked for, as Kafka answers a set of names: a
        // request naming one topic a million times gets one answer.
        let distinct = wanted.distinct();
        let mut writer =
            ResponseWriter::new(version, &head, distinct.how_many()).map_err(failed)?;
        for topic in distinct {
            let answer = answer_topic(state, &topic, wanted.allow_auto_topic_creation, version);
            writer.topic(&answer).map_err(failed)?;
        }
        writer.finish().map_err(failed)?
    };
    Ok(Reply::Ready(frame))
}

/// The answer for one named topic: described, created first if the broker and the request
/// allow it, or unknown.
fn answer_topic(
    state: &BrokerState,
    wanted: &MetadataRequestTopic,
    allow_auto_topic_creation: bool,
    version: i16,
) -> MetadataResponseTopic {
    let found = match &wanted.name {
        Some(name) => state.metadata.topic(name.0.as_str()),
        None => state.metadata.topic_by_id(wanted.topic_id),
    };
    match (found, wanted.name.clone()) {
        (Some(topic), _) => describe_topic(state, &topic, version),
        (None, Some(name)) if state.config.auto_create_topics && allow_auto_topic_creation => {
            match auto_create(state, name.0.as_str()) {
                Ok(topic) => describe_topic(state, &topic, version),
                Err(e) => MetadataResponseTopic::default()
                    .with_error_code(super::errors::metadata_code(&e))
                    .with_name(Some(name)),
            }
        }
        (None, name) => unknown_topic(name, wanted.topic_id, version),
    }
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
