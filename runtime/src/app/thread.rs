//! A stream thread: one consumer in the application's group, one producer, and the tasks
//! the group gives it. It polls records and hands each to its task, turns the tasks' crank,
//! sends what they write (outputs, repartition records, changelog records), and commits at
//! every commit interval. At-least-once, a commit waits for the sends and then commits the
//! input offsets, so that a record is reprocessed after a crash rather than lost.
//! Exactly-once (v2), the thread's producer is transactional: what the tasks write and the
//! input offsets commit in one transaction, and the stores' write buffers reach sled only
//! once it has committed. A new task restores its stores from their changelogs first.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_core::log::{Record, TopicPartition};
use eddy_core::streams::internals::{StreamTask, TaskConfig};
use eddy_core::streams::{StreamsError, TaskId, Topology};
use tokio::sync::watch;

use super::assignor::placement::RUNNING;
use super::assignor::StreamsAssignor;
use super::restore::{restore_task, RestoreError};
use super::{ProcessingGuarantee, StreamsConfig};
use crate::client::{
    ClientError, Consumer, ConsumerConfig, ConsumerRecord, Delivery, IsolationLevel, OffsetReset,
    Producer, ProducerConfig, ProducerRecord, Topic,
};
use crate::store::SledStores;

/// Why a stream thread stopped.
#[derive(Debug, thiserror::Error)]
pub enum ThreadError {
    /// The cluster could not be reached or refused a request.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A task failed.
    #[error("task {task}: {source}")]
    Task {
        /// The task.
        task: TaskId,
        /// What went wrong.
        source: StreamsError,
    },
    /// A task's state could not be restored.
    #[error(transparent)]
    Restore(#[from] RestoreError),
    /// The group's leader could not assign tasks.
    #[error("the application cannot run: {0}")]
    Assignment(String),
}

/// What a stream thread needs to run.
pub(crate) struct ThreadContext {
    pub(crate) topology: Arc<Topology>,
    pub(crate) config: StreamsConfig,
    pub(crate) bootstrap: String,
    pub(crate) stores: Arc<SledStores>,
    pub(crate) assignor: Arc<StreamsAssignor>,
    pub(crate) shutdown: watch::Receiver<bool>,
    /// The thread's number in its instance, and the instance's id: its transactional id's
    /// parts.
    pub(crate) index: usize,
    pub(crate) process: String,
    /// Called once, when the thread has taken up its first tasks.
    pub(crate) on_first_assignment: Option<Box<dyn FnOnce() + Send + Sync>>,
}

/// The thread's running state.
struct StreamThread {
    context: ThreadContext,
    consumer: Consumer,
    restore_consumer: Consumer,
    producer: Producer,
    tasks: BTreeMap<TaskId, StreamTask>,
    /// Which task reads each input partition.
    inputs: HashMap<TopicPartition, TaskId>,
    /// Sends not yet known to have arrived.
    deliveries: Vec<(Option<TopicPartition>, Delivery)>,
    /// The next input offset of each partition, once processed.
    processed: BTreeMap<TopicPartition, i64>,
    /// The offset after the last acknowledged changelog record, by changelog partition.
    changelog_reached: BTreeMap<TopicPartition, i64>,
    last_commit: Instant,
    /// Exactly-once: whether the producer's transaction is open.
    exactly_once: bool,
    in_transaction: bool,
}

fn millis_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Runs a stream thread until shutdown is asked for or it fails.
pub(crate) async fn run(context: ThreadContext) -> Result<(), ThreadError> {
    let config = &context.config;
    // The user's client settings first (Kafka Streams' prefixes), then what the thread needs.
    let bootstrap = [("bootstrap.servers", context.bootstrap.as_str())];
    let main = config.client_properties_for("main.consumer");
    let mut consumer_config =
        ConsumerConfig::from_properties(bootstrap.iter().copied().chain(main))?
            .group_id(&config.application_id)
            .auto_offset_reset(OffsetReset::Earliest)
            .isolation_level(IsolationLevel::ReadCommitted);
    consumer_config.enable_auto_commit = false;
    consumer_config.client.client_id = format!("{}-consumer", config.application_id);
    let mut consumer = Consumer::new(consumer_config)?;
    consumer.set_assignors(vec![context.assignor.clone()]);
    let app = &config.application_id;
    let mut sources: Vec<String> = context
        .topology
        .subtopologies()
        .iter()
        .filter(|s| !s.global)
        .flat_map(|s| {
            s.source_topics
                .iter()
                .map(|t| context.topology.full_topic_name(app, t))
        })
        .collect();
    sources.sort();
    sources.dedup();
    let names: Vec<&str> = sources.iter().map(String::as_str).collect();
    consumer.subscribe(&names)?;
    let restore = config.client_properties_for("restore.consumer");
    let restore_consumer = Consumer::new(
        ConsumerConfig::from_properties(bootstrap.iter().copied().chain(restore))?
            .isolation_level(IsolationLevel::ReadCommitted),
    )?;
    let exactly_once = config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2;
    let producer_properties = config.client_properties_for("producer");
    let sets_timeout = producer_properties
        .iter()
        .any(|(k, _)| *k == "transaction.timeout.ms");
    let mut producer_config =
        ProducerConfig::from_properties(bootstrap.iter().copied().chain(producer_properties))?;
    if exactly_once {
        producer_config = producer_config
            .transactional_id(format!("{app}-{}-{}", context.process, context.index));
        if !sets_timeout {
            // Kafka Streams' default under exactly-once: a crashed thread's open
            // transaction holds its partitions' readers back no longer than this.
            producer_config = producer_config.transaction_timeout(Duration::from_secs(10));
        }
    }
    let producer = Producer::new(producer_config)?;
    if exactly_once {
        producer.init_transactions().await?;
    }
    let mut thread = StreamThread {
        context,
        consumer,
        restore_consumer,
        producer,
        tasks: BTreeMap::new(),
        inputs: HashMap::new(),
        deliveries: Vec::new(),
        processed: BTreeMap::new(),
        changelog_reached: BTreeMap::new(),
        last_commit: Instant::now(),
        exactly_once,
        in_transaction: false,
    };
    let outcome = thread.run().await;
    let closed = thread.close(outcome.is_ok()).await;
    let left = thread.consumer.close().await;
    outcome.and(closed).and(left.map_err(ThreadError::from))
}

impl StreamThread {
    async fn run(&mut self) -> Result<(), ThreadError> {
        let poll_wait = Duration::from_millis(100);
        while !*self.context.shutdown.borrow() {
            let records = self.consumer.poll(poll_wait).await?;
            if let Some(assignment) = self.context.assignor.take_assignment() {
                if let Some(error) = assignment.error {
                    return Err(ThreadError::Assignment(error));
                }
                let active: Vec<TaskId> = assignment.active.iter().map(|&t| t.into()).collect();
                self.reassign(&active).await?;
                if let Some(first) = self.context.on_first_assignment.take() {
                    first();
                }
            }
            self.route(records)?;
            self.process().await?;
            if self.last_commit.elapsed() >= self.context.config.commit_interval() {
                self.commit().await?;
            }
        }
        Ok(())
    }

