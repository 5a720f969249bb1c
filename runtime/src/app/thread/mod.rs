//! A stream thread: one consumer in the application's group, one producer, and the tasks
//! the group gives it. It polls records and hands each to its task, turns the tasks' crank,
//! sends what they write (outputs, repartition records, changelog records), and commits at
//! every commit interval. At-least-once, a commit waits for the sends and then commits the
//! input offsets, so that a record is reprocessed after a crash rather than lost.
//! Exactly-once (v2), the thread's producer is transactional: what the tasks write and the
//! input offsets commit in one transaction, and the stores' write buffers reach sled only
//! once it has committed. A new task restores its stores from their changelogs first.
//! The tasks live in a [`TaskManager`] that the consumer's rebalance listener shares, so
//! that tasks moving away commit before the member rejoins.

mod assignment;
mod commit;
mod errors;
mod held;
mod idling;
mod inputs;
mod output;
mod schedule;
mod tasks;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use eddy_core::log::TopicPartition;
use eddy_core::streams::internals::ErrorOrigin;
use eddy_core::streams::store::LayerConfig;
use eddy_core::streams::{StreamsError, TaskId, Topology};
use tokio::sync::{watch, Mutex};
use tracing::Instrument;

pub(crate) use self::assignment::on_disk_sums;
use self::errors::ErrorHandlers;
use self::held::HeldState;
use self::idling::Idling;
use self::inputs::Inputs;
use self::output::{ProducerFactory, StreamsProducer};
use self::schedule::CommitSchedule;
use self::tasks::TaskManager;
use super::assignor::StreamsAssignor;
use super::metrics::{StreamsMetrics, ThreadMetrics, ThreadPart};
use super::query::Hosted;
use super::restore::{RestoreError, StateUpdater};
use super::{ProcessingGuarantee, StreamsConfig};
use crate::client::{
    ClientError, Consumer, IsolationLevel, OffsetReset, Producer, ProducerConfig, RebalanceListener,
};
use crate::store::SledStores;
use crate::time::Instant;

/// Why a stream thread stopped.
#[derive(Debug, thiserror::Error)]
pub enum ThreadError {
    /// The cluster could not be reached or refused a request.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A client setting the application passes on cannot be used.
    #[error(transparent)]
    Config(#[from] crate::client::ConfigError),
    /// A task failed.
    #[error("task {task}: {source}")]
    Task {
        /// The task.
        task: TaskId,
        /// What went wrong.
        source: StreamsError,
    },
    /// A record failed, and its handler says to stop.
    #[error(
        "task {task}: the record at {topic}-{partition}@{offset} failed ({origin:?}) in \
         {processor}: {source}"
    )]
    Record {
        /// The task.
        task: TaskId,
        /// Where the record came from.
        topic: String,
        /// Its partition.
        partition: i32,
        /// Its offset.
        offset: i64,
        /// Where it failed.
        origin: ErrorOrigin,
        /// The processor that failed.
        processor: String,
        /// What went wrong.
        source: StreamsError,
    },
    /// A task's state could not be restored.
    #[error(transparent)]
    Restore(#[from] RestoreError),
    /// The group's leader could not assign tasks.
    #[error("the application cannot run: {0}")]
    Assignment(String),
    /// An instance asked the whole application to shut down.
    #[error("an instance of the application asked it to shut down")]
    ApplicationShutdown,
}

/// What every stream thread of an instance shares.
#[derive(Clone)]
pub(crate) struct Instance {
    pub(crate) topology: Arc<Topology>,
    pub(crate) config: StreamsConfig,
    pub(crate) bootstrap: String,
    pub(crate) stores: Arc<SledStores>,
    /// The offset sums of the state the instance found on disk when it started.
    pub(crate) on_disk_sums: BTreeMap<TaskId, i64>,
    /// What the instance hosts, for interactive queries.
    pub(crate) hosted: Arc<Hosted>,
    /// The instance's figures.
    pub(crate) metrics: Arc<StreamsMetrics>,
    pub(crate) shutdown: watch::Receiver<bool>,
    /// The instance's id: a part of its threads' transactional ids.
    pub(crate) process: String,
}

/// What a stream thread needs to run.
pub(crate) struct ThreadContext {
    pub(crate) instance: Instance,
    pub(crate) assignor: Arc<StreamsAssignor>,
    /// The thread's number in its instance: a part of its transactional id.
    pub(crate) index: usize,
    /// Called once, when the thread has taken up its first tasks.
    pub(crate) on_first_assignment: Option<Box<dyn FnOnce() + Send + Sync>>,
}

