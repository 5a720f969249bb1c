//! FindCoordinator and the classic group protocol: JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, DescribeGroups, ListGroups, DeleteGroups. This single broker coordinates every
//! group and transaction.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    BrokerId, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::errors::{group_code, group_result_code};
use super::{ProtocolError, Reply, RequestContext};
use crate::group::{GroupState, JoinRequest};
use crate::state::BrokerState;

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

pub(super) fn find_coordinator(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: FindCoordinatorRequest,
) -> Result<Reply, ProtocolError> {
    let (host, port) = &state.advertised;
    let node = BrokerId(state.config.node_id);
    let known_type = |t: i8| t == 0 || t == 1; // group, transaction
    if ctx.version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let c = Coordinator::default().with_key(key);
                if known_type(request.key_type) {
                    c.with_node_id(node)
                        .with_host(text(host.clone()))
                        .with_port(i32::from(*port))
                } else {
                    c.with_node_id(BrokerId(-1))
                        .with_error_code(ResponseError::InvalidRequest.code())
                }
            })
            .collect();
        return ctx.reply(&FindCoordinatorResponse::default().with_coordinators(coordinators));
    }
    let response = if known_type(request.key_type) {
        FindCoordinatorResponse::default()
            .with_node_id(node)
            .with_host(text(host.clone()))
            .with_port(i32::from(*port))
    } else {
        FindCoordinatorResponse::default()
            .with_node_id(BrokerId(-1))
            .with_error_code(ResponseError::InvalidRequest.code())
    };
    ctx.reply(&response)
}

pub(super) fn join(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: JoinGroupRequest,
) -> Result<Reply, ProtocolError> {
    let groups = Arc::clone(&state.groups);
    let version = ctx.version;
    // Before v1 the rebalance timeout was the session timeout.
    let rebalance_timeout_ms = if version >= 1 {
        request.rebalance_timeout_ms
    } else {
        request.session_timeout_ms
    };
    let join = JoinRequest {
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        client_id: ctx
            .client_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default(),
        client_host: format!("/{}", ctx.peer.ip()),
        session_timeout: Duration::from_millis(request.session_timeout_ms.max(0) as u64),
        rebalance_timeout: Duration::from_millis(rebalance_timeout_ms.max(0) as u64),
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .into_iter()
            .map(|p| (p.name.to_string(), p.metadata))
            .collect(),
        require_known_member_id: version >= 4,
    };
    let group_id = request.group_id.0.to_string();
    ctx.later(async move {
        let result = groups.join(&group_id, join).await;
        let mut response = JoinGroupResponse::default()
            .with_error_code(result.error.as_ref().map_or(0, group_code))
            .with_generation_id(result.generation)
            .with_protocol_name(result.protocol.map(text))
            .with_leader(text(result.leader))
            .with_member_id(text(result.member_id))
            .with_members(
                result
                    .members
                    .into_iter()
                    .map(|(id, instance, metadata)| {
                        let m = JoinGroupResponseMember::default()
                            .with_member_id(text(id))
                            .with_metadata(metadata);
                        if version >= 5 {
                            m.with_group_instance_id(instance.map(text))
                        } else {
                            m
                        }
                    })
                    .collect(),
            );
        if version >= 7 {
            response = response.with_protocol_type(result.protocol_type.map(text));
        }
        if version < 7 && response.protocol_name.is_none() {
            // Before v7 the protocol name is not nullable.
            response = response.with_protocol_name(Some(StrBytes::default()));
        }
        response
    })
}

pub(super) fn sync(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: SyncGroupRequest,
) -> Result<Reply, ProtocolError> {
    let groups = Arc::clone(&state.groups);
    let version = ctx.version;
    ctx.later(async move {
        let assignments = request
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect();
        let synced = groups
            .sync(
                &request.group_id.0,
                &request.member_id,
                request.group_instance_id.as_deref(),
                request.generation_id,
                assignments,
            )
            .await;
        let (error_code, assignment) = match synced {
            Ok(assignment) => (0, assignment),
            Err(error) => (group_code(&error), bytes::Bytes::new()),
        };
        let mut response = SyncGroupResponse::default()
            .with_error_code(error_code)
            .with_assignment(assignment);
        if version >= 5 {
            let described = groups.describe(&request.group_id.0);
            response = response
                .with_protocol_type(described.as_ref().map(|d| text(d.protocol_type.clone())))
                .with_protocol_name(described.map(|d| text(d.protocol)));
        }
        response
    })
}

