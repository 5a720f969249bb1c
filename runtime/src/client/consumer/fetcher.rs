//! The fetcher: positions of assigned partitions, fetch requests to each partition's leader
//! (one in flight per broker, prefetching while earlier records are being handed out), the
//! decoding of fetched batches into records, and — for `read_committed` — the removal of
//! aborted transactions' records and of control batches. Each fetch runs as a task of its
//! own that also decodes its answer, so that decoding happens beside the caller's work, on
//! another core when there is one, rather than inside `poll`. Buffered data is bounded: a
//! partition is not fetched again while two answers of it are waiting, and the answers waiting
//! and the fetches in flight together hold at most `fetch.max.bytes`, their decoded records
//! counted (see [`Fetcher::room`] and [`fetch_memory`](super::fetch_memory)). A fetch that
//! could only wait at the broker is not sent while a partition held back by its buffer has
//! records still to fetch.

use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eddy_core::log::{Record, TopicPartition};
use eddy_core::wire::batch::{
    control_type, decode_records, decode_records_with, BatchRecord, Batches, ControlType,
};
use futures::stream::FuturesUnordered;
use futures::{Future, FutureExt, StreamExt};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::fetch_memory::{held_bytes, Expansion};
use super::ConsumerRecord;
use crate::client::cluster::Cluster;
use crate::client::config::{ConsumerConfig, IsolationLevel, OffsetReset};
use crate::client::offsets;
use crate::client::ClientError;
use crate::time::Instant;
use kafka_protocol::error::ResponseError::{self, OffsetOutOfRange};

/// The most a batch may expand to when decompressed.
const MAX_DECOMPRESSED: usize = 64 << 20;
/// Answers of one partition buffered at most before it is fetched again: with two, the
/// partition's next answer is on its way while the caller works through the last one, rather
/// than asked for only once that one is done (on the stateless chain of `eddy bench streams`
/// a stream thread waited on its polls 17–19% of its time with one, 10–12% with two).
const MAX_BUFFERED_PER_PARTITION: usize = 2;
/// The longest a fetch waits for records while a partition led by the same broker is held
/// back by its buffer: that partition is fetched again only once this fetch is answered, so a
/// long poll on partitions with nothing new (a repartition topic read committed between two
/// commits, say) would hold back a busy one for `fetch.max.wait.ms`.
const WAIT_BESIDE_HELD_BACK: Duration = Duration::from_millis(5);

/// One assigned partition.
#[derive(Debug, Default)]
struct PartitionState {
    /// The next offset to hand out; `None` until found (committed offset or reset).
    position: Option<i64>,
    /// The next offset to fetch (past what is buffered).
    fetch_offset: i64,
    /// Changes on every seek, so that answers to older fetches are dropped.
    epoch: u64,
    /// A fetch that includes this partition is in flight.
    fetching: bool,
    /// Answers buffered and not yet handed out.
    buffered: usize,
    paused: bool,
    /// Where to reset after OFFSET_OUT_OF_RANGE.
    needs_reset: bool,
    /// The partition's end as the last fetch saw it: the high watermark, or the last stable
    /// offset for `read_committed`.
    end: Option<i64>,
}

impl PartitionState {
    /// Whether the last answer showed nothing more to fetch: a fetch of it now would wait
    /// for new records.
    fn is_caught_up(&self) -> bool {
        self.end.is_some_and(|end| self.fetch_offset >= end)
    }

    /// Whether it holds as many answers as a partition may buffer: it is not fetched again
    /// until one is handed out.
    fn is_held_back_by_buffer(&self) -> bool {
        self.buffered >= MAX_BUFFERED_PER_PARTITION
    }
}

struct Buffered {
    tp: TopicPartition,
    /// The topic's shared name, which each record handed out as a [`ConsumerRecord`] carries.
    name: Arc<str>,
    epoch: u64,
    /// The records by offset.
    records: VecDeque<(i64, Record)>,
    /// What the answer holds: the bytes of the batches the records came in, as fetched, and
    /// the records decoded from them.
    held_bytes: usize,
    /// The offset after the fetched batches: where the position is once these records are
    /// handed out (past trailing control batches and aborted records, as Kafka's is).
    next: i64,
}

/// A fetch's answer: the broker it went to, the partitions asked for (offset and epoch
/// then), and the response with the records of each partition decoded.
type Answer = (
    i32,
    Vec<(TopicPartition, i64, u64)>,
    Result<(FetchResponse, Vec<Decoded>), ClientError>,
);

/// A partition's records decoded from a fetch's answer (the answer's bytes taken out of the
/// response): the records at or after the offset asked for, the offset to fetch next, and
/// the bytes fetched.
type Decoded = (
    TopicPartition,
    Result<(VecDeque<(i64, Record)>, i64, usize), ClientError>,
);