/// Runs a stream thread until shutdown is asked for or it fails.
pub(crate) async fn run(context: ThreadContext) -> Result<(), ThreadError> {
    let ThreadContext {
        instance:
            Instance {
                topology,
                config,
                bootstrap,
                stores,
                on_disk_sums,
                hosted,
                metrics,
                shutdown,
                process,
            },
        assignor,
        index,
        mut on_first_assignment,
    } = context;
    // Kafka Streams' defaults for its consumers, then the user's client settings (Kafka
    // Streams' prefixes), then what the thread needs.
    let mut consumer_config = config
        .main_consumer_config(&bootstrap)?
        .group_id(&config.application_id)
        .auto_offset_reset(OffsetReset::Earliest)
        .isolation_level(IsolationLevel::ReadCommitted);
    consumer_config.enable_auto_commit = false;
    consumer_config.client.client_id = format!("{}-consumer", config.application_id);
    // Static membership, as Kafka Streams has it: each thread is a member of its own,
    // `<group.instance.id>-<thread number from 1>`, so that a restarted instance takes its
    // threads' places at once instead of waiting out their sessions.
    if let Some(instance) = &consumer_config.group_instance_id {
        consumer_config.group_instance_id = Some(format!("{instance}-{}", index + 1));
    }
    let mut consumer = Consumer::new(consumer_config)?;
    consumer.set_assignors(vec![assignor.clone()]);
    let app = &config.application_id;
    let mut sources: Vec<String> = topology
        .subtopologies()
        .iter()
        .filter(|s| !s.global)
        .flat_map(|s| {
            s.source_topics
                .iter()
                .map(|t| topology.full_topic_name(app, t))
        })
        .collect();
    sources.sort();
    sources.dedup();
    // Each of the restore consumer's polls lands in its store in one batch.
    let restore_consumer = Consumer::new(
        config
            .restore_consumer_config(&bootstrap)?
            .isolation_level(IsolationLevel::ReadCommitted),
    )?;
    let exactly_once = config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2;
    let (new_producer, transaction_timeout) =
        producer_factory(&config, &bootstrap, &process, index)?;
    let mut output = StreamsProducer::start(new_producer, exactly_once).await?;
    output.notify_when_committed(consumer.waker());
    let errors = ErrorHandlers::new(&config);
    let application_id = config.application_id.clone();
    let (cache_max_bytes, checkpoint_max_bytes) = thread_shares(&config);
    let max_task_idle = config.max_task_idle;
    // One record cache budget for the thread's tasks, as Kafka's thread cache.
    let cache = LayerConfig::own_cache(cache_max_bytes);
    let manager = Arc::new(Mutex::new(TaskManager {
        topology,
        config,
        cache,
        checkpoint_max_bytes,
        stores,
        assignor: assignor.clone(),
        updater: StateUpdater::new(restore_consumer, transaction_timeout, checkpoint_max_bytes),
        output,
        tasks: BTreeMap::new(),
        inputs: Inputs::default(),
        schedule: CommitSchedule::new(),
        sealed: None,
        committed: BTreeMap::new(),
        commit_waits: Default::default(),
        held: HeldState::new(on_disk_sums),
        failure: None,
        probing: assignment::Probing::default(),
        last_cleaning: Instant::now(),
        errors,
        hosted,
        index,
        metrics: ThreadMetrics::new(metrics, &application_id, index),
        late_seen: BTreeMap::new(),
        idling: Idling::new(max_task_idle),
    }));
    manager.lock().await.report_owned().await;
    consumer.set_rebalance_listener(Revocations {
        manager: manager.clone(),
    });
    let names: Vec<&str> = sources.iter().map(String::as_str).collect();
    consumer.subscribe(&names)?;
    let outcome = poll_loop(
        &mut consumer,
        &manager,
        &assignor,
        &shutdown,
        &mut on_first_assignment,
    )
    .await;
    // Asked to by another instance, the thread stops as cleanly as on a close.
    let clean = matches!(outcome, Ok(()) | Err(ThreadError::ApplicationShutdown));
    let closed = manager.lock().await.close(&mut consumer, clean).await;
    let left = if assignor.stays_in_group() {
        consumer.close_remaining_in_group();
        Ok(())
    } else {
        consumer.close().await
    };
    outcome.and(closed).and(left.map_err(ThreadError::from))
}

