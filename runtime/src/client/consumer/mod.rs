//! The consumer: partitions assigned by hand ([`Consumer::assign`]) or by the group
//! ([`Consumer::subscribe`]), records by [`Consumer::poll`] or as a [`futures::Stream`],
//! positions and seeks, committed offsets, and a [`RebalanceListener`] told of partitions
//! assigned, revoked and lost. Rebalances run inside `poll`, in the application's task;
//! heartbeats run in the background.

mod assignor;
mod fetch_memory;
mod fetcher;
mod group;
mod protocol;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eddy_core::log::{Header, TopicPartition};
use futures::Stream;
use tokio::sync::Notify;

pub use self::assignor::{
    Assignment, Assignor, CooperativeStickyAssignor, MemberSubscription, RangeAssignor,
    RebalanceProtocol, RoundRobinAssignor,
};
use self::fetcher::Fetcher;
pub(crate) use self::fetcher::PartitionRun;
use self::group::Membership;
use super::cluster::Cluster;
use super::offsets::{self, Committer};
use super::{ClientError, ConfigError, ConsumerConfig, GroupMetadata, IsolationLevel};
use crate::time::Instant;

/// A record as a consumer reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// The topic (shared by every record of the topic).
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The offset.
    pub offset: i64,
    /// The timestamp (create time, or the broker's log-append time).
    pub timestamp: i64,
    /// The key.
    pub key: Option<Bytes>,
    /// The value; `None` for a tombstone.
    pub value: Option<Bytes>,
    /// Headers, in order.
    pub headers: Vec<Header>,
}

/// Told of changes to the consumer's partitions, from inside `poll`. The consumer is handed
/// in, so that offsets can be committed before partitions go.
#[async_trait::async_trait]
pub trait RebalanceListener: Send {
    /// These partitions were assigned (all of them with the eager protocol, the new ones
    /// with the cooperative one). Positions are found afterwards, from committed offsets.
    async fn on_partitions_assigned(
        &mut self,
        consumer: &mut Consumer,
        partitions: &[TopicPartition],
    );

    /// These partitions are going to another member; this member still owns them, so it
    /// may commit their offsets now.
    async fn on_partitions_revoked(
        &mut self,
        consumer: &mut Consumer,
        partitions: &[TopicPartition],
    );

    /// These partitions were lost: the group went on without this member (its session
    /// expired, or it was too slow to poll). Others may already own them; commits of them
    /// would fail.
    async fn on_partitions_lost(&mut self, consumer: &mut Consumer, partitions: &[TopicPartition]) {
        self.on_partitions_revoked(consumer, partitions).await;
    }
}

/// An asynchronous Kafka consumer.
pub struct Consumer {
    cluster: Arc<Cluster>,
    config: ConsumerConfig,
    fetcher: Fetcher,
    group: Option<Membership>,
    subscription: Option<Vec<String>>,
    /// In a mutex only to make the consumer `Sync`; always reached through `get_mut`.
    listener: std::sync::Mutex<Option<Box<dyn RebalanceListener>>>,
    assignors: Vec<Arc<dyn Assignor>>,
    last_auto_commit: Instant,
    /// Notified to end a poll's wait early (see [`waker`](Self::waker)).
    woken: Arc<Notify>,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("subscription", &self.subscription)
            .field("group", &self.group)
            .field("fetcher", &self.fetcher)
            .finish()
    }
}

impl Consumer {
    /// A consumer with these settings and Kafka's default assignors (`range`, then
    /// `cooperative-sticky`). Connections open on first use.
    pub fn new(config: ConsumerConfig) -> Result<Self, ClientError> {
        config.validate()?;
        let mut client = config.client.clone();
        // A fetch response holds up to fetch.max.bytes of batches, and its headers.
        let fetch_max = usize::try_from(config.fetch_max_bytes).unwrap_or(0);
        client.receive_message_max_bytes = client
            .receive_message_max_bytes
            .max(fetch_max.saturating_add(512));
        let cluster = Cluster::new(client)?;
        Ok(Self {
            fetcher: Fetcher::new(Arc::clone(&cluster), config.clone()),
            cluster,
            config,
            group: None,
            subscription: None,
            listener: std::sync::Mutex::new(None),
            assignors: vec![Arc::new(RangeAssignor), Arc::new(CooperativeStickyAssignor)],
            last_auto_commit: Instant::now(),
            woken: Arc::new(Notify::new()),
        })
    }