/// Records of one partition handed out together, in offset order (see
/// [`Fetcher::take_runs`]).
#[derive(Debug)]
pub(crate) struct PartitionRun {
    /// The topic's shared name.
    pub(crate) topic: Arc<str>,
    pub(crate) partition: i32,
    /// The records by offset.
    pub(crate) records: Vec<(i64, Record)>,
}

/// A spawned task that is aborted when it is dropped: a fetch the consumer gave up (closed,
/// or its partitions revoked) does not run on for nothing.
struct Spawned<T>(tokio::task::JoinHandle<T>);

impl<T> Future for Spawned<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for Spawned<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Positions, fetches in flight and records waiting to be handed out.
pub(crate) struct Fetcher {
    cluster: Arc<Cluster>,
    config: ConsumerConfig,
    partitions: BTreeMap<TopicPartition, PartitionState>,
    topics: HashMap<String, Arc<str>>,
    /// In a mutex only to make the fetcher `Sync`; always reached through `get_mut`.
    in_flight: std::sync::Mutex<FuturesUnordered<Pin<Box<dyn Future<Output = Answer> + Send>>>>,
    /// The brokers with a fetch in flight, and what each fetch's answer is expected to hold
    /// at most.
    nodes_fetching: HashMap<i32, usize>,
    buffered: VecDeque<Buffered>,
    /// What the last answer with records held for each byte fetched.
    expansion: Expansion,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("partitions", &self.partitions.len())
            .field("nodes_fetching", &self.nodes_fetching)
            .finish()
    }
}

impl Fetcher {
    pub(crate) fn new(cluster: Arc<Cluster>, config: ConsumerConfig) -> Self {
        Self {
            cluster,
            config,
            partitions: BTreeMap::new(),
            topics: HashMap::new(),
            in_flight: std::sync::Mutex::new(FuturesUnordered::new()),
            nodes_fetching: HashMap::new(),
            buffered: VecDeque::new(),
            expansion: Expansion::default(),
        }
    }

    /// The assigned partitions.
    pub(crate) fn assignment(&self) -> Vec<TopicPartition> {
        self.partitions.keys().cloned().collect()
    }

    /// Replaces the assignment; partitions kept keep their positions.
    pub(crate) fn assign(&mut self, partitions: &[TopicPartition]) {
        let wanted: HashSet<&TopicPartition> = partitions.iter().collect();
        self.partitions.retain(|tp, _| wanted.contains(tp));
        for tp in partitions {
            // Fetches go to leaders: the cluster must know where they are.
            self.cluster.want_topic(&tp.topic);
            self.topics
                .entry(tp.topic.clone())
                .or_insert_with(|| Arc::from(tp.topic.as_str()));
            self.partitions.entry(tp.clone()).or_default();
        }
        self.buffered.retain(|b| wanted.contains(&b.tp));
    }

    /// Moves the position of an assigned partition; buffered records of it are dropped.
    pub(crate) fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<(), ClientError> {
        self.reposition(tp, Some(offset))
    }

    /// Forgets the position of an assigned partition (its buffered records too): the next
    /// poll finds it again from the committed offset or `auto.offset.reset`.
    pub(crate) fn forget_position(&mut self, tp: &TopicPartition) -> Result<(), ClientError> {
        self.reposition(tp, None)
    }

    fn reposition(&mut self, tp: &TopicPartition, offset: Option<i64>) -> Result<(), ClientError> {
        let state = self
            .partitions
            .get_mut(tp)
            .ok_or_else(|| ClientError::State(format!("{tp} is not assigned")))?;
        state.position = offset;
        if let Some(offset) = offset {
            state.fetch_offset = offset;
        }
        state.epoch += 1;
        state.buffered = 0;
        state.needs_reset = false;
        self.buffered.retain(|b| &b.tp != tp);
        Ok(())
    }

    /// The next offset `poll` will hand out for `tp`, if known.
    pub(crate) fn position(&self, tp: &TopicPartition) -> Result<Option<i64>, ClientError> {
        self.partitions
            .get(tp)
            .map(|s| s.position)
            .ok_or_else(|| ClientError::State(format!("{tp} is not assigned")))
    }

    /// How far `tp`'s position is behind the partition's end as the last fetch saw it.
    pub(crate) fn lag(&self, tp: &TopicPartition) -> Option<i64> {
        let state = self.partitions.get(tp)?;
        Some((state.end? - state.position?).max(0))
    }

    /// Every assigned partition's position, where known.
    pub(crate) fn positions(&self) -> BTreeMap<TopicPartition, i64> {
        self.partitions
            .iter()
            .filter_map(|(tp, s)| s.position.map(|p| (tp.clone(), p)))
            .collect()
    }