/// A stream thread's shares of the instance's state memory: the bytes its record caches may
/// count together (`statestore.cache.max.bytes` over the threads, counted as the caches count
/// them), and what its write buffers may take (`state.checkpoint.max.bytes` over the
/// threads).
fn thread_shares(config: &StreamsConfig) -> (usize, usize) {
    let threads = config.num_stream_threads.max(1);
    (
        config.statestore_cache_max_bytes / threads,
        config.state_memory().write_buffers / threads,
    )
}

/// Builds the thread's producer: transactional under exactly-once, with the transactional
/// id `<application.id>-<process id>-<thread index>`; and its transaction timeout.
fn producer_factory(
    config: &StreamsConfig,
    bootstrap: &str,
    process: &str,
    index: usize,
) -> Result<(ProducerFactory, Duration), ThreadError> {
    let producer_config = producer_config(config, bootstrap, process, index)?;
    let timeout = producer_config.transaction_timeout;
    Ok((
        Box::new(move || Producer::new(producer_config.clone())),
        timeout,
    ))
}

/// The settings of a stream thread's producer: the application's (see
/// [`StreamsConfig::producer_config`]) with, under exactly-once, the transactional id
/// `<application.id>-<process id>-<thread index>`.
fn producer_config(
    config: &StreamsConfig,
    bootstrap: &str,
    process: &str,
    index: usize,
) -> Result<ProducerConfig, ThreadError> {
    let producer_config = config.producer_config(bootstrap)?;
    Ok(match config.processing_guarantee {
        ProcessingGuarantee::ExactlyOnceV2 => {
            let app = &config.application_id;
            producer_config.transactional_id(format!("{app}-{process}-{index}"))
        }
        ProcessingGuarantee::AtLeastOnce => producer_config,
    })
}

/// How long past its wait a poll may go on once the thread is asked to close.
const POLL_GRACE_AT_CLOSE: Duration = Duration::from_secs(1);

/// Polls and processes until shutdown is asked for or something fails that closing the
/// tasks dirty cannot recover from.
async fn poll_loop(
    consumer: &mut Consumer,
    manager: &Mutex<TaskManager>,
    assignor: &StreamsAssignor,
    shutdown: &watch::Receiver<bool>,
    on_first_assignment: &mut Option<Box<dyn FnOnce() + Send + Sync>>,
) -> Result<(), ThreadError> {
    let poll_wait = Duration::from_millis(100);
    let mut restoring = false;
    let mut until_commit = poll_wait;
    let mut asked_to_stop = false;
    while !*shutdown.borrow() {
        if !asked_to_stop && assignor.shutdown_requested() {
            // The next join carries the request to the leader.
            asked_to_stop = true;
            consumer.enforce_rebalance();
        }
        // Revocations run inside the poll, and take the manager themselves. While tasks are
        // restored the poll does not wait: the restore consumer's poll does. Nor does it
        // wait past the next commit: what was processed is committed on time, not up to a
        // poll's wait late.
        let wait = if restoring {
            Duration::ZERO
        } else {
            poll_wait.min(until_commit)
        };
        let polling = Instant::now();
        let records = {
            let poll = consumer.poll_runs(wait);
            tokio::pin!(poll);
            let mut stop = shutdown.clone();
            let held_up = async {
                let _ = stop.wait_for(|stop| *stop).await;
                tokio::time::sleep(wait + POLL_GRACE_AT_CLOSE).await;
            };
            tokio::select! {
                records = &mut poll => records,
                () = held_up => {
                    // Asked to close while the poll waits on a rebalance (one that waits for
                    // a static member that stopped without leaving the group): the poll is
                    // given up, as Kafka's consumer returns from a poll at its timeout.
                    tracing::debug!("closing during a rebalance");
                    break;
                }
            }
        };
        let mut tasks = manager.lock().await;
        if let Some(e) = tasks.failure.take() {
            return Err(e);
        }
        let polled = records.as_ref().is_ok_and(|r| !r.is_empty());
        let waited = if polled {
            ThreadPart::Polling
        } else {
            ThreadPart::Idle
        };
        tasks.metrics.spent(waited, polling.elapsed());
        let step = async {
            let records = records?;
            let processing = Instant::now();
            if let Some(assignment) = assignor.take_assignment() {
                if assignment.shutdown_application {
                    return Err(ThreadError::ApplicationShutdown);
                }
                if asked_to_stop && assignor.shutdown_requested() {
                    // This round's join went out before the request was made (another
                    // member's leaving had started it): the next join carries it.
                    asked_to_stop = false;
                }
                if let Some(error) = &assignment.error {
                    return Err(ThreadError::Assignment(error.clone()));
                }
                tasks.assign(consumer, &assignment).await?;
                if let Some(first) = on_first_assignment.take() {
                    first();
                }
            }
            tasks.route(consumer, records)?;
            tasks.process(consumer).await?;
            tasks.probe_if_due(consumer).await;
            tasks.clean_state_if_due().await;
            let waited = tasks.commit_waits.take();
            tasks.metrics.spent(
                ThreadPart::Processing,
                processing.elapsed().saturating_sub(waited),
            );
            tasks.metrics.spent(ThreadPart::Committing, waited);
            let restore_wait = if tasks.updater.is_restoring() && !polled {
                RESTORE_WAIT
            } else {
                Duration::ZERO
            };
            let restoring = Instant::now();
            tasks.update_state(consumer, restore_wait).await?;
            tasks
                .metrics
                .spent(ThreadPart::Restoring, restoring.elapsed());
            let committing = Instant::now();
            if tasks.commit_due() {
                let span = tracing::debug_span!("commit", thread = tasks.index);
                tasks.start_commit(consumer).instrument(span).await?;
            } else if !polled {
                // Nothing to process: what waits for the commit in flight goes now.
                tasks.settle(consumer).await?;
            }
            let waited = tasks.commit_waits.take();
            tasks.metrics.spent(
                ThreadPart::Flushing,
                committing.elapsed().saturating_sub(waited),
            );
            tasks.metrics.spent(ThreadPart::Committing, waited);
            Ok(())
        };
        if let Err(e) = step.await {
            tasks.fail_or_recover(consumer, e).await;
            if let Some(e) = tasks.failure.take() {
                return Err(e);
            }
        }
        restoring = tasks.updater.is_restoring();
        until_commit = tasks.until_commit_due();
    }
    Ok(())
}