    /// Queues polled records on their tasks. A poll hands records over partition by
    /// partition, so each run of one partition's records finds its task once.
    fn route(&mut self, records: Vec<ConsumerRecord>) -> Result<(), ThreadError> {
        let mut records = records.into_iter().peekable();
        while let Some(first) = records.peek() {
            let (topic, partition) = (first.topic.clone(), first.partition);
            let mut run = Vec::new();
            while let Some(r) = records.next_if(|r| r.partition == partition && r.topic == topic) {
                let input = Record {
                    key: r.key,
                    value: r.value,
                    headers: r.headers,
                    timestamp: r.timestamp,
                };
                run.push((r.offset, input));
            }
            let tp = TopicPartition::new(&*topic, partition);
            // A partition without a task was revoked: its new owner reads it again.
            let Some(task) = self.inputs.get(&tp).and_then(|id| self.tasks.get_mut(id)) else {
                continue;
            };
            let id = task.id();
            let next = run.last().map(|(offset, _)| offset + 1);
            task.add_records(&topic, run)
                .map_err(|source| ThreadError::Task { task: id, source })?;
            if let Some(next) = next {
                self.processed.insert(tp, next);
            }
        }
        Ok(())
    }

    /// Runs every queued record through its task and sends what the tasks wrote.
    async fn process(&mut self) -> Result<(), ThreadError> {
        let now = millis_now();
        for (id, task) in &mut self.tasks {
            let failed = |source| ThreadError::Task { task: *id, source };
            task.set_wall_clock(now).map_err(failed)?;
            while task.process().map_err(failed)? {}
            task.check_stores().map_err(failed)?;
        }
        self.send_written().await
    }