    /// Stops or resumes fetching `tp`.
    pub(crate) fn set_paused(
        &mut self,
        tp: &TopicPartition,
        paused: bool,
    ) -> Result<(), ClientError> {
        let state = self
            .partitions
            .get_mut(tp)
            .ok_or_else(|| ClientError::State(format!("{tp} is not assigned")))?;
        state.paused = paused;
        Ok(())
    }

    /// Partitions without a position.
    pub(crate) fn missing_positions(&self) -> Vec<TopicPartition> {
        self.partitions
            .iter()
            .filter(|(_, s)| s.position.is_none())
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// Finds a position for every partition without one: `committed` offsets first, then
    /// `auto.offset.reset`.
    pub(crate) async fn fill_positions(
        &mut self,
        committed: &BTreeMap<TopicPartition, i64>,
        deadline: Instant,
    ) -> Result<(), ClientError> {
        let mut to_reset = Vec::new();
        for tp in self.missing_positions() {
            let from_commit = committed
                .get(&tp)
                .copied()
                .filter(|_| !self.partitions.get(&tp).is_some_and(|s| s.needs_reset));
            match from_commit {
                Some(offset) => self.seek(&tp, offset)?,
                None => to_reset.push(tp),
            }
        }
        if to_reset.is_empty() {
            return Ok(());
        }
        let timestamp = match self.config.auto_offset_reset {
            OffsetReset::Earliest => -2,
            OffsetReset::Latest => -1,
            OffsetReset::None => {
                return Err(ClientError::State(format!(
                    "no offset for {} and auto.offset.reset is none",
                    to_reset[0]
                )))
            }
        };
        tracing::debug!(partitions = ?to_reset, timestamp, "resetting positions");
        for (tp, offset) in self.list_offsets(&to_reset, timestamp, deadline).await? {
            if self
                .partitions
                .get(&tp)
                .is_some_and(|s| s.position.is_none())
            {
                self.seek(&tp, offset)?;
            }
        }
        Ok(())
    }

    /// Looks up `timestamp` (-2 earliest, -1 latest) in each partition's leader.
    pub(crate) async fn list_offsets(
        &self,
        partitions: &[TopicPartition],
        timestamp: i64,
        deadline: Instant,
    ) -> Result<Vec<(TopicPartition, i64)>, ClientError> {
        let read_committed = self.config.isolation_level == IsolationLevel::ReadCommitted;
        offsets::list(
            &self.cluster,
            partitions,
            timestamp,
            read_committed,
            deadline,
        )
        .await
    }

    /// Hands out up to `max` buffered records, in order within each partition.
    pub(crate) fn take_records(&mut self, max: usize) -> Vec<ConsumerRecord> {
        let buffered = self.buffered.iter().map(|b| b.records.len()).sum::<usize>();
        let mut out = Vec::with_capacity(buffered.min(max));
        self.take_each(max, |topic, partition, offset, record, _| {
            out.push(ConsumerRecord {
                topic: Arc::clone(topic),
                partition,
                offset,
                timestamp: record.timestamp,
                key: record.key,
                value: record.value,
                headers: record.headers,
            })
        });
        out
    }

    /// As [`take_records`](Self::take_records), the records grouped in runs of one
    /// partition, without a topic name or partition per record: what a stream thread
    /// queues on its tasks.
    pub(crate) fn take_runs(&mut self, max: usize) -> Vec<PartitionRun> {
        let mut runs: Vec<PartitionRun> = Vec::new();
        self.take_each(max, |topic, partition, offset, record, coming| {
            match runs.last_mut() {
                Some(run) if run.partition == partition && Arc::ptr_eq(&run.topic, topic) => {
                    run.records.push((offset, record))
                }
                _ => {
                    let mut records = Vec::with_capacity(coming);
                    records.push((offset, record));
                    runs.push(PartitionRun {
                        topic: Arc::clone(topic),
                        partition,
                        records,
                    })
                }
            }
        });
        runs
    }

    /// Hands up to `max` buffered records to `take` (topic, partition, offset, record, and
    /// at most how many records of the partition come in this call, this one included),
    /// partition by partition, moving each partition's position past them.
    fn take_each(&mut self, max: usize, mut take: impl FnMut(&Arc<str>, i32, i64, Record, usize)) {
        let mut taken = 0;
        let mut i = 0;
        while taken < max && i < self.buffered.len() {
            let buffer = &mut self.buffered[i];
            let Some(state) = self
                .partitions
                .get_mut(&buffer.tp)
                .filter(|s| s.epoch == buffer.epoch)
            else {
                // Revoked or seeked since it was fetched.
                self.buffered.remove(i);
                continue;
            };
            if state.paused {
                i += 1;
                continue;
            }
            let position = state.position.unwrap_or(0);
            while taken < max {
                let coming = buffer.records.len().min(max - taken);
                let Some((offset, record)) = buffer.records.pop_front() else {
                    break;
                };
                if offset < position {
                    continue;
                }
                state.position = Some(offset + 1);
                take(&buffer.name, buffer.tp.partition, offset, record, coming);
                taken += 1;
            }
            if buffer.records.is_empty() {
                // Past what the fetch skipped at its end (control batches, aborted records).
                state.position = Some(state.position.unwrap_or(0).max(buffer.next));
                state.buffered = state.buffered.saturating_sub(1);
                self.buffered.remove(i);
            }
        }
    }

    /// Whether fetched answers wait to be taken: records to hand out, or a move of the
    /// position past what a fetch skipped.
    pub(crate) fn has_buffered(&self) -> bool {
        self.buffered.iter().any(|b| {
            self.partitions
                .get(&b.tp)
                .is_some_and(|s| s.epoch == b.epoch && !s.paused)
        })
    }

    /// Sends a fetch to every leader without one in flight, for its fetchable partitions.
    ///
    /// A fetch that could only wait — each of its partitions at the end its last answer
    /// showed — is held back while a partition of the same leader with records still to
    /// fetch is full of buffered answers: sent now, it would sit at the broker for up to
    /// `fetch.max.wait.ms`, and that partition, drained meanwhile, could not be fetched
    /// until it came back (one fetch in flight per broker). Sent once that partition is
    /// fetchable again, it carries it and is answered at once.
    pub(crate) async fn send_fetches(&mut self) {
        let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        // Leaders with a partition held back only by its buffer, and records behind it.
        let mut waiting_on_buffer: HashSet<i32> = HashSet::new();
        // Leaders with a partition held back by its buffer, caught up or not.
        let mut held_back_on: HashSet<i32> = HashSet::new();
        for (tp, state) in &self.partitions {
            if state.position.is_none() || state.paused || state.fetching {
                continue;
            }
            let held_back = state.is_held_back_by_buffer();
            let leader = match self.cluster.topic(&tp.topic) {
                Some(Ok(meta)) => meta
                    .leaders
                    .get(tp.partition as usize)
                    .copied()
                    .unwrap_or(-1),
                _ => -1,
            };
            if leader < 0 {
                self.cluster.mark_stale();
                continue;
            }
            if held_back {
                held_back_on.insert(leader);
                if !state.is_caught_up() {
                    waiting_on_buffer.insert(leader);
                }
            } else if !self.nodes_fetching.contains_key(&leader) {
                by_leader.entry(leader).or_default().push(tp.clone());
            }
        }
        let partitions = &self.partitions;
        by_leader.retain(|leader, tps| {
            !waiting_on_buffer.contains(leader)
                || tps.iter().any(|tp| !partitions[tp].is_caught_up())
        });
        let fetches = by_leader.len();
        for (sent, (node, partitions)) in by_leader.into_iter().enumerate() {
            // The room is shared by the brokers fetched from now, so that a fetch left
            // waiting at one broker does not hold back the others.
            let Some(room) = self.room() else {
                break;
            };
            let held = share(room, fetches - sent, self.least_held());
            let max_bytes = i32::try_from(self.expansion.wire(usize::try_from(held).unwrap_or(0)))
                .unwrap_or(i32::MAX);
            let broker = match self.cluster.node(node).await {
                Ok(b) => b,
                Err(e) => {
                    tracing::debug!("cannot fetch from broker {node}: {e}");
                    continue;
                }
            };
            let requested: Vec<(TopicPartition, i64, u64)> = partitions
                .iter()
                .map(|tp| {
                    let s = &self.partitions[tp];
                    (tp.clone(), s.fetch_offset, s.epoch)
                })
                .collect();
            let wait = match held_back_on.contains(&node) {
                true => self.config.fetch_max_wait.min(WAIT_BESIDE_HELD_BACK),
                false => self.config.fetch_max_wait,
            };
            let request = self.fetch_request(&requested, wait, max_bytes);
            for tp in &partitions {
                if let Some(s) = self.partitions.get_mut(tp) {
                    s.fetching = true;
                }
            }
            self.nodes_fetching
                .insert(node, usize::try_from(held).unwrap_or(0));
            let cluster = Arc::clone(&self.cluster);
            let read_committed = self.config.isolation_level == IsolationLevel::ReadCommitted;
            let asked: Vec<(Arc<str>, TopicPartition, i64)> = requested
                .iter()
                .map(|(tp, offset, _)| (self.topic_name(&tp.topic), tp.clone(), *offset))
                .collect();
            let fetch = Spawned(tokio::spawn(async move {
                let mut response = cluster.send(&broker, &request).await?;
                let decoded = decode_response(&mut response, &asked, read_committed);
                Ok((response, decoded))
            }));
            self.in_flight_mut().push(Box::pin(async move {
                let answer = fetch.await.unwrap_or_else(|stopped| {
                    Err(ClientError::State(format!("a fetch stopped: {stopped}")))
                });
                (node, requested, answer)
            }));
        }
    }

    /// The shared name of `topic`, which every record of it carries.
    fn topic_name(&mut self, topic: &str) -> Arc<str> {
        if let Some(name) = self.topics.get(topic) {
            return Arc::clone(name);
        }
        let name: Arc<str> = Arc::from(topic);
        self.topics.insert(topic.to_string(), Arc::clone(&name));
        name
    }

    /// The bytes a new fetch's answer may hold: `fetch.max.bytes` less what the answers
    /// waiting to be handed out hold (their batches and their decoded records) and what the
    /// fetches in flight are expected to; `None` while that is under what one partition's
    /// answer may hold ([`least_held`](Self::least_held)), so that the records a consumer
    /// holds stay within `fetch.max.bytes` (a broker answers a first batch larger than asked
    /// for whole, as Kafka's does). With nothing waiting and nothing in flight a fetch is
    /// always sent. The answers of paused partitions do not count: they wait for a resume and
    /// must not hold back the others (each partition has two answers at most waiting).
    fn room(&self) -> Option<i32> {
        let most = usize::try_from(self.config.fetch_max_bytes).unwrap_or(0);
        let waiting: usize = self
            .buffered
            .iter()
            .filter(|b| {
                self.partitions
                    .get(&b.tp)
                    .is_some_and(|s| s.epoch == b.epoch && !s.paused)
            })
            .map(|b| b.held_bytes)
            .sum();
        let held = waiting + self.nodes_fetching.values().sum::<usize>();
        let room = most.saturating_sub(held);
        if held > 0 && room < usize::try_from(self.least_held()).unwrap_or(0) {
            return None;
        }
        Some(i32::try_from(room.max(1)).unwrap_or(i32::MAX))
    }

    /// The least room a fetch is sent with: what one partition's answer may hold (its
    /// `max.partition.fetch.bytes` as decoded), or `fetch.max.bytes` if smaller.
    fn least_held(&self) -> i32 {
        let least = usize::try_from(self.config.max_partition_fetch_bytes.max(1)).unwrap_or(1);
        i32::try_from(self.expansion.held(least))
            .unwrap_or(i32::MAX)
            .min(self.config.fetch_max_bytes)
            .max(1)
    }

    fn fetch_request(
        &self,
        requested: &[(TopicPartition, i64, u64)],
        max_wait: Duration,
        max_bytes: i32,
    ) -> FetchRequest {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for (tp, offset, _) in requested {
            let partition = FetchPartition::default()
                .with_partition(tp.partition)
                .with_fetch_offset(*offset)
                .with_current_leader_epoch(-1)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(self.config.max_partition_fetch_bytes.min(max_bytes));
            match topics.iter_mut().find(|t| *t.topic.0 == *tp.topic) {
                Some(t) => t.partitions.push(partition),
                None => topics.push(
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(tp.topic.clone())))
                        .with_partitions(vec![partition]),
                ),
            }
        }
        FetchRequest::default()
            .with_replica_id((-1).into())
            .with_max_wait_ms(i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX))
            .with_min_bytes(self.config.fetch_min_bytes)
            .with_max_bytes(max_bytes)
            .with_isolation_level(match self.config.isolation_level {
                IsolationLevel::ReadCommitted => 1,
                IsolationLevel::ReadUncommitted => 0,
            })
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(topics)
    }

    /// Whether any fetch is in flight.
    pub(crate) fn is_fetching(&mut self) -> bool {
        !self.in_flight_mut().is_empty()
    }

    fn in_flight_mut(
        &mut self,
    ) -> &mut FuturesUnordered<Pin<Box<dyn Future<Output = Answer> + Send>>> {
        self.in_flight.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the next fetch answer and buffers its records. Cancel-safe: an answer not
    /// yet taken stays in flight.
    pub(crate) async fn next_answer(&mut self) -> Result<(), ClientError> {
        match self.in_flight_mut().next().await {
            Some(answer) => self.settle(answer),
            None => std::future::pending().await,
        }
    }

    /// Buffers every answer that has already arrived, without waiting.
    pub(crate) fn settle_arrived(&mut self) -> Result<(), ClientError> {
        while let Some(Some(answer)) = self.in_flight_mut().next().now_or_never() {
            self.settle(answer)?;
        }
        Ok(())
    }

    fn settle(&mut self, (node, requested, answer): Answer) -> Result<(), ClientError> {
        self.nodes_fetching.remove(&node);
        for (tp, _, _) in &requested {
            if let Some(s) = self.partitions.get_mut(tp) {
                s.fetching = false;
            }
        }
        let (response, mut decoded) = match answer {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!("fetch from broker {node} failed: {e}");
                self.cluster.mark_stale();
                return Ok(());
            }
        };
        let read_committed = self.config.isolation_level == IsolationLevel::ReadCommitted;
        let (mut wire, mut held) = (0, 0);
        for topic in response.responses {
            let name = topic.topic.0.as_str();
            for p in topic.partitions {
                let tp = TopicPartition::new(name, p.partition_index);
                let Some(&(_, offset, epoch)) = requested.iter().find(|(t, _, _)| *t == tp) else {
                    continue;
                };
                let Some(state) = self.partitions.get_mut(&tp) else {
                    continue;
                };
                if state.epoch != epoch || state.fetch_offset != offset {
                    continue; // seeked meanwhile
                }
                match ResponseError::try_from_code(p.error_code) {
                    None => {}
                    Some(OffsetOutOfRange) => {
                        if self.config.auto_offset_reset == OffsetReset::None {
                            return Err(ClientError::Refused {
                                addr: String::new(),
                                what: format!("Fetch of {tp} at offset {offset}"),
                                code: p.error_code,
                            });
                        }
                        state.position = None;
                        state.needs_reset = true;
                        continue;
                    }
                    Some(error) => {
                        tracing::debug!(partition = %tp, %error, "fetch refused");
                        self.cluster.mark_stale();
                        continue;
                    }
                }
                let end = if read_committed && p.last_stable_offset >= 0 {
                    p.last_stable_offset
                } else {
                    p.high_watermark
                };
                if end >= 0 {
                    state.end = Some(end);
                }
                let Some(at) = decoded.iter().position(|(t, _)| *t == tp) else {
                    continue;
                };
                let (records, next, fetched_bytes) = decoded.swap_remove(at).1?;
                let holds = held_bytes(fetched_bytes, records.capacity());
                if !records.is_empty() {
                    wire += fetched_bytes;
                    held += holds;
                }
                let state = self.partitions.get_mut(&tp).expect("found above");
                state.fetch_offset = next;
                if !records.is_empty() || next > offset {
                    state.buffered += 1;
                    let name = self.topic_name(&tp.topic);
                    self.buffered.push_back(Buffered {
                        tp,
                        name,
                        epoch,
                        records,
                        held_bytes: holds,
                        next,
                    });
                }
            }
        }
        if wire > 0 {
            self.expansion = Expansion::observed(wire, held);
        }
        Ok(())
    }
}