pub(super) fn heartbeat(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: HeartbeatRequest,
) -> Result<Reply, ProtocolError> {
    let beat = state.groups.heartbeat(
        &request.group_id.0,
        &request.member_id,
        request.group_instance_id.as_deref(),
        request.generation_id,
    );
    ctx.reply(&HeartbeatResponse::default().with_error_code(group_result_code(&beat)))
}

pub(super) fn leave(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: LeaveGroupRequest,
) -> Result<Reply, ProtocolError> {
    let groups = Arc::clone(&state.groups);
    let version = ctx.version;
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        request
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(request.member_id.to_string(), None)]
    };
    ctx.later(async move {
        let codes: Vec<i16> = match groups.leave(&request.group_id.0, &members).await {
            Ok(left) => left.iter().map(group_result_code).collect(),
            Err(error) => return LeaveGroupResponse::default().with_error_code(group_code(&error)),
        };
        if version >= 3 {
            LeaveGroupResponse::default().with_members(
                members
                    .into_iter()
                    .zip(codes)
                    .map(|((id, instance), code)| {
                        MemberResponse::default()
                            .with_member_id(text(id))
                            .with_group_instance_id(instance.map(text))
                            .with_error_code(code)
                    })
                    .collect(),
            )
        } else {
            LeaveGroupResponse::default().with_error_code(codes.first().copied().unwrap_or(0))
        }
    })
}

pub(super) fn describe(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: DescribeGroupsRequest,
) -> Result<Reply, ProtocolError> {
    let groups = request
        .groups
        .into_iter()
        .map(|id| {
            let described = DescribedGroup::default().with_group_id(id.clone());
            match state.groups.describe(&id.0) {
                // An unknown group is described as Dead, as Kafka does before v6.
                None => described.with_group_state(text(GroupState::Dead.name())),
                Some(g) => described
                    .with_group_state(text(g.state.name()))
                    .with_protocol_type(text(g.protocol_type))
                    .with_protocol_data(text(g.protocol))
                    .with_members(
                        g.members
                            .into_iter()
                            .map(|m| {
                                let member = DescribedGroupMember::default()
                                    .with_member_id(text(m.member_id))
                                    .with_client_id(text(m.client_id))
                                    .with_client_host(text(m.client_host))
                                    .with_member_metadata(m.metadata)
                                    .with_member_assignment(m.assignment);
                                if ctx.version >= 4 {
                                    member.with_group_instance_id(m.group_instance_id.map(text))
                                } else {
                                    member
                                }
                            })
                            .collect(),
                    ),
            }
        })
        .collect();
    ctx.reply(&DescribeGroupsResponse::default().with_groups(groups))
}

pub(super) fn list(
    state: &Arc<BrokerState>,
    ctx: &RequestContext,
    request: ListGroupsRequest,
) -> Result<Reply, ProtocolError> {
    let wanted_states: Vec<String> = request
        .states_filter
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    let wanted_types: Vec<String> = request
        .types_filter
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    let groups = state
        .groups
        .list()
        .into_iter()
        .filter(|(_, _, s)| {
            wanted_states.is_empty() || wanted_states.contains(&s.name().to_lowercase())
        })
        .filter(|_| wanted_types.is_empty() || wanted_types.iter().any(|t| t == "classic"))
        .map(|(id, protocol_type, group_state)| {
            let listed = ListedGroup::default()
                .with_group_id(GroupId(text(id)))
                .with_protocol_type(text(protocol_type));
            let listed = if ctx.version >= 4 {
                listed.with_group_state(text(group_state.name()))
            } else {
                listed
            };
            if ctx.version >= 5 {
                listed.with_group_type(text("classic"))
            } else {
                listed
            }
        })
        .collect();
    ctx.reply(&ListGroupsResponse::default().with_groups(groups))
}

pub(super) fn delete(
    state: &Arc<BrokerState>,
    ctx: RequestContext,
    request: DeleteGroupsRequest,
) -> Result<Reply, ProtocolError> {
    let groups = Arc::clone(&state.groups);
    let ids: Vec<String> = request
        .groups_names
        .iter()
        .map(|g| g.0.to_string())
        .collect();
    ctx.later(async move {
        let codes = groups.delete_groups(&ids).await;
        DeleteGroupsResponse::default().with_results(
            ids.into_iter()
                .zip(codes)
                .map(|(id, code)| {
                    DeletableGroupResult::default()
                        .with_group_id(GroupId(text(id)))
                        .with_error_code(group_result_code(&code))
                })
                .collect(),
        )
    })
}
