//! Group membership over Kafka's classic protocol: JoinGroup (with the member's
//! subscription for every assignor it offers), the leader's assignment, SyncGroup, heartbeats
//! in a background task, LeaveGroup, and static membership. The heartbeat task only notices
//! that a rebalance is needed; the consumer's `poll` runs the rebalance, so that the
//! rebalance listener is called from the application's own task.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use eddy_core::log::TopicPartition;
use kafka_protocol::error::ResponseError::{
    self, CoordinatorLoadInProgress, CoordinatorNotAvailable, FencedInstanceId, IllegalGeneration,
    MemberIdRequired, NotCoordinator, RebalanceInProgress, UnknownMemberId,
};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::Notify;

use super::assignor::{Assignment, Assignor, RebalanceProtocol};
use super::protocol;
use crate::client::cluster::{Broker, Cluster, CoordinatorType};
use crate::client::{ClientError, ConsumerConfig};
use crate::time::Instant;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// The member's standing, shared with its heartbeat task.
#[derive(Debug)]
pub(crate) struct MemberState {
    pub(crate) generation_id: i32,
    pub(crate) member_id: String,
    pub(crate) protocol_name: Option<String>,
    /// In a generation, with an assignment, heartbeating.
    pub(crate) stable: bool,
    /// A rebalance is needed: join again at the next poll.
    pub(crate) rejoin: bool,
    /// The coordinator no longer counts this member in its generation: its partitions are
    /// lost (they may already be someone else's).
    pub(crate) lost: bool,
    /// Another member took this static member's place, or something else ended it for good.
    pub(crate) fatal: Option<ClientError>,
    pub(crate) last_poll: Instant,
}

/// Membership of one consumer in one group.
pub(crate) struct Membership {
    cluster: Arc<Cluster>,
    config: ConsumerConfig,
    pub(crate) group_id: String,
    assignors: Vec<Arc<dyn Assignor>>,
    state: Arc<Mutex<MemberState>>,
    /// Wakes a waiting poll: a rebalance is needed.
    pub(crate) wake: Arc<Notify>,
    heartbeat: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership")
            .field("group_id", &self.group_id)
            .field("state", &*self.state())
            .finish()
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        if let Some(h) = self.heartbeat.take() {
            h.abort();
        }
    }
}