/// What one of `fetches` fetches about to be sent asks for of `room` bytes: an even share, but
/// not less than `least` (nor more than the room), so that the first of them go when the room
/// does not stretch to all.
fn share(room: i32, fetches: usize, least: i32) -> i32 {
    let fetches = i32::try_from(fetches.max(1)).unwrap_or(i32::MAX);
    (room / fetches).max(least).min(room)
}

/// Decodes the records of each partition asked for (topic name, partition, offset) that
/// the broker answered without an error, taking its bytes out of the response.
fn decode_response(
    response: &mut FetchResponse,
    asked: &[(Arc<str>, TopicPartition, i64)],
    read_committed: bool,
) -> Vec<Decoded> {
    let mut decoded = Vec::new();
    for topic in &mut response.responses {
        for p in &mut topic.partitions {
            let asked = asked.iter().find(|(name, tp, _)| {
                tp.partition == p.partition_index && **name == *topic.topic.0.as_str()
            });
            let Some((name, tp, offset)) = asked else {
                continue;
            };
            if p.error_code != 0 {
                continue;
            }
            let Some(bytes) = p.records.take() else {
                continue;
            };
            let aborted = match read_committed {
                true => p.aborted_transactions.take().unwrap_or_default(),
                false => Vec::new(),
            };
            let records = decode(
                &bytes,
                name,
                tp.partition,
                *offset,
                read_committed,
                aborted.iter().map(|a| (a.producer_id.0, a.first_offset)),
            )
            .map(|(records, next)| (records, next, bytes.len()));
            decoded.push((tp.clone(), records));
        }
    }
    decoded
}