/// How long the restore consumer's poll waits for changelog records when nothing else
/// needs the thread.
const RESTORE_WAIT: Duration = Duration::from_millis(20);

/// The consumer's rebalance listener: moving tasks commit and close before the member
/// rejoins; lost tasks close dirty.
struct Revocations {
    manager: Arc<Mutex<TaskManager>>,
}

#[async_trait::async_trait]
impl RebalanceListener for Revocations {
    async fn on_partitions_assigned(&mut self, _: &mut Consumer, _: &[TopicPartition]) {
        // Tasks are created from the assignor's assignment, after the poll.
    }

    async fn on_partitions_revoked(
        &mut self,
        consumer: &mut Consumer,
        partitions: &[TopicPartition],
    ) {
        self.manager.lock().await.revoke(consumer, partitions).await;
    }

    async fn on_partitions_lost(&mut self, consumer: &mut Consumer, _: &[TopicPartition]) {
        self.manager.lock().await.lose_all(consumer).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_takes_its_share_of_the_caches_and_the_write_buffers() {
        let config = StreamsConfig::new("app")
            .num_stream_threads(2)
            .statestore_cache_max_bytes(10 << 20)
            .statestore_memory_max_bytes(512 << 20);
        // The caches' setting is split as they count it; the buffers' default is a quarter
        // of the budget.
        assert_eq!(thread_shares(&config), (5 << 20, 64 << 20));
        let config = config.state_checkpoint_max_bytes(32 << 20);
        assert_eq!(thread_shares(&config), (5 << 20, 16 << 20));
    }

    #[test]
    fn a_stream_threads_producer_takes_the_users_settings_over_its_own_defaults() {
        let mut config = StreamsConfig::new("app");
        config.processing_guarantee = ProcessingGuarantee::ExactlyOnceV2;
        let producer = producer_config(&config, "localhost:9092", "p1", 2).unwrap();
        assert_eq!(producer.batch_size, 256 * 1024);
        assert_eq!(producer.transactional_id.as_deref(), Some("app-p1-2"));
        assert_eq!(producer.transaction_timeout, Duration::from_secs(10));

        config
            .set("producer.transaction.timeout.ms", "30000")
            .unwrap();
        let mut config = config.producer(|p| p.batch_size(32_768));
        let producer = producer_config(&config, "localhost:9092", "p1", 2).unwrap();
        assert_eq!(producer.batch_size, 32_768);
        assert_eq!(producer.transaction_timeout, Duration::from_secs(30));

        config.processing_guarantee = ProcessingGuarantee::AtLeastOnce;
        let producer = producer_config(&config, "localhost:9092", "p1", 2).unwrap();
        assert_eq!(producer.transactional_id, None);
    }
}