impl Membership {
    pub(crate) fn new(
        cluster: Arc<Cluster>,
        config: ConsumerConfig,
        group_id: String,
        assignors: Vec<Arc<dyn Assignor>>,
    ) -> Self {
        Self {
            cluster,
            config,
            group_id,
            assignors,
            state: Arc::new(Mutex::new(MemberState {
                generation_id: -1,
                member_id: String::new(),
                protocol_name: None,
                stable: false,
                rejoin: true,
                lost: false,
                fatal: None,
                last_poll: Instant::now(),
            })),
            wake: Arc::new(Notify::new()),
            heartbeat: None,
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, MemberState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The protocol the member's assignors allow: cooperative only if all of them are.
    pub(crate) fn rebalance_protocol(&self) -> RebalanceProtocol {
        if self
            .assignors
            .iter()
            .all(|a| a.rebalance_protocol() == RebalanceProtocol::Cooperative)
        {
            RebalanceProtocol::Cooperative
        } else {
            RebalanceProtocol::Eager
        }
    }

    /// Records a poll, for `max.poll.interval.ms`.
    pub(crate) fn polled(&self) {
        self.state().last_poll = Instant::now();
    }

    /// Asks for a rebalance at the next poll.
    pub(crate) fn request_rejoin(&self) {
        self.state().rejoin = true;
        self.wake.notify_one();
    }

    /// The member's state, for commits that run apart from the consumer.
    pub(crate) fn state_handle(&self) -> Arc<Mutex<MemberState>> {
        Arc::clone(&self.state)
    }

    /// Joins (or rejoins) the group and returns this member's assignment. `owned` are the
    /// partitions it holds now, sent with its subscription for cooperative assignors.
    pub(crate) async fn join(
        &mut self,
        topics: &[String],
        owned: &[TopicPartition],
    ) -> Result<Assignment, ClientError> {
        if let Some(h) = self.heartbeat.take() {
            h.abort();
        }
        let deadline = Instant::now() + self.config.max_poll_interval.max(Duration::from_secs(60));
        loop {
            if let Some(e) = self.state().fatal.clone() {
                return Err(e);
            }
            tracing::debug!(group = %self.group_id, "joining");
            match self.join_once(topics, owned).await {
                Ok(assignment) => {
                    self.start_heartbeat();
                    return Ok(assignment);
                }
                Err(e)
                    if e.code().is_some_and(Self::rejoin_at_once) && Instant::now() < deadline =>
                {
                    // As Kafka's consumer: the coordinator asked for exactly this (a member
                    // id to use, a new generation), so the next JoinGroup goes without a
                    // backoff.
                    tracing::debug!(group = %self.group_id, "rejoining at once: {e}");
                }
                Err(e) if e.is_retriable() && Instant::now() < deadline => {
                    tracing::debug!(group = %self.group_id, "rejoining: {e}");
                    tokio::time::sleep(self.cluster.config.retry_backoff).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn group_error(&self, what: &str, code: i16) -> ClientError {
        let error = ResponseError::try_from_code(code);
        if matches!(
            error,
            Some(NotCoordinator | CoordinatorNotAvailable | CoordinatorLoadInProgress)
        ) {
            self.cluster
                .forget_coordinator(CoordinatorType::Group, &self.group_id);
        }
        if error == Some(FencedInstanceId) {
            let e = ClientError::FencedInstanceId {
                group: self.group_id.clone(),
                instance_id: self.config.group_instance_id.clone().unwrap_or_default(),
            };
            self.state().fatal = Some(e.clone());
            return e;
        }
        ClientError::Refused {
            addr: String::new(),
            what: format!("{what} of group {}", self.group_id),
            code,
        }
    }

    /// Whether a join failure is worth joining again at once.
    fn rejoin_at_once(code: i16) -> bool {
        matches!(
            ResponseError::try_from_code(code),
            Some(MemberIdRequired | UnknownMemberId | IllegalGeneration | RebalanceInProgress)
        )
    }

    async fn join_once(
        &mut self,
        topics: &[String],
        owned: &[TopicPartition],
    ) -> Result<Assignment, ClientError> {
        let broker = self
            .cluster
            .coordinator(CoordinatorType::Group, &self.group_id)
            .await?;
        let (member_id, generation) = {
            let s = self.state();
            (s.member_id.clone(), s.generation_id)
        };
        let mut protocols = Vec::new();
        for assignor in &self.assignors {
            let user_data = assignor.subscription_user_data(topics, owned);
            let metadata = protocol::encode_subscription(topics, owned, generation, user_data)?;
            protocols.push(
                JoinGroupRequestProtocol::default()
                    .with_name(text(assignor.name()))
                    .with_metadata(metadata),
            );
        }
        let request = JoinGroupRequest::default()
            .with_group_id(GroupId(text(&self.group_id)))
            .with_session_timeout_ms(self.config.session_timeout.as_millis() as i32)
            .with_rebalance_timeout_ms(self.config.max_poll_interval.as_millis() as i32)
            .with_member_id(text(&member_id))
            .with_group_instance_id(self.config.group_instance_id.as_deref().map(text))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(protocols);
        // The coordinator answers JoinGroup when the rebalance completes: up to the
        // rebalance timeout.
        let wait = self.config.max_poll_interval + Duration::from_secs(5);
        let joined = self.long_request(&broker, &request, wait).await?;
        if joined.error_code != 0 {
            match ResponseError::try_from_code(joined.error_code) {
                Some(MemberIdRequired) => self.state().member_id = joined.member_id.to_string(),
                Some(UnknownMemberId) => self.state().member_id.clear(),
                _ => {}
            }
            return Err(self.group_error("JoinGroup", joined.error_code));
        }
        let member_id = joined.member_id.to_string();
        let protocol_name = joined.protocol_name.as_ref().map(|p| p.to_string());
        {
            let mut s = self.state();
            s.member_id = member_id.clone();
            s.generation_id = joined.generation_id;
            s.protocol_name = protocol_name.clone();
        }
        let assignments = if joined.leader.as_str() == member_id {
            self.lead(&joined, protocol_name.as_deref()).await?
        } else {
            Vec::new()
        };
        let sync = SyncGroupRequest::default()
            .with_group_id(GroupId(text(&self.group_id)))
            .with_generation_id(joined.generation_id)
            .with_member_id(text(&member_id))
            .with_group_instance_id(self.config.group_instance_id.as_deref().map(text))
            .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
            .with_protocol_name(protocol_name.as_deref().map(text))
            .with_assignments(assignments);
        let synced = self.long_request(&broker, &sync, wait).await?;
        if synced.error_code != 0 {
            if ResponseError::try_from_code(synced.error_code) == Some(UnknownMemberId) {
                self.state().member_id.clear();
            }
            return Err(self.group_error("SyncGroup", synced.error_code));
        }
        let assignment = protocol::decode_assignment(&synced.assignment)?;
        tracing::debug!(
            group = %self.group_id,
            generation = joined.generation_id,
            member = %member_id,
            partitions = ?assignment.partitions,
            "joined"
        );
        if let Some(assignor) = self.assignor(protocol_name.as_deref()) {
            assignor.on_assignment(&assignment, joined.generation_id);
        }
        let mut s = self.state();
        s.stable = true;
        s.rejoin = false;
        s.lost = false;
        Ok(assignment)
    }

    fn assignor(&self, name: Option<&str>) -> Option<&Arc<dyn Assignor>> {
        self.assignors.iter().find(|a| Some(a.name()) == name)
    }

    /// The leader's part: decode every member's subscription, run the chosen assignor over
    /// the partition counts of every topic any member reads, encode the assignments.
    async fn lead(
        &self,
        joined: &kafka_protocol::messages::JoinGroupResponse,
        protocol_name: Option<&str>,
    ) -> Result<Vec<SyncGroupRequestAssignment>, ClientError> {
        let assignor = self.assignor(protocol_name).ok_or_else(|| {
            ClientError::State(format!(
                "the group chose assignor {protocol_name:?}, which this member does not have"
            ))
        })?;
        let mut members = Vec::new();
        for m in &joined.members {
            let instance = m.group_instance_id.as_ref().map(|s| s.to_string());
            match protocol::decode_subscription(&m.member_id, instance, &m.metadata) {
                Ok(sub) => members.push(sub),
                Err(e) => tracing::warn!(member = %m.member_id, "ignoring a subscription: {e}"),
            }
        }
        let mut counts = BTreeMap::new();
        let topics: std::collections::BTreeSet<&String> =
            members.iter().flat_map(|m| m.topics.iter()).collect();
        let deadline = Instant::now() + Duration::from_secs(5);
        for topic in topics {
            // Topics that do not exist get no partitions, as in Kafka.
            if let Ok(meta) = self.cluster.wait_for_topic(topic, deadline).await {
                counts.insert(topic.clone(), meta.leaders.len() as i32);
            }
        }
        let assigned = assignor.assign(&counts, &members);
        members
            .iter()
            .map(|m| {
                let assignment = assigned.get(&m.member_id).cloned().unwrap_or_default();
                Ok(SyncGroupRequestAssignment::default()
                    .with_member_id(text(&m.member_id))
                    .with_assignment(protocol::encode_assignment(&assignment)?))
            })
            .collect()
    }

    async fn long_request<R: kafka_protocol::protocol::Request>(
        &self,
        broker: &Broker,
        request: &R,
        wait: Duration,
    ) -> Result<R::Response, ClientError> {
        let version = broker.version::<R>()?;
        match tokio::time::timeout(wait, broker.conn.send(version, request)).await {
            Ok(answer) => answer,
            Err(_) => {
                broker.conn.close();
                Err(ClientError::TimedOut(format!(
                    "group {} request",
                    self.group_id
                )))
            }
        }
    }

    fn start_heartbeat(&mut self) {
        let task = Heartbeat {
            cluster: Arc::clone(&self.cluster),
            group_id: self.group_id.clone(),
            instance_id: self.config.group_instance_id.clone(),
            interval: self.config.heartbeat_interval,
            max_poll_interval: self.config.max_poll_interval,
            state: Arc::clone(&self.state),
            wake: Arc::clone(&self.wake),
        };
        self.heartbeat = Some(tokio::spawn(task.run()));
    }

    /// Leaves the group (dynamic members only: a static member's place is kept for its
    /// return until its session times out).
    pub(crate) async fn leave(&mut self) -> Result<(), ClientError> {
        if let Some(h) = self.heartbeat.take() {
            h.abort();
        }
        let member_id = {
            let mut s = self.state();
            s.stable = false;
            s.generation_id = -1;
            std::mem::take(&mut s.member_id)
        };
        if member_id.is_empty() || self.config.group_instance_id.is_some() {
            return Ok(());
        }
        leave_group(&self.cluster, &self.group_id, &member_id).await
    }
}

/// A commit answered `code`: if it says the member's generation is over, the member has
/// lost its partitions and rejoins at the next poll.
pub(crate) fn generation_ended_shared(state: &Mutex<MemberState>, wake: &Notify, code: i16) {
    let Some(error @ (UnknownMemberId | IllegalGeneration | RebalanceInProgress)) =
        ResponseError::try_from_code(code)
    else {
        return;
    };
    let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
    if error == UnknownMemberId {
        s.member_id.clear();
    }
    if error != RebalanceInProgress {
        s.generation_id = -1;
        s.lost = true;
        s.stable = false;
    }
    s.rejoin = true;
    drop(s);
    wake.notify_one();
}

async fn leave_group(cluster: &Cluster, group: &str, member_id: &str) -> Result<(), ClientError> {
    let broker = cluster.coordinator(CoordinatorType::Group, group).await?;
    let version = broker.version::<LeaveGroupRequest>()?;
    let request = if version >= 3 {
        LeaveGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_members(vec![MemberIdentity::default()
                .with_member_id(text(member_id))
                .with_reason(Some(StrBytes::from_static_str(
                    "the consumer is leaving",
                )))])
    } else {
        LeaveGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_member_id(text(member_id))
    };
    let response = cluster.send_at(&broker, version, &request).await?;
    match ResponseError::try_from_code(response.error_code) {
        None | Some(UnknownMemberId) => Ok(()),
        Some(error) => Err(ClientError::Refused {
            addr: broker.conn.addr().to_string(),
            what: format!("LeaveGroup of group {group}"),
            code: error.code(),
        }),
    }
}

/// The background heartbeat of a stable member.
struct Heartbeat {
    cluster: Arc<Cluster>,
    group_id: String,
    instance_id: Option<String>,
    interval: Duration,
    max_poll_interval: Duration,
    state: Arc<Mutex<MemberState>>,
    wake: Arc<Notify>,
}

impl Heartbeat {
    fn state(&self) -> MutexGuard<'_, MemberState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn run(self) {
        loop {
            tokio::time::sleep(self.interval).await;
            let (generation, member_id, stable, last_poll) = {
                let s = self.state();
                (s.generation_id, s.member_id.clone(), s.stable, s.last_poll)
            };
            if !stable {
                return;
            }
            if last_poll.elapsed() > self.max_poll_interval {
                // The application stopped polling: give its partitions to others, as Kafka's
                // consumer does.
                tracing::warn!(group = %self.group_id, "max.poll.interval.ms passed without a poll: leaving the group");
                if self.instance_id.is_none() {
                    let _ = leave_group(&self.cluster, &self.group_id, &member_id).await;
                }
                let mut s = self.state();
                s.stable = false;
                s.lost = true;
                s.rejoin = true;
                s.generation_id = -1;
                if self.instance_id.is_none() {
                    s.member_id.clear();
                }
                drop(s);
                self.wake.notify_one();
                return;
            }
            let request = HeartbeatRequest::default()
                .with_group_id(GroupId(text(&self.group_id)))
                .with_generation_id(generation)
                .with_member_id(text(&member_id))
                .with_group_instance_id(self.instance_id.as_deref().map(text));
            let answer = match self
                .cluster
                .coordinator(CoordinatorType::Group, &self.group_id)
                .await
            {
                Ok(broker) => self
                    .cluster
                    .send(&broker, &request)
                    .await
                    .map(|r| r.error_code),
                Err(e) => Err(e),
            };
            let code = match answer {
                Ok(code) => code,
                Err(e) => {
                    tracing::debug!(group = %self.group_id, "heartbeat failed: {e}");
                    self.cluster
                        .forget_coordinator(CoordinatorType::Group, &self.group_id);
                    continue;
                }
            };
            match ResponseError::try_from_code(code) {
                None => {}
                Some(RebalanceInProgress) => {
                    tracing::debug!(group = %self.group_id, member = %member_id, "rebalance in progress");
                    self.state().rejoin = true;
                    self.wake.notify_one();
                }
                Some(error @ (IllegalGeneration | UnknownMemberId)) => {
                    let mut s = self.state();
                    s.stable = false;
                    s.lost = true;
                    s.rejoin = true;
                    s.generation_id = -1;
                    if error == UnknownMemberId {
                        s.member_id.clear();
                    }
                    drop(s);
                    self.wake.notify_one();
                    return;
                }
                Some(FencedInstanceId) => {
                    let mut s = self.state();
                    s.stable = false;
                    s.fatal = Some(ClientError::FencedInstanceId {
                        group: self.group_id.clone(),
                        instance_id: self.instance_id.clone().unwrap_or_default(),
                    });
                    drop(s);
                    self.wake.notify_one();
                    return;
                }
                Some(NotCoordinator | CoordinatorNotAvailable) => {
                    self.cluster
                        .forget_coordinator(CoordinatorType::Group, &self.group_id);
                }
                Some(other) => {
                    tracing::debug!(group = %self.group_id, "heartbeat answered error {other}");
                }
            }
        }
    }
}