/// The records of fetched batches at or after `offset`, and the offset to fetch next.
fn decode(
    bytes: &Bytes,
    topic: &str,
    partition: i32,
    offset: i64,
    read_committed: bool,
    aborted: impl Iterator<Item = (i64, i64)>,
) -> Result<(VecDeque<(i64, Record)>, i64), ClientError> {
    // Aborted transactions by first offset (smallest first), as Kafka's fetcher reads them.
    let mut aborted: BinaryHeap<std::cmp::Reverse<(i64, i64)>> = aborted
        .map(|(producer, first)| std::cmp::Reverse((first, producer)))
        .collect();
    let mut aborting: HashSet<i64> = HashSet::new();
    // Room for every record the response holds, at once.
    let mut records = VecDeque::with_capacity(held_records(bytes));
    let mut next = offset;
    let mut at = 0;
    for batch in Batches::new(bytes) {
        let (header, raw) = batch.map_err(|e| corrupt(topic, partition, e))?;
        let start = at;
        at += raw.len();
        if header.next_offset() <= next {
            continue;
        }
        let whole = bytes.slice(start..at);
        if read_committed && header.is_transactional() {
            while let Some(std::cmp::Reverse((first, producer))) = aborted.peek().copied() {
                if first > header.last_offset() {
                    break;
                }
                aborted.pop();
                aborting.insert(producer);
            }
            if header.is_control() {
                let (_, control) = decode_records(&whole, MAX_DECOMPRESSED)
                    .map_err(|e| corrupt(topic, partition, e))?;
                let is_abort = control.first().and_then(|r| control_type(&r.record))
                    == Some(ControlType::Abort);
                if is_abort {
                    aborting.remove(&header.producer_id);
                }
                next = header.next_offset();
                continue;
            }
            if aborting.contains(&header.producer_id) {
                next = header.next_offset();
                continue;
            }
        }
        next = header.next_offset();
        if header.is_control() {
            continue;
        }
        let keep = |r: BatchRecord| {
            if r.offset >= offset {
                records.push_back((r.offset, r.record));
            }
        };
        decode_records_with(&whole, MAX_DECOMPRESSED, keep)
            .map_err(|e| corrupt(topic, partition, e))?;
    }
    Ok((records, next))
}