    /// What ends a poll's wait: notified, the poll waiting for records (or the next one to
    /// wait, when none waits) returns at once with none, as Kafka's `wakeup()` ends a poll
    /// (without its exception). A stream thread is woken so when its commit in flight is
    /// done, to settle it then rather than at the end of the poll's wait.
    pub(crate) fn waker(&self) -> Arc<Notify> {
        Arc::clone(&self.woken)
    }

    /// Replaces the assignors offered to the group, in order of preference
    /// (`partition.assignment.strategy`). Takes effect at the next `subscribe`.
    pub fn set_assignors(&mut self, assignors: Vec<Arc<dyn Assignor>>) {
        self.assignors = assignors;
    }

    /// Sets the listener told of assigned, revoked and lost partitions.
    pub fn set_rebalance_listener(&mut self, listener: impl RebalanceListener + 'static) {
        *self.listener_mut() = Some(Box::new(listener));
    }

    fn group_id(&self) -> Result<&str, ClientError> {
        self.config.group_id.as_deref().ok_or_else(|| {
            ConfigError::rejected("group.id", "is required for a group member").into()
        })
    }

    /// Reads `topics` as a member of the consumer group `group.id`; the group decides which
    /// partitions this member gets. Joining happens in the next `poll`.
    pub fn subscribe(&mut self, topics: &[&str]) -> Result<(), ClientError> {
        let group_id = self.group_id()?.to_string();
        if self.group.is_none() {
            self.group = Some(Membership::new(
                Arc::clone(&self.cluster),
                self.config.clone(),
                group_id,
                self.assignors.clone(),
            ));
        }
        let topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        for topic in &topics {
            self.cluster.want_topic(topic);
        }
        if self.subscription.as_ref() != Some(&topics) {
            self.subscription = Some(topics);
            if let Some(group) = &self.group {
                group.request_rejoin();
            }
        }
        Ok(())
    }

    /// Reads exactly these partitions, outside any group membership (offsets can still be
    /// committed to `group.id`).
    pub fn assign(&mut self, partitions: &[TopicPartition]) -> Result<(), ClientError> {
        if self.subscription.is_some() {
            return Err(ClientError::State(
                "a subscribed consumer cannot also assign partitions: unsubscribe first".into(),
            ));
        }
        self.fetcher.assign(partitions);
        Ok(())
    }

    /// Leaves the group (if subscribed) and drops every partition.
    pub async fn unsubscribe(&mut self) -> Result<(), ClientError> {
        let owned = self.fetcher.assignment();
        if self.group.is_some() && !owned.is_empty() {
            self.call_listener(Change::Revoked, &owned).await;
        }
        self.fetcher.assign(&[]);
        self.subscription = None;
        match self.group.take() {
            Some(mut group) => group.leave().await,
            None => Ok(()),
        }
    }

    /// The number of partitions of `topic` (an unknown topic is an error once
    /// `request.timeout.ms` passed without it appearing).
    pub async fn partition_count(&self, topic: &str) -> Result<i32, ClientError> {
        let deadline = Instant::now() + self.config.client.request_timeout;
        let meta = self.cluster.wait_for_topic(topic, deadline).await?;
        Ok(meta.leaders.len() as i32)
    }

