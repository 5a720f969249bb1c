//! The client's view of the cluster: brokers and where each partition's leader is, from
//! Metadata, and one multiplexed connection per broker (and one more for requests to a
//! coordinator on it), opened on first use with its API
//! versions negotiated, and opened again (after a backoff that doubles up to a limit) once it
//! fails. Metadata is fetched again when a caller reports it stale (a NOT_LEADER answer, a
//! broken connection) and when it is older than `metadata.max.age.ms`.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::error::ResponseError::{
    self, ConcurrentTransactions, CoordinatorNotAvailable, NotCoordinator, UnknownTopicOrPartition,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};

use super::versions::BrokerVersions;
use super::{ClientConfig, ClientError, ConfigError, Connection};
use crate::time::Instant;

/// What a coordinator coordinates: FindCoordinator's `key_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum CoordinatorType {
    /// A consumer group, keyed by its group id.
    Group,
    /// A transactional producer, keyed by its `transactional.id`.
    Transaction,
}

impl CoordinatorType {
    /// The `key_type` of FindCoordinator.
    fn key_type(self) -> i8 {
        match self {
            Self::Group => 0,
            Self::Transaction => 1,
        }
    }
}

/// A broker's connection and the API versions it serves.
#[derive(Debug, Clone)]
pub(crate) struct Broker {
    pub(crate) conn: Connection,
    versions: Arc<BrokerVersions>,
}

impl Broker {
    /// The highest version of `R` both sides speak.
    pub(crate) fn version<R: Request>(&self) -> Result<i16, ClientError> {
        self.versions.pick(R::KEY, self.conn.addr())
    }
}

/// A topic's partitions and their leaders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicMetadata {
    /// The leader's node id per partition (-1 while there is none).
    pub(crate) leaders: Vec<i32>,
}

/// Which of its connections to a broker a request goes on. A coordinator's requests have
/// their own, as in Kafka's consumer: a broker answers one connection's requests in order, so
/// on the data connection an offset commit or a heartbeat would wait behind a fetch the
/// broker holds for up to `fetch.max.wait.ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Route {
    /// Metadata, produce, fetch and everything else.
    Data,
    /// Requests to a group's or a transactional id's coordinator.
    Coordinator,
}

#[derive(Debug, Default)]
struct State {
    brokers: HashMap<i32, String>,
    topics: HashMap<String, Result<Arc<TopicMetadata>, i16>>,
    /// Topics this client works with: each refresh asks for all of them.
    wanted: BTreeSet<String>,
    refreshed: Option<Instant>,
    stale: bool,
    connections: HashMap<(String, Route), Broker>,
    /// Per address: no new attempt before this instant, and the failures in a row.
    backoff: HashMap<String, (Instant, u32)>,
    coordinators: HashMap<(CoordinatorType, String), i32>,
    /// Addresses a background task is connecting to.
    connecting: std::collections::HashSet<String>,
    /// A background metadata refresh is under way.
    refreshing_in_background: bool,
}

/// Brokers, metadata and connections, shared by everything a client runs.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) config: ClientConfig,
    state: Mutex<State>,
    /// One Metadata request at a time; others wait for its answer.
    refreshing: tokio::sync::Mutex<()>,
}