/// How many records the batches of `bytes` say they hold, control batches aside (a bound
/// that a damaged batch cannot raise past what the bytes could hold).
fn held_records(bytes: &Bytes) -> usize {
    Batches::new(bytes)
        .map_while(Result::ok)
        .filter(|(header, _)| !header.is_control())
        .map(|(header, raw)| usize::try_from(header.record_count).map_or(0, |n| n.min(raw.len())))
        .sum()
}

fn corrupt(topic: &str, partition: i32, e: impl std::fmt::Display) -> ClientError {
    ClientError::Protocol {
        addr: String::new(),
        reason: format!("a corrupt batch in {topic}-{partition}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetcher(fetch_max_bytes: i32, max_partition_fetch_bytes: i32) -> Fetcher {
        let mut config = ConsumerConfig::new("127.0.0.1:9");
        config.fetch_max_bytes = fetch_max_bytes;
        config.max_partition_fetch_bytes = max_partition_fetch_bytes;
        let cluster = Cluster::new(config.client.clone()).unwrap();
        let mut fetcher = Fetcher::new(cluster, config);
        // Answers that hold just their bytes, so that the figures below read plainly.
        fetcher.expansion = Expansion::observed(1, 1);
        fetcher
    }

    fn waiting(fetcher: &mut Fetcher, partition: i32, held_bytes: usize) {
        let tp = TopicPartition::new("t", partition);
        fetcher.partitions.entry(tp.clone()).or_default();
        fetcher.buffered.push_back(Buffered {
            tp,
            name: Arc::from("t"),
            epoch: 0,
            records: VecDeque::new(),
            held_bytes,
            next: 0,
        });
    }

    #[test]
    fn fetches_ask_for_what_the_waiting_answers_and_those_in_flight_leave_of_fetch_max_bytes() {
        let mut fetcher = fetcher(10 << 20, 1 << 20);
        assert_eq!(fetcher.room(), Some(10 << 20));
        waiting(&mut fetcher, 0, 3 << 20);
        assert_eq!(fetcher.room(), Some(7 << 20));
        fetcher.nodes_fetching.insert(1, 5 << 20);
        assert_eq!(fetcher.room(), Some(2 << 20));
        // Less room than one partition may answer: no fetch until answers are handed out.
        waiting(&mut fetcher, 1, (1 << 20) + 1);
        assert_eq!(fetcher.room(), None);
        fetcher.buffered.pop_front();
        assert_eq!(fetcher.room(), Some((4 << 20) - 1));
        fetcher.nodes_fetching.clear();
        fetcher.buffered.clear();
        assert_eq!(fetcher.room(), Some(10 << 20));
    }

    #[test]
    fn the_room_counts_decoded_records_and_a_fetch_asks_for_the_bytes_that_fill_it() {
        let mut fetcher = fetcher(16 << 20, 1 << 20);
        // Answers that held four times their bytes.
        fetcher.expansion = Expansion::observed(1 << 20, 4 << 20);
        assert_eq!(fetcher.least_held(), 4 << 20);
        assert_eq!(fetcher.expansion.wire(16 << 20), 4 << 20);
        waiting(&mut fetcher, 0, 10 << 20);
        assert_eq!(fetcher.room(), Some(6 << 20));
        // Room for less than one partition's answer as decoded: no fetch.
        waiting(&mut fetcher, 1, 3 << 20);
        assert_eq!(fetcher.room(), None);
        // Never more than fetch.max.bytes is waited for, however large the ratio.
        fetcher.expansion = Expansion::observed(1, 100);
        assert_eq!(fetcher.least_held(), 16 << 20);
    }

    #[test]
    fn answers_of_paused_or_moved_partitions_do_not_hold_back_fetches() {
        let mut fetcher = fetcher(4 << 20, 1 << 20);
        waiting(&mut fetcher, 0, 2 << 20);
        waiting(&mut fetcher, 1, 1 << 20);
        assert_eq!(fetcher.room(), Some(1 << 20));
        let paused = TopicPartition::new("t", 0);
        fetcher.partitions.get_mut(&paused).unwrap().paused = true;
        assert_eq!(fetcher.room(), Some(3 << 20));
        let moved = TopicPartition::new("t", 1);
        fetcher.partitions.get_mut(&moved).unwrap().epoch += 1;
        assert_eq!(fetcher.room(), Some(4 << 20));
    }

    #[test]
    fn a_partition_is_fetched_again_while_one_answer_waits_and_both_come_out_in_order() {
        let mut fetcher = fetcher(16 << 20, 1 << 20);
        let tp = TopicPartition::new("t", 0);
        fetcher.partitions.entry(tp.clone()).or_default().position = Some(0);
        for (first, next) in [(0, 3), (3, 6)] {
            let state = &fetcher.partitions[&tp];
            assert!(
                !state.is_held_back_by_buffer(),
                "{} waiting",
                state.buffered
            );
            fetcher.buffered.push_back(Buffered {
                tp: tp.clone(),
                name: Arc::from("t"),
                epoch: 0,
                records: (first..next)
                    .map(|offset| (offset, Record::new("k", "v", offset)))
                    .collect(),
                held_bytes: 100,
                next,
            });
            fetcher.partitions.get_mut(&tp).unwrap().buffered += 1;
        }
        assert!(fetcher.partitions[&tp].is_held_back_by_buffer());
        let offsets = |records: Vec<ConsumerRecord>| -> Vec<i64> {
            records.iter().map(|r| r.offset).collect()
        };
        // The first answer is handed out whole before the second is touched.
        assert_eq!(offsets(fetcher.take_records(4)), [0, 1, 2, 3]);
        assert!(!fetcher.partitions[&tp].is_held_back_by_buffer());
        assert_eq!(fetcher.partitions[&tp].buffered, 1);
        assert_eq!(offsets(fetcher.take_records(10)), [4, 5]);
        assert_eq!(fetcher.partitions[&tp].buffered, 0);
        assert_eq!(fetcher.partitions[&tp].position, Some(6));
    }

    #[test]
    fn brokers_fetched_from_together_share_the_room() {
        assert_eq!(share(16 << 20, 1, 1 << 20), 16 << 20);
        assert_eq!(share(15 << 20, 3, 1 << 20), 5 << 20);
        // Too little for an even share: the first fetches take what one partition may answer.
        assert_eq!(share(2 << 20, 4, 1 << 20), 1 << 20);
        assert_eq!(share(1 << 19, 4, 1 << 20), 1 << 19);
        assert_eq!(share(100, 0, 1), 100);
    }

    #[test]
    fn a_fetch_is_sent_when_nothing_is_held_whatever_the_limits() {
        // A batch larger than fetch.max.bytes comes whole: it may leave the room at nothing.
        let mut fetcher = fetcher(1 << 10, 1 << 20);
        waiting(&mut fetcher, 0, 4 << 10);
        assert_eq!(fetcher.room(), None);
        fetcher.buffered.clear();
        assert_eq!(fetcher.room(), Some(1 << 10));
        // fetch.max.bytes under max.partition.fetch.bytes: a fetch asks for what is left of
        // fetch.max.bytes once something is held.
        waiting(&mut fetcher, 0, 512);
        assert_eq!(fetcher.room(), None);
        let mut fetcher = self::fetcher(1 << 20, 4 << 20);
        waiting(&mut fetcher, 0, 1 << 10);
        assert_eq!(fetcher.room(), None);
    }
}