    /// Opens a transaction if exactly-once needs one and none is open.
    fn begin(&mut self) -> Result<(), ThreadError> {
        if self.exactly_once && !self.in_transaction {
            self.producer.begin_transaction()?;
            self.in_transaction = true;
        }
        Ok(())
    }

    /// Sends the tasks' output and changelog records, and forgets them.
    async fn send_written(&mut self) -> Result<(), ThreadError> {
        let written = self
            .tasks
            .values()
            .any(|t| !t.output().is_empty() || !t.changelog().is_empty());
        if written {
            self.begin()?;
        }
        for task in self.tasks.values_mut() {
            let partition = task.id().partition;
            // One copy of each buffer for all its records; each record a slice of it.
            for r in task.output().to_records() {
                let record = ProducerRecord {
                    topic: r.topic.into(),
                    partition: r.partition,
                    key: r.key,
                    value: r.value,
                    headers: r.headers,
                    timestamp: Some(r.timestamp),
                };
                self.deliveries
                    .push((None, self.producer.send(record).await?));
            }
            task.clear_output();
            for (topic, batch) in task.changelog() {
                let tp = TopicPartition::new(topic, partition);
                let name = Topic::from(topic);
                for change in batch.to_records() {
                    let record = ProducerRecord {
                        topic: name.clone(),
                        partition: Some(partition),
                        key: Some(change.key),
                        value: change.value,
                        headers: Vec::new(),
                        timestamp: None,
                    };
                    self.deliveries
                        .push((Some(tp.clone()), self.producer.send(record).await?));
                }
            }
            task.clear_changelog();
        }
        Ok(())
    }

    /// Waits for every send, then commits the input offsets processed (in the transaction,
    /// exactly-once) and records in each store the changelog offset it reached (applying its
    /// write buffer, exactly-once).
    async fn commit(&mut self) -> Result<(), ThreadError> {
        for task in self.tasks.values_mut() {
            task.flush_stores();
        }
        self.send_written().await?;
        let offsets = self.committable().await;
        if self.exactly_once {
            if !offsets.is_empty() {
                self.begin()?;
            }
            if self.in_transaction {
                if let Err(e) = self.commit_transaction(&offsets).await {
                    for task in self.tasks.values_mut() {
                        task.abort_stores();
                    }
                    if let Err(abort) = self.producer.abort_transaction().await {
                        tracing::warn!("aborting the transaction: {abort}");
                    }
                    self.in_transaction = false;
                    return Err(e);
                }
                self.in_transaction = false;
            }
        } else {
            self.await_deliveries().await?;
            if !offsets.is_empty() {
                self.consumer.commit(&offsets).await?;
            }
        }
        for task in self.tasks.values_mut() {
            let partition = task.id().partition;
            let reached = &self.changelog_reached;
            task.commit_stores(|topic| {
                reached.get(&TopicPartition::new(topic, partition)).copied()
            });
        }
        self.last_commit = Instant::now();
        Ok(())
    }

    /// The offset to commit for each input partition: the consumer's position, as Kafka
    /// Streams commits it (every record polled is processed by now, and the position is
    /// past the transaction markers that follow the last one, so a caught-up application
    /// shows no lag), or after the last record processed where the position is not known.
    async fn committable(&mut self) -> BTreeMap<TopicPartition, i64> {
        let mut offsets = BTreeMap::new();
        let inputs: Vec<TopicPartition> = self.inputs.keys().cloned().collect();
        for tp in inputs {
            let processed = self.processed.get(&tp).copied();
            let position = match processed {
                // Nothing read from it yet: its committed offset stands.
                None => None,
                Some(_) => self.consumer.position(&tp).await.ok(),
            };
            if let Some(offset) = processed.max(position) {
                offsets.insert(tp, offset);
            }
        }
        offsets
    }