    /// The partitions this consumer reads now.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.fetcher.assignment()
    }

    /// The next record `poll` returns for `tp` will be at `offset`.
    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<(), ClientError> {
        self.fetcher.seek(tp, offset)
    }

    /// Forgets the positions of these assigned partitions and the records buffered for them:
    /// the next poll resumes each from the group's committed offset (or `auto.offset.reset`),
    /// as after records processed but never committed were thrown away.
    pub fn reset_to_committed(&mut self, partitions: &[TopicPartition]) -> Result<(), ClientError> {
        partitions
            .iter()
            .try_for_each(|tp| self.fetcher.forget_position(tp))
    }

    /// Asks the group for a rebalance at the next poll (Kafka's `enforceRebalance`); a
    /// consumer outside a group ignores it.
    pub fn enforce_rebalance(&self) {
        if let Some(group) = &self.group {
            group.request_rejoin();
        }
    }

    /// Seeks each partition to its first offset.
    pub async fn seek_to_beginning(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<(), ClientError> {
        self.seek_to(partitions, -2).await
    }

    /// The end of each partition, assigned or not (Kafka's `endOffsets`): the high
    /// watermark, or the last stable offset for `read_committed`.
    pub async fn end_offsets(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, i64>, ClientError> {
        let read_committed = self.config.isolation_level == IsolationLevel::ReadCommitted;
        self.ends(partitions, read_committed).await
    }

    /// The high watermark of each partition, whatever the consumer's isolation level: the
    /// end of the log, open transactions included.
    pub async fn high_watermarks(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, i64>, ClientError> {
        self.ends(partitions, false).await
    }

    async fn ends(
        &self,
        partitions: &[TopicPartition],
        read_committed: bool,
    ) -> Result<BTreeMap<TopicPartition, i64>, ClientError> {
        if partitions.is_empty() {
            return Ok(BTreeMap::new());
        }
        let deadline = Instant::now() + self.config.client.request_timeout;
        let ends = offsets::list(&self.cluster, partitions, -1, read_committed, deadline).await?;
        Ok(ends.into_iter().collect())
    }

    /// Seeks each partition to its end (the last stable offset for `read_committed`).
    pub async fn seek_to_end(&mut self, partitions: &[TopicPartition]) -> Result<(), ClientError> {
        self.seek_to(partitions, -1).await
    }

    async fn seek_to(
        &mut self,
        partitions: &[TopicPartition],
        timestamp: i64,
    ) -> Result<(), ClientError> {
        let deadline = Instant::now() + self.config.client.request_timeout;
        for (tp, offset) in self
            .fetcher
            .list_offsets(partitions, timestamp, deadline)
            .await?
        {
            self.fetcher.seek(&tp, offset)?;
        }
        Ok(())
    }

    /// The offset of the next record `poll` returns for `tp`, found first if unknown.
    pub async fn position(&mut self, tp: &TopicPartition) -> Result<i64, ClientError> {
        if self.fetcher.position(tp)?.is_none() {
            self.fill_positions().await?;
        }
        self.fetcher
            .position(tp)?
            .ok_or_else(|| ClientError::State(format!("no position for {tp}")))
    }

    /// How many records of `tp` lie between the consumer's position and the partition's end
    /// as the last fetch saw it (the last stable offset for `read_committed`); `None` before
    /// a fetch of it answered.
    pub fn lag(&self, tp: &TopicPartition) -> Option<i64> {
        self.fetcher.lag(tp)
    }

    /// Stops fetching these partitions until [`Self::resume`]; `poll` returns none of their
    /// records meanwhile.
    pub fn pause(&mut self, partitions: &[TopicPartition]) -> Result<(), ClientError> {
        partitions
            .iter()
            .try_for_each(|tp| self.fetcher.set_paused(tp, true))
    }

    /// Fetches these partitions again.
    pub fn resume(&mut self, partitions: &[TopicPartition]) -> Result<(), ClientError> {
        partitions
            .iter()
            .try_for_each(|tp| self.fetcher.set_paused(tp, false))
    }

    /// The group's committed offsets of these partitions (those with one).
    pub async fn committed(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, i64>, ClientError> {
        let deadline = Instant::now() + self.config.client.request_timeout;
        let require_stable = self.config.isolation_level == IsolationLevel::ReadCommitted;
        offsets::fetch(
            &self.cluster,
            self.group_id()?,
            Some(partitions),
            require_stable,
            deadline,
        )
        .await
    }

    /// What a transactional producer needs to commit this member's offsets
    /// (`send_offsets_to_transaction`).
    pub fn group_metadata(&self) -> Option<GroupMetadata> {
        let group_id = self.config.group_id.clone()?;
        let (generation_id, member_id) = match &self.group {
            Some(g) => {
                let s = g.state();
                (s.generation_id, s.member_id.clone())
            }
            None => (-1, String::new()),
        };
        Some(GroupMetadata {
            group_id,
            generation_id,
            member_id,
            group_instance_id: self.config.group_instance_id.clone(),
        })
    }

    /// Commits these offsets (the next offset to read in each partition) and waits for the
    /// coordinator's answer. A commit from a member whose generation is over fails, and the
    /// member rejoins at the next poll.
    pub async fn commit(&self, offsets: &BTreeMap<TopicPartition, i64>) -> Result<(), ClientError> {
        self.commit_async(offsets).await
    }

    /// Commits the positions of every assigned partition: what the last polls returned.
    pub async fn commit_positions(&self) -> Result<(), ClientError> {
        self.commit(&self.fetcher.positions()).await
    }

    /// Starts a commit and returns its future, which does not borrow the consumer: it can be
    /// spawned, or awaited later while polling goes on.
    pub fn commit_async(
        &self,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> impl std::future::Future<Output = Result<(), ClientError>> + Send + 'static {
        let cluster = Arc::clone(&self.cluster);
        let offsets = offsets.clone();
        let metadata = self.group_metadata();
        let deadline = Instant::now() + self.config.client.request_timeout;
        let ended = self
            .group
            .as_ref()
            .map(|g| (Arc::clone(&g.wake), g.state_handle()));
        async move {
            let metadata = metadata
                .ok_or_else(|| ConfigError::rejected("group.id", "is required to commit"))?;
            if offsets.is_empty() {
                return Ok(());
            }
            let committer = Committer {
                generation_id: metadata.generation_id,
                member_id: &metadata.member_id,
                group_instance_id: metadata.group_instance_id.as_deref(),
            };
            let result =
                offsets::commit(&cluster, &metadata.group_id, &committer, &offsets, deadline).await;
            if let (Err(e), Some((wake, state))) = (&result, ended) {
                if let Some(code) = e.code() {
                    group::generation_ended_shared(&state, &wake, code);
                }
            }
            result
        }
    }

    /// Waits up to `timeout` for records and returns up to `max.poll.records` of them (none
    /// if the time passed first). Runs the group's rebalances and finds the positions of
    /// newly assigned partitions first.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumerRecord>, ClientError> {
        self.poll_taking(timeout, Fetcher::take_records).await
    }

    /// As [`poll`](Self::poll), the records in runs of one partition each, without a topic
    /// name or partition per record: what a stream thread queues on its tasks.
    pub(crate) async fn poll_runs(
        &mut self,
        timeout: Duration,
    ) -> Result<Vec<PartitionRun>, ClientError> {
        self.poll_taking(timeout, Fetcher::take_runs).await
    }

    /// [`poll`](Self::poll), handing out records as `take` takes them from the fetcher.
    async fn poll_taking<T>(
        &mut self,
        timeout: Duration,
        take: fn(&mut Fetcher, usize) -> Vec<T>,
    ) -> Result<Vec<T>, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(group) = &self.group {
                group.polled();
            }
            self.rebalance_if_needed().await?;
            self.auto_commit().await;
            if let Err(e) = self.cluster.refresh_if_needed().await {
                tracing::debug!("metadata refresh failed: {e}");
            }
            if !self.fetcher.missing_positions().is_empty() {
                self.fill_positions().await?;
            }
            self.fetcher.settle_arrived()?;
            if self.fetcher.has_buffered() {
                let records = take(&mut self.fetcher, self.config.max_poll_records);
                // Prefetch while the application works on these.
                self.fetcher.send_fetches().await;
                if !records.is_empty() {
                    return Ok(records);
                }
                // Only positions moved (past control batches or aborted records).
                continue;
            }
            self.fetcher.send_fetches().await;
            let now = Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            let wait = if self.fetcher.is_fetching() {
                deadline
            } else {
                // Nothing could be fetched (no leader, no position): look again shortly.
                (now + self.cluster.config.retry_backoff).min(deadline)
            };
            let rebalance = async {
                match &self.group {
                    Some(g) => g.wake.notified().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                answer = self.fetcher.next_answer() => answer?,
                () = tokio::time::sleep_until(wait) => {}
                () = rebalance => {}
                () = self.woken.notified() => return Ok(Vec::new()),
            }
        }
    }

    /// The records as a stream; each item is one record, or the error a poll returned.
    pub fn stream(&mut self) -> impl Stream<Item = Result<ConsumerRecord, ClientError>> + '_ {
        futures::stream::unfold(
            (self, VecDeque::new()),
            |(consumer, mut buffered)| async move {
                loop {
                    if let Some(record) = buffered.pop_front() {
                        return Some((Ok(record), (consumer, buffered)));
                    }
                    match consumer.poll(Duration::from_secs(1)).await {
                        Ok(records) => buffered.extend(records),
                        Err(e) => return Some((Err(e), (consumer, buffered))),
                    }
                }
            },
        )
    }

    /// Leaves the group (a static member keeps its place until its session expires) and
    /// closes the consumer, committing positions first with `enable.auto.commit`.
    pub async fn close(mut self) -> Result<(), ClientError> {
        if self.config.enable_auto_commit && self.group.is_some() {
            let _ = self.commit_positions().await;
        }
        match self.group.take() {
            Some(mut group) => group.leave().await,
            None => Ok(()),
        }
    }

    /// Closes the consumer without leaving its group, as Kafka Streams' consumers close
    /// (`internal.leave.group.on.close=false`): the member and the assignment it was given
    /// stay in the group until its session times out, and no rebalance starts now.
    pub(crate) fn close_remaining_in_group(self) {
        // Dropping the membership stops its heartbeat and sends nothing.
        drop(self);
    }

    async fn auto_commit(&mut self) {
        if !self.config.enable_auto_commit
            || self.group.is_none()
            || self.last_auto_commit.elapsed() < self.config.auto_commit_interval
        {
            return;
        }
        self.last_auto_commit = Instant::now();
        if let Err(e) = self.commit_positions().await {
            tracing::debug!("auto-commit failed: {e}");
        }
    }

    async fn fill_positions(&mut self) -> Result<(), ClientError> {
        let missing = self.fetcher.missing_positions();
        let deadline = Instant::now() + self.config.client.request_timeout;
        let committed = match &self.config.group_id {
            Some(_) if !missing.is_empty() => self.committed(&missing).await?,
            _ => BTreeMap::new(),
        };
        self.fetcher.fill_positions(&committed, deadline).await
    }

    async fn rebalance_if_needed(&mut self) -> Result<(), ClientError> {
        let Some(topics) = self.subscription.clone() else {
            return Ok(());
        };
        loop {
            let Some(group) = &self.group else {
                return Ok(());
            };
            let (rejoin, lost, fatal) = {
                let s = group.state();
                (s.rejoin, s.lost, s.fatal.clone())
            };
            if let Some(e) = fatal {
                return Err(e);
            }
            if !rejoin {
                return Ok(());
            }
            let cooperative = group.rebalance_protocol() == RebalanceProtocol::Cooperative;
            let owned = self.fetcher.assignment();
            if lost && !owned.is_empty() {
                self.call_listener(Change::Lost, &owned).await;
                self.fetcher.assign(&[]);
            } else if !cooperative && !owned.is_empty() {
                if self.config.enable_auto_commit {
                    let _ = self.commit_positions().await;
                }
                self.call_listener(Change::Revoked, &owned).await;
                self.fetcher.assign(&[]);
            }
            let owned = self.fetcher.assignment();
            let group = self.group.as_mut().expect("checked above");
            let assignment = group.join(&topics, &owned).await?;
            let assigned: BTreeSet<TopicPartition> = assignment.partitions.into_iter().collect();
            let before: BTreeSet<TopicPartition> = owned.into_iter().collect();
            let revoked: Vec<TopicPartition> = before.difference(&assigned).cloned().collect();
            let added: Vec<TopicPartition> = assigned.difference(&before).cloned().collect();
            if !revoked.is_empty() {
                self.call_listener(Change::Revoked, &revoked).await;
                // Cooperative: what was given up goes to its new owner in another rebalance.
                if let Some(g) = &self.group {
                    g.request_rejoin();
                }
            }
            let all: Vec<TopicPartition> = assigned.into_iter().collect();
            self.fetcher.assign(&all);
            self.call_listener(Change::Assigned, &added).await;
        }
    }

    async fn call_listener(&mut self, change: Change, partitions: &[TopicPartition]) {
        let Some(mut listener) = self.listener_mut().take() else {
            return;
        };
        match change {
            Change::Assigned => listener.on_partitions_assigned(self, partitions).await,
            Change::Revoked => listener.on_partitions_revoked(self, partitions).await,
            Change::Lost => listener.on_partitions_lost(self, partitions).await,
        }
        *self.listener_mut() = Some(listener);
    }

    fn listener_mut(&mut self) -> &mut Option<Box<dyn RebalanceListener>> {
        self.listener.get_mut().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Debug, Clone, Copy)]
enum Change {
    Assigned,
    Revoked,
    Lost,
}

#[cfg(test)]
mod tests;
