//! DescribeConfigs for topics (and the broker's own, empty, configuration).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{ProtocolError, Reply, RequestContext};
use crate::metadata::configs;
use crate::state::BrokerState;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// Config sources (DescribeConfigs v1+).
const SOURCE_TOPIC: i8 = 1;
const SOURCE_DEFAULT: i8 = 5;

pub(super) fn describe(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: DescribeConfigsRequest,
) -> Result<Reply, ProtocolError> {
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            match resource.resource_type {
                TOPIC => match state.metadata.topic(resource.resource_name.as_str()) {
                    None => result
                        .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                        .with_error_message(Some(StrBytes::from_string(format!(
                            "Topic {} does not exist.",
                            resource.resource_name.as_str()
                        )))),
                    Some(topic) => {
                        let keys = resource.configuration_keys;
                        let entries = configs::describe(&topic.configs)
                            .into_iter()
                            .filter(|e| {
                                keys.as_ref()
                                    .is_none_or(|k| k.iter().any(|k| k.as_str() == e.name))
                            })
                            .map(|e| {
                                DescribeConfigsResourceResult::default()
                                    .with_name(StrBytes::from_static_str(e.name))
                                    .with_value(Some(StrBytes::from_string(e.value)))
                                    .with_config_source(if e.is_default {
                                        SOURCE_DEFAULT
                                    } else {
                                        SOURCE_TOPIC
                                    })
                            })
                            .collect();
                        result.with_configs(entries)
                    }
                },
                BROKER => result,
                other => result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "eddy describes topic and broker configurations, not resource type {other}"
                    )))),
            }
        })
        .collect();
    ctx.reply(&DescribeConfigsResponse::default().with_results(results))
}