    /// Exactly-once: the sends arrived, the offsets join the transaction, it commits.
    async fn commit_transaction(
        &mut self,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> Result<(), ThreadError> {
        self.await_deliveries().await?;
        if !offsets.is_empty() {
            let group = self.consumer.group_metadata().ok_or_else(|| {
                ThreadError::Client(ClientError::State("the consumer has no group".into()))
            })?;
            self.producer
                .send_offsets_to_transaction(offsets, &group)
                .await?;
        }
        self.producer.commit_transaction().await?;
        Ok(())
    }

    /// Waits for every send, noting the changelog offsets they reached.
    async fn await_deliveries(&mut self) -> Result<(), ThreadError> {
        for (changelog, delivery) in self.deliveries.drain(..) {
            let metadata = delivery.await?;
            if let Some(tp) = changelog {
                let next = metadata.offset + 1;
                let reached = self.changelog_reached.entry(tp).or_insert(next);
                *reached = (*reached).max(next);
            }
        }
        Ok(())
    }

    /// Takes up the tasks of a new assignment: those that go are committed and closed first,
    /// those that come are created and restored.
    async fn reassign(&mut self, active: &[TaskId]) -> Result<(), ThreadError> {
        let going: Vec<TaskId> = self
            .tasks
            .keys()
            .filter(|id| !active.contains(id))
            .copied()
            .collect();
        if !going.is_empty() {
            self.commit().await?;
            for id in going {
                if let Some(mut task) = self.tasks.remove(&id) {
                    task.close()
                        .map_err(|source| ThreadError::Task { task: id, source })?;
                }
                self.inputs.retain(|_, t| *t != id);
            }
            // Offsets of partitions that went are another member's to commit now.
            let inputs = &self.inputs;
            self.processed.retain(|tp, _| inputs.contains_key(tp));
        }
        let context = &self.context;
        let app = &context.config.application_id;
        let coming: Vec<TaskId> = active
            .iter()
            .filter(|id| !self.tasks.contains_key(id))
            .copied()
            .collect();
        for id in coming {
            let mut task_config = TaskConfig::new(app.clone());
            task_config.stores = context.stores.clone();
            task_config.cache_max_bytes = context.config.statestore_cache_max_bytes
                / context.config.num_stream_threads.max(1);
            task_config.write_buffer = self.exactly_once;
            let mut task = StreamTask::new(&context.topology, id, &task_config).map_err(|e| {
                ThreadError::Task {
                    task: id,
                    source: StreamsError::Processor {
                        processor: format!("task {id}"),
                        reason: e.to_string(),
                    },
                }
            })?;
            let restored = restore_task(&mut self.restore_consumer, &mut task).await?;
            tracing::info!(task = %id, records = restored.records, elapsed = ?restored.elapsed, "task restored");
            task.init()
                .map_err(|source| ThreadError::Task { task: id, source })?;
            for topic in task.input_topics() {
                self.inputs
                    .insert(TopicPartition::new(&*topic, id.partition), id);
            }
            self.tasks.insert(id, task);
        }
        // What this thread reports at the next rebalance: the tasks it runs, caught up.
        let owned: BTreeSet<TaskId> = self.tasks.keys().copied().collect();
        let sums = owned.iter().map(|&t| (t, RUNNING)).collect();
        context.assignor.set_owned(owned, sums);
        Ok(())
    }

    /// Commits (on a clean stop), closes the tasks and the clients.
    async fn close(&mut self, clean: bool) -> Result<(), ThreadError> {
        let committed = if clean { self.commit().await } else { Ok(()) };
        for (id, task) in &mut self.tasks {
            if let Err(e) = task.close() {
                tracing::warn!(task = %id, "closing: {e}");
            }
        }
        self.tasks.clear();
        let producer = self.producer.close().await;
        committed?;
        producer?;
        Ok(())
    }
}