impl Cluster {
    pub(crate) fn new(config: ClientConfig) -> Result<Arc<Self>, ClientError> {
        config.validate()?;
        Ok(Arc::new(Self {
            config,
            state: Mutex::default(),
            refreshing: tokio::sync::Mutex::new(()),
        }))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The connection to the broker at `addr`, opened if needed. Fails at once, without
    /// trying, while the address is in its reconnect backoff.
    pub(crate) async fn broker_at(&self, addr: &str) -> Result<Broker, ClientError> {
        self.connection(addr, Route::Data).await
    }

    /// The connection of `route` to the broker at `addr`, opened if needed (see
    /// [`Self::broker_at`]).
    async fn connection(&self, addr: &str, route: Route) -> Result<Broker, ClientError> {
        let key = (addr.to_string(), route);
        {
            let mut state = self.state();
            if let Some(broker) = state.connections.get(&key) {
                if !broker.conn.is_closed() {
                    return Ok(broker.clone());
                }
                state.connections.remove(&key);
            }
            if let Some(&(not_before, _)) = state.backoff.get(addr) {
                if Instant::now() < not_before {
                    return Err(ClientError::Disconnected {
                        addr: addr.to_string(),
                    });
                }
            }
        }
        match self.connect(addr).await {
            Ok(broker) => {
                let mut state = self.state();
                state.backoff.remove(addr);
                // Another task may have connected meanwhile: keep one connection.
                let kept = state
                    .connections
                    .entry(key)
                    .or_insert_with(|| broker.clone());
                if kept.conn.is_closed() {
                    *kept = broker;
                }
                Ok(kept.clone())
            }
            Err(e) => {
                let mut state = self.state();
                let failures = state.backoff.get(addr).map_or(0, |&(_, n)| n) + 1;
                let wait = self
                    .config
                    .reconnect_backoff
                    .saturating_mul(1 << failures.min(16).saturating_sub(1))
                    .min(self.config.reconnect_backoff_max);
                state
                    .backoff
                    .insert(addr.to_string(), (Instant::now() + wait, failures));
                state.stale = true;
                Err(e)
            }
        }
    }

    async fn connect(&self, addr: &str) -> Result<Broker, ClientError> {
        let conn = tokio::time::timeout(
            self.config.connect_timeout,
            Connection::connect_with_limit(
                addr,
                &self.config.client_id,
                self.config.receive_message_max_bytes,
            ),
        )
        .await
        .map_err(|_| ClientError::TimedOut(format!("connecting to {addr}")))??;
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("eddy"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        // A broker that does not answer ApiVersions promptly is not worth waiting for.
        let timeout = self.config.connect_timeout;
        let ask = |version| {
            let conn = conn.clone();
            let request = request.clone();
            async move {
                tokio::time::timeout(timeout, conn.send(version, &request))
                    .await
                    .map_err(|_| ClientError::TimedOut(format!("ApiVersions from {addr}")))?
            }
        };
        let handshake = async {
            let response = ask(3).await?;
            // A broker that does not know v3 answers UNSUPPORTED_VERSION in v0's layout.
            if response.error_code == ResponseError::UnsupportedVersion.code() {
                return ask(0).await;
            }
            Ok(response)
        };
        let response = match handshake.await {
            Ok(response) => response,
            Err(e) => {
                // Not kept, so not left open either.
                conn.close();
                return Err(e);
            }
        };
        if response.error_code != 0 {
            conn.close();
            return Err(ClientError::Refused {
                addr: addr.to_string(),
                what: "ApiVersions".into(),
                code: response.error_code,
            });
        }
        let versions = BrokerVersions::new(
            response
                .api_keys
                .iter()
                .map(|k| (k.api_key, k.min_version, k.max_version)),
        );
        Ok(Broker {
            conn,
            versions: Arc::new(versions),
        })
    }

    /// Sends `request` to `broker` at the highest common version and waits at most
    /// `request.timeout.ms` for the answer; a broker that does not answer in time has its
    /// connection closed, failing whatever else was in flight on it.
    pub(crate) async fn send<R: Request>(
        &self,
        broker: &Broker,
        request: &R,
    ) -> Result<R::Response, ClientError> {
        let version = broker.version::<R>()?;
        self.send_at(broker, version, request).await
    }

    /// [`Self::send`] at a version the caller chose (from [`Broker::version`]).
    pub(crate) async fn send_at<R: Request>(
        &self,
        broker: &Broker,
        version: i16,
        request: &R,
    ) -> Result<R::Response, ClientError> {
        let answer = tokio::time::timeout(
            self.config.request_timeout,
            broker.conn.send(version, request),
        )
        .await;
        match answer {
            Ok(answer) => answer,
            Err(_) => {
                broker.conn.close();
                Err(ClientError::TimedOut(format!(
                    "{:?} to {}",
                    ApiKey::try_from(R::KEY).unwrap_or(ApiKey::ApiVersions),
                    broker.conn.addr()
                )))
            }
        }
    }

    /// The live connection to broker `node`, if there is one, without connecting: for
    /// callers that must not wait for a connection (the producer's sender). Without one, a
    /// background task starts connecting, and the caller tries again later.
    pub(crate) fn connected(self: &Arc<Self>, node: i32) -> Option<Broker> {
        let addr = {
            let state = self.state();
            let addr = state.brokers.get(&node)?.clone();
            if let Some(broker) = state.connections.get(&(addr.clone(), Route::Data)) {
                if !broker.conn.is_closed() {
                    return Some(broker.clone());
                }
            }
            addr
        };
        if self.state().connecting.insert(addr.clone()) {
            let cluster = Arc::clone(self);
            tokio::spawn(async move {
                if let Err(e) = cluster.broker_at(&addr).await {
                    tracing::debug!("connecting to {addr}: {e}");
                }
                cluster.state().connecting.remove(&addr);
            });
        }
        None
    }

    /// Starts a metadata refresh in the background if one is due and none is running, for
    /// callers that go on with the metadata they have meanwhile.
    pub(crate) fn refresh_in_background(self: &Arc<Self>) {
        {
            let mut state = self.state();
            let due = state.stale
                || state
                    .refreshed
                    .is_none_or(|at| at.elapsed() >= self.config.metadata_max_age);
            if !due || state.refreshing_in_background {
                return;
            }
            state.refreshing_in_background = true;
        }
        let cluster = Arc::clone(self);
        tokio::spawn(async move {
            if let Err(e) = cluster.refresh().await {
                tracing::debug!("metadata refresh failed: {e}");
                // Not at once again: the next attempt waits for the backoff.
                tokio::time::sleep(cluster.config.retry_backoff).await;
            }
            cluster.state().refreshing_in_background = false;
        });
    }

    /// The connection to broker `node`, from the metadata.
    pub(crate) async fn node(&self, node: i32) -> Result<Broker, ClientError> {
        self.node_on(node, Route::Data).await
    }

    /// The connection of `route` to broker `node`, from the metadata.
    async fn node_on(&self, node: i32, route: Route) -> Result<Broker, ClientError> {
        let addr = self.state().brokers.get(&node).cloned();
        match addr {
            Some(addr) => self.connection(&addr, route).await,
            None => {
                self.mark_stale();
                Err(ClientError::NotConnected { node })
            }
        }
    }

    /// A connection to any broker: a known one, else one of the bootstrap servers.
    pub(crate) async fn any_broker(&self) -> Result<Broker, ClientError> {
        self.any_broker_on(Route::Data).await
    }

    /// A connection of `route` to any broker (see [`Self::any_broker`]).
    async fn any_broker_on(&self, route: Route) -> Result<Broker, ClientError> {
        let mut candidates: Vec<String> = {
            let state = self.state();
            let mut known: Vec<String> = state.brokers.values().cloned().collect();
            known.sort();
            known
        };
        candidates.extend(self.config.bootstrap.iter().cloned());
        let mut last = None;
        for addr in candidates {
            match self.connection(&addr, route).await {
                Ok(broker) => return Ok(broker),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ConfigError::rejected("bootstrap.servers", "is empty").into()))
    }

    /// Asks for new metadata at the next [`Self::refresh_if_needed`].
    pub(crate) fn mark_stale(&self) {
        self.state().stale = true;
    }

    /// Fetches metadata if it was marked stale or is older than `metadata.max.age.ms`.
    pub(crate) async fn refresh_if_needed(&self) -> Result<(), ClientError> {
        let due = {
            let state = self.state();
            state.stale
                || state
                    .refreshed
                    .is_none_or(|at| at.elapsed() >= self.config.metadata_max_age)
        };
        if due {
            self.refresh().await?;
        }
        Ok(())
    }

    /// Fetches the brokers and the metadata of every topic this client works with.
    pub(crate) async fn refresh(&self) -> Result<(), ClientError> {
        let started = Instant::now();
        let _one_at_a_time = self.refreshing.lock().await;
        if self.state().refreshed.is_some_and(|at| at > started) {
            return Ok(()); // another task refreshed while this one waited
        }
        let wanted: Vec<String> = self.state().wanted.iter().cloned().collect();
        let broker = self.any_broker().await?;
        let request = MetadataRequest::default()
            .with_topics(Some(
                wanted
                    .iter()
                    .map(|t| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                    })
                    .collect(),
            ))
            .with_allow_auto_topic_creation(false);
        let response = self.send(&broker, &request).await?;
        let mut state = self.state();
        state.brokers = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
            .collect();
        for topic in response.topics {
            let Some(name) = topic.name else { continue };
            let entry = if topic.error_code != 0 {
                Err(topic.error_code)
            } else {
                let mut leaders = vec![-1; topic.partitions.len()];
                for p in &topic.partitions {
                    if let Some(slot) = usize::try_from(p.partition_index)
                        .ok()
                        .and_then(|i| leaders.get_mut(i))
                    {
                        *slot = if p.error_code == 0 { p.leader_id.0 } else { -1 };
                    }
                }
                Ok(Arc::new(TopicMetadata { leaders }))
            };
            state.topics.insert(name.0.to_string(), entry);
        }
        state.refreshed = Some(Instant::now());
        state.stale = false;
        Ok(())
    }

    /// Adds `topic` to the topics every refresh asks for; the next refresh comes at once if
    /// it is new.
    pub(crate) fn want_topic(&self, topic: &str) {
        let mut state = self.state();
        if !state.wanted.contains(topic) {
            state.wanted.insert(topic.to_string());
            state.stale = true;
        }
    }

    /// The metadata of `topic` as last fetched, if the client has it.
    pub(crate) fn topic(&self, topic: &str) -> Option<Result<Arc<TopicMetadata>, i16>> {
        self.state().topics.get(topic).cloned()
    }

    /// The metadata of `topic`, fetched if needed, waiting until `deadline` for a topic that
    /// does not exist yet (or has no partitions yet).
    pub(crate) async fn wait_for_topic(
        &self,
        topic: &str,
        deadline: Instant,
    ) -> Result<Arc<TopicMetadata>, ClientError> {
        self.want_topic(topic);
        loop {
            let outcome = match self.refresh_if_needed().await {
                Ok(()) => match self.topic(topic) {
                    Some(Ok(meta)) if !meta.leaders.is_empty() => return Ok(meta),
                    Some(Err(code))
                        if ResponseError::try_from_code(code)
                            .is_some_and(|e| e != UnknownTopicOrPartition && !e.is_retriable()) =>
                    {
                        return Err(ClientError::Refused {
                            addr: String::new(),
                            what: format!("metadata of topic {topic}"),
                            code,
                        })
                    }
                    _ => ClientError::Refused {
                        addr: String::new(),
                        what: format!("metadata of topic {topic}"),
                        code: UnknownTopicOrPartition.code(),
                    },
                },
                Err(e) => e,
            };
            if Instant::now() + self.config.retry_backoff > deadline {
                return Err(outcome);
            }
            tokio::time::sleep(self.config.retry_backoff).await;
            self.mark_stale();
        }
    }

    /// The coordinator of `key`, a group or a transactional id, found with FindCoordinator
    /// and remembered until [`Self::forget_coordinator`].
    pub(crate) async fn coordinator(
        &self,
        key_type: CoordinatorType,
        key: &str,
    ) -> Result<Broker, ClientError> {
        let known = self
            .state()
            .coordinators
            .get(&(key_type, key.to_string()))
            .copied();
        if let Some(node) = known {
            match self.node_on(node, Route::Coordinator).await {
                Ok(broker) => return Ok(broker),
                Err(e) => {
                    self.forget_coordinator(key_type, key);
                    return Err(e);
                }
            }
        }
        // Asked on a coordinator connection too: not behind a fetch held at the broker.
        let broker = self.any_broker_on(Route::Coordinator).await?;
        let version = broker.version::<FindCoordinatorRequest>()?;
        let key_bytes = StrBytes::from_string(key.to_string());
        let request = if version >= 4 {
            FindCoordinatorRequest::default()
                .with_key_type(key_type.key_type())
                .with_coordinator_keys(vec![key_bytes])
        } else {
            FindCoordinatorRequest::default()
                .with_key_type(key_type.key_type())
                .with_key(key_bytes)
        };
        let response = self.send_at(&broker, version, &request).await?;
        let (code, node, host, port) = if version >= 4 {
            let c = response
                .coordinators
                .first()
                .ok_or_else(|| ClientError::Protocol {
                    addr: broker.conn.addr().to_string(),
                    reason: "FindCoordinator answered no coordinator".into(),
                })?;
            (c.error_code, c.node_id.0, c.host.to_string(), c.port)
        } else {
            (
                response.error_code,
                response.node_id.0,
                response.host.to_string(),
                response.port,
            )
        };
        if code != 0 {
            return Err(ClientError::Refused {
                addr: broker.conn.addr().to_string(),
                what: format!("FindCoordinator for {key}"),
                code,
            });
        }
        let addr = format!("{host}:{port}");
        {
            let mut state = self.state();
            state.brokers.insert(node, addr.clone());
            state.coordinators.insert((key_type, key.to_string()), node);
        }
        self.connection(&addr, Route::Coordinator).await
    }

    /// Forgets the coordinator of `key` (it answered NOT_COORDINATOR, or is unreachable).
    pub(crate) fn forget_coordinator(&self, key_type: CoordinatorType, key: &str) {
        self.state()
            .coordinators
            .remove(&(key_type, key.to_string()));
    }

    /// Calls `attempt` until it succeeds, fails with an error that is not retriable, or
    /// `deadline` passes, waiting `retry.backoff.ms` between attempts.
    pub(crate) async fn retry<T, F, Fut>(
        &self,
        deadline: Instant,
        mut attempt: F,
    ) -> Result<T, ClientError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        loop {
            match attempt().await {
                Ok(value) => return Ok(value),
                Err(e)
                    if e.is_retriable()
                        && Instant::now() + self.config.retry_backoff < deadline =>
                {
                    tracing::debug!("retrying: {e}");
                    tokio::time::sleep(self.config.retry_backoff).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Calls `attempt` with the coordinator of `key`, a group or a transactional id, until it
    /// succeeds, fails with an error that is not retriable, or
    /// `deadline` passes. A coordinator that moved or cannot be reached is looked up again;
    /// CONCURRENT_TRANSACTIONS (the previous transaction still completing) is retried after a
    /// short wait, as Kafka's clients do.
    pub(crate) async fn with_coordinator<T, F, Fut>(
        &self,
        key_type: CoordinatorType,
        key: &str,
        deadline: Instant,
        mut attempt: F,
    ) -> Result<T, ClientError>
    where
        F: FnMut(Broker) -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        loop {
            let result = match self.coordinator(key_type, key).await {
                Ok(broker) => attempt(broker).await,
                Err(e) => Err(e),
            };
            let Err(e) = &result else { return result };
            if matches!(e.error(), Some(NotCoordinator | CoordinatorNotAvailable))
                || matches!(
                    e,
                    ClientError::Io { .. }
                        | ClientError::Disconnected { .. }
                        | ClientError::NotConnected { .. }
                        | ClientError::TimedOut(_)
                )
            {
                self.forget_coordinator(key_type, key);
            }
            let concurrent = e.error() == Some(ConcurrentTransactions);
            let wait = if concurrent {
                Duration::from_millis(20)
            } else {
                self.config.retry_backoff
            };
            let retriable = e.is_retriable() || concurrent;
            if !retriable || Instant::now() + wait >= deadline {
                return result;
            }
            tracing::debug!("retrying: {e}");
            tokio::time::sleep(wait).await;
        }
    }
}
