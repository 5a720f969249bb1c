//! CreateTopics, DeleteTopics and CreatePartitions.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::errors::metadata_code;
use super::{ProtocolError, Reply, RequestContext};
use crate::metadata::{configs, MetadataError};
use crate::state::BrokerState;

fn text(s: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.into()))
}

/// Checks the replication settings of a new topic against a single broker.
fn check_replication(
    state: &BrokerState,
    replication_factor: i16,
    assigned_brokers: impl Iterator<Item = i32>,
) -> Result<(), (i16, String)> {
    if replication_factor != -1 && replication_factor != 1 {
        return Err((
            ResponseError::InvalidReplicationFactor.code(),
            format!("Replication factor: {replication_factor} larger than available brokers: 1."),
        ));
    }
    for broker in assigned_brokers {
        if broker != state.config.node_id {
            return Err((
                ResponseError::InvalidReplicaAssignment.code(),
                format!("Broker {broker} does not exist; this cluster has one broker."),
            ));
        }
    }
    Ok(())
}

pub(super) fn create(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: CreateTopicsRequest,
) -> Result<Reply, ProtocolError> {
    let mut seen = HashSet::new();
    let duplicates: HashSet<String> = request
        .topics
        .iter()
        .filter(|t| !seen.insert(t.name.0.to_string()))
        .map(|t| t.name.0.to_string())
        .collect();
    let mut results = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut result = CreatableTopicResult::default().with_name(topic.name.clone());
        let fail = |result: CreatableTopicResult, code: i16, message: String| {
            result
                .with_error_code(code)
                .with_error_message(text(message))
        };
        if duplicates.contains(&name) {
            results.push(fail(
                result,
                ResponseError::InvalidRequest.code(),
                format!("Create topic request contains topic {name} more than once."),
            ));
            continue;
        }
        let partitions = if !topic.assignments.is_empty() {
            if topic.num_partitions != -1 || topic.replication_factor != -1 {
                results.push(fail(
                    result,
                    ResponseError::InvalidRequest.code(),
                    "Both numPartitions or replicationFactor and replicasAssignments were set."
                        .into(),
                ));
                continue;
            }
            topic.assignments.len() as i32
        } else if topic.num_partitions == -1 {
            state.config.num_partitions
        } else {
            topic.num_partitions
        };
        let assigned = topic
            .assignments
            .iter()
            .flat_map(|a| a.broker_ids.iter().map(|b| b.0));
        if let Err((code, message)) = check_replication(state, topic.replication_factor, assigned) {
            results.push(fail(result, code, message));
            continue;
        }
        let configs: BTreeMap<String, String> = topic
            .configs
            .iter()
            .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
            .collect();
        match state.create_topic(&name, partitions, configs, request.validate_only) {
            Ok(created) => {
                tracing::info!(topic = %name, partitions, "created a topic");
                if ctx.version >= 5 {
                    result = result
                        .with_num_partitions(partitions)
                        .with_replication_factor(1)
                        .with_configs(Some(
                            configs::describe(&created.configs)
                                .into_iter()
                                .map(|e| {
                                    CreatableTopicConfigs::default()
                                        .with_name(StrBytes::from_static_str(e.name))
                                        .with_value(text(e.value))
                                        .with_config_source(if e.is_default { 5 } else { 1 })
                                })
                                .collect(),
                        ));
                }
                if ctx.version >= 7 {
                    result = result.with_topic_id(created.id);
                }
                results.push(result);
            }
            Err(e) => {
                let code = metadata_code(&e);
                let message = match &e {
                    MetadataError::TopicExists(_) => format!("Topic '{name}' already exists."),
                    other => other.to_string(),
                };
                results.push(fail(result, code, message));
            }
        }
    }
    ctx.reply(&CreateTopicsResponse::default().with_topics(results))
}

pub(super) fn delete(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: DeleteTopicsRequest,
) -> Result<Reply, ProtocolError> {
    // v6 names topics by name or id in `topics`; older versions list names.
    let wanted: Vec<(Option<String>, uuid::Uuid)> = if ctx.version >= 6 {
        request
            .topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| (Some(n.0.to_string()), uuid::Uuid::nil()))
            .collect()
    };
    let mut responses = Vec::new();
    let mut deleted = Vec::new();
    for (name, id) in wanted {
        let topic = match &name {
            Some(n) => state.metadata.topic(n),
            None => state.metadata.topic_by_id(id),
        };
        let mut result = DeletableTopicResult::default();
        if ctx.version >= 6 {
            result = result.with_topic_id(topic.as_ref().map_or(id, |t| t.id));
        }
        let shown_name = topic.as_ref().map(|t| t.name.clone()).or(name);
        result = result.with_name(shown_name.map(|n| TopicName(StrBytes::from_string(n))));
        let outcome = match topic {
            None if ctx.version >= 6 && result.name.is_none() => Err((
                ResponseError::UnknownTopicId.code(),
                "This server does not host this topic ID.".to_string(),
            )),
            None => Err((
                ResponseError::UnknownTopicOrPartition.code(),
                "This server does not host this topic-partition.".to_string(),
            )),
            Some(t) => state
                .delete_topic(&t.name)
                .map(|_| {
                    tracing::info!(topic = %t.name, "deleted a topic");
                    deleted.push(t.name.clone());
                })
                .map_err(|e| (metadata_code(&e), e.to_string())),
        };
        if let Err((code, message)) = outcome {
            result = result.with_error_code(code);
            if ctx.version >= 5 {
                result = result.with_error_message(text(message));
            }
        }
        responses.push(result);
    }
    // Committed offsets of a deleted topic go with it, as in Kafka. The topic is gone
    // whatever happens to them; a failure is logged by the coordinator.
    let groups = Arc::clone(&state.groups);
    ctx.clone().later(async move {
        for topic in deleted {
            let _ = groups.delete_topic_offsets(&topic).await;
        }
        DeleteTopicsResponse::default().with_responses(responses)
    })
}

pub(super) fn create_partitions(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: CreatePartitionsRequest,
) -> Result<Reply, ProtocolError> {
    let mut results = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
        let assigned = topic
            .assignments
            .iter()
            .flatten()
            .flat_map(|a| a.broker_ids.iter().map(|b| b.0));
        let outcome = check_replication(state, -1, assigned).and_then(|_| {
            state
                .increase_partitions(&name, topic.count, request.validate_only)
                .map_err(|e| (metadata_code(&e), e.to_string()))
        });
        if let Err((code, message)) = outcome {
            result = result
                .with_error_code(code)
                .with_error_message(text(message));
        }
        results.push(result);
    }
    ctx.reply(&CreatePartitionsResponse::default().with_results(results))
}
