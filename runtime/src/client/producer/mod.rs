//! The producer: `send` appends a record to its partition's batch and returns at once (or
//! once buffer memory is free); a sender task ships batches to partition leaders, retries
//! what failed in order, and resolves each record's [`Delivery`] with its offset.
//!
//! Idempotence is on by default: the producer gets a producer id, numbers every batch per
//! partition, keeps up to five batches in flight per partition and, after a failure, sends
//! them again in their original order, so the broker writes each exactly once and in order.
//! With a `transactional.id` the producer is transactional (see [`Producer::begin_transaction`]).

mod accumulator;
mod send_all;
mod sender;
mod transaction;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::Bytes;
use eddy_core::log::{Header, Timestamp};
use tokio::sync::{Notify, Semaphore};

use self::accumulator::{Accumulator, AppendError, OutcomeFuture};
use self::transaction::Transaction;
use super::cluster::Cluster;
use super::{ClientError, ProducerConfig};
use crate::time::Instant;

pub use self::send_all::SentAll;
pub use self::transaction::GroupMetadata;

/// A topic's name, cheap to clone: a producer sending many records to one topic clones one
/// `Topic` (a reference count) rather than a string per record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Topic(Arc<str>);

impl std::ops::Deref for Topic {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Topic {
    fn from(name: &str) -> Self {
        Self(Arc::from(name))
    }
}

impl From<String> for Topic {
    fn from(name: String) -> Self {
        Self(Arc::from(name))
    }
}

impl From<&String> for Topic {
    fn from(name: &String) -> Self {
        Self(Arc::from(name.as_str()))
    }
}

impl From<&Topic> for Topic {
    fn from(topic: &Topic) -> Self {
        topic.clone()
    }
}

impl From<Arc<str>> for Topic {
    fn from(name: Arc<str>) -> Self {
        Self(name)
    }
}

/// A record to send.
#[derive(Debug, Clone)]
pub struct ProducerRecord {
    /// The topic.
    pub topic: Topic,
    /// The partition; `None` lets the partitioner choose (murmur2 of the key as the Java
    /// client does, or the sticky partitioner for records without a key).
    pub partition: Option<i32>,
    /// The key.
    pub key: Option<Bytes>,
    /// The value; `None` is a tombstone.
    pub value: Option<Bytes>,
    /// Headers, in order.
    pub headers: Vec<Header>,
    /// The timestamp; `None` takes the time of `send`.
    pub timestamp: Option<Timestamp>,
}

impl ProducerRecord {
    /// A record for `topic` with this value and no key.
    pub fn new(topic: impl Into<Topic>, value: impl Into<Bytes>) -> Self {
        Self {
            topic: topic.into(),
            partition: None,
            key: None,
            value: Some(value.into()),
            headers: Vec::new(),
            timestamp: None,
        }
    }

    /// A tombstone for `key` in `topic`: deletes the key from a compacted topic.
    pub fn tombstone(topic: impl Into<Topic>, key: impl Into<Bytes>) -> Self {
        Self {
            value: None,
            ..Self::new(topic, Bytes::new()).key(key)
        }
    }

    /// Sets the key.
    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the partition.
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Adds a header.
    pub fn header(mut self, key: impl Into<String>, value: impl Into<Bytes>) -> Self {
        self.headers.push(Header::new(key, value));
        self
    }

    /// Sets the timestamp (ms since the epoch).
    pub fn timestamp(mut self, timestamp: Timestamp) -> Self {
        self.timestamp = Some(timestamp);
        self
    }

    fn size(&self) -> usize {
        self.parts().size()
    }
}

/// A record's parts as a batch reads them, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct RecordParts<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The partition; `None` lets the partitioner choose.
    pub partition: Option<i32>,
    /// The key.
    pub key: Option<&'a [u8]>,
    /// The value; `None` is a tombstone.
    pub value: Option<&'a [u8]>,
    /// Headers, in order.
    pub headers: &'a [Header],
    /// The timestamp; `None` takes the time of sending.
    pub timestamp: Option<Timestamp>,
}

impl RecordParts<'_> {
    /// Roughly what the record takes of `buffer.memory` and of a request.
    pub(crate) fn size(&self) -> usize {
        const RECORD_OVERHEAD: usize = 24;
        RECORD_OVERHEAD
            + self.key.map_or(0, <[u8]>::len)
            + self.value.map_or(0, <[u8]>::len)
            + self
                .headers
                .iter()
                .map(|h| h.key.len() + h.value.as_ref().map_or(0, Bytes::len) + 4)
                .sum::<usize>()
    }
}

/// A record [`Producer::send_all`] can send: a [`ProducerRecord`], or a view of a record in
/// a buffer the caller keeps (a stream task's output), which costs no copy or reference
/// count of its own: its bytes are copied once, into the batch.
pub trait Outgoing {
    /// The record's parts.
    fn parts(&self) -> RecordParts<'_>;
}

impl Outgoing for ProducerRecord {
    fn parts(&self) -> RecordParts<'_> {
        RecordParts {
            topic: &self.topic,
            partition: self.partition,
            key: self.key.as_deref(),
            value: self.value.as_deref(),
            headers: &self.headers,
            timestamp: self.timestamp,
        }
    }
}

/// Where a record was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMetadata {
    /// The partition.
    pub partition: i32,
    /// The record's offset; -1 with `acks=0`, which learns no offset.
    pub offset: i64,
}

/// The future of a sent record's [`RecordMetadata`]: it resolves once the broker has
/// acknowledged the record's batch, or the batch failed for good. The record is sent whether
/// or not its delivery is awaited.
pub struct Delivery {
    partition: i32,
    index: i32,
    outcome: OutcomeFuture,
}

impl Future for Delivery {
    type Output = Result<RecordMetadata, ClientError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (partition, index) = (self.partition, self.index);
        Pin::new(&mut self.outcome).poll(cx).map(|outcome| {
            match outcome.unwrap_or(Err(ClientError::Closed)) {
                Ok(base) => Ok(RecordMetadata {
                    partition,
                    offset: if base < 0 {
                        -1
                    } else {
                        base + i64::from(index)
                    },
                }),
                Err(e) => Err(e),
            }
        })
    }
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("partition", &self.partition)
            .field("index", &self.index)
            .finish()
    }
}

/// The producer's id and epoch (-1, -1 until it has one, and for a producer without
/// idempotence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProducerId {
    pub(crate) id: i64,
    pub(crate) epoch: i16,
}

impl ProducerId {
    const NONE: Self = Self { id: -1, epoch: -1 };
}

/// What the producer's handles and its sender task share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) config: ProducerConfig,
    pub(crate) accumulator: Mutex<Accumulator>,
    /// `buffer.memory`, in bytes.
    pub(crate) memory: Semaphore,
    /// Wakes the sender: a batch is ready, a flush began, the producer is closing.
    pub(crate) wake: Notify,
    /// Wakes flushes: a batch was answered.
    pub(crate) answered: Notify,
    pub(crate) producer_id: Mutex<ProducerId>,
    /// A sequence gap cannot heal: an idempotent producer must get a new producer id, a
    /// transactional one sends nothing until its transaction is aborted and its epoch bumped.
    pub(crate) reset_producer_id: AtomicBool,
    pub(crate) transaction: Option<Mutex<Transaction>>,
    pub(crate) closing: AtomicBool,
    /// Set once the sender task has stopped.
    pub(crate) stopped: Notify,
    pub(crate) sender_done: AtomicBool,
}

impl Shared {
    pub(crate) fn accumulator(&self) -> MutexGuard<'_, Accumulator> {
        self.accumulator.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn producer_id(&self) -> ProducerId {
        *self.producer_id.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn set_producer_id(&self, id: ProducerId) {
        *self.producer_id.lock().unwrap_or_else(|p| p.into_inner()) = id;
    }

    pub(crate) fn transaction(&self) -> Option<MutexGuard<'_, Transaction>> {
        self.transaction
            .as_ref()
            .map(|t| t.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Stops the sender once the last handle is gone, after it has sent what it holds.
#[derive(Debug)]
struct Handle(Arc<Shared>);

impl Drop for Handle {
    fn drop(&mut self) {
        self.0.closing.store(true, Ordering::Release);
        self.0.wake.notify_one();
    }
}

/// An asynchronous Kafka producer. Cloning is cheap; clones share batches and connections.
#[derive(Debug, Clone)]
pub struct Producer {
    handle: Arc<Handle>,
}

impl Producer {
    /// A producer with these settings. Connections open on first use.
    pub fn new(config: ProducerConfig) -> Result<Self, ClientError> {
        config.validate()?;
        let cluster = Cluster::new(config.client.clone())?;
        let transaction = config
            .transactional_id
            .as_ref()
            .map(|id| Mutex::new(Transaction::new(id)));
        let shared = Arc::new(Shared {
            cluster,
            accumulator: Mutex::new(Accumulator::new(
                config.compression,
                config.batch_size,
                config.transactional_id.is_some(),
            )),
            memory: Semaphore::new(config.buffer_memory),
            wake: Notify::new(),
            answered: Notify::new(),
            producer_id: Mutex::new(ProducerId::NONE),
            reset_producer_id: AtomicBool::new(false),
            transaction,
            closing: AtomicBool::new(false),
            stopped: Notify::new(),
            sender_done: AtomicBool::new(false),
            config,
        });
        tokio::spawn(sender::run(Arc::clone(&shared)));
        Ok(Self {
            handle: Arc::new(Handle(shared)),
        })
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.handle.0
    }

    /// Appends `record` to its partition's batch and returns the future of its delivery.
    /// Returns once the record is in a batch: at once, unless `buffer.memory` is used up or
    /// the topic's metadata is not known yet; then it waits up to `max.block.ms`.
    ///
    /// Records sent one after another to one partition are written in that order.
    pub async fn send(&self, record: ProducerRecord) -> Result<Delivery, ClientError> {
        let shared = self.shared();
        if shared.closing.load(Ordering::Acquire) {
            return Err(ClientError::Closed);
        }
        if let Some(txn) = shared.transaction() {
            txn.check_can_send()?;
        }
        let size = record.size();
        if size > shared.config.max_request_size {
            return Err(ClientError::RecordTooLarge {
                size,
                max: shared.config.max_request_size,
            });
        }
        let deadline = Instant::now() + shared.config.max_block;
        let permits = match shared.memory.try_acquire_many(size as u32) {
            Ok(permits) => permits,
            Err(_) => tokio::time::timeout_at(deadline, shared.memory.acquire_many(size as u32))
                .await
                .map_err(|_| ClientError::TimedOut("waiting for buffer memory".into()))?
                .map_err(|_| ClientError::Closed)?,
        };
        let timestamp = record.timestamp.unwrap_or_else(crate::time::now_ms);
        // One lock for a topic the producer knows; the first record of a topic waits for
        // its metadata outside the lock.
        let parts = record.parts();
        let always = |_, _| true;
        let first = shared.accumulator().append(&parts, timestamp, size, always);
        let appended = match first {
            Err(AppendError::UnknownTopic) => {
                self.learn_topic(&record.topic, deadline).await?;
                shared.accumulator().append(&parts, timestamp, size, always)
            }
            other => other,
        }
        .map_err(|e| match e {
            AppendError::UnknownTopic => {
                ClientError::State(format!("topic {} has no metadata", record.topic))
            }
            AppendError::Refused(e) => e,
        })?;
        // The batch gives the memory back when it is answered.
        permits.forget();
        if appended.wake_sender {
            shared.wake.notify_one();
        }
        let outcome = appended
            .outcome
            .ok_or_else(|| ClientError::State("a batch's future was not handed out".into()))?;
        Ok(Delivery {
            partition: appended.partition,
            index: appended.index,
            outcome,
        })
    }

    /// Waits for `topic`'s metadata (until `deadline`) and tells the accumulator its
    /// partitions.
    async fn learn_topic(&self, topic: &Topic, deadline: Instant) -> Result<(), ClientError> {
        let shared = self.shared();
        let metadata = shared.cluster.wait_for_topic(topic, deadline).await?;
        let seed = std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), topic);
        shared
            .accumulator()
            .add_topic(topic, metadata.leaders.len() as i32, seed);
        Ok(())
    }

    /// Sends every batch now, without waiting for `linger.ms`, and waits until every record
    /// sent before the call has been acknowledged or has failed.
    pub async fn flush(&self) -> Result<(), ClientError> {
        let shared = self.shared();
        let mark = {
            let mut accumulator = shared.accumulator();
            accumulator.flushing += 1;
            accumulator.flush_mark()
        };
        shared.wake.notify_one();
        let result = loop {
            let answered = shared.answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            let done = shared
                .accumulator()
                .incomplete
                .first()
                .is_none_or(|&id| id >= mark);
            if done {
                break Ok(());
            }
            if shared.sender_done.load(Ordering::Acquire) {
                break Err(ClientError::Closed);
            }
            answered.await;
        };
        shared.accumulator().flushing -= 1;
        result
    }

    /// Flushes, then stops the sender. Other clones of this producer can send no more.
    pub async fn close(&self) -> Result<(), ClientError> {
        let flushed = self.flush().await;
        let shared = self.shared();
        shared.closing.store(true, Ordering::Release);
        shared.wake.notify_one();
        while !shared.sender_done.load(Ordering::Acquire) {
            let stopped = shared.stopped.notified();
            tokio::pin!(stopped);
            stopped.as_mut().enable();
            if shared.sender_done.load(Ordering::Acquire) {
                break;
            }
            stopped.await;
        }
        flushed
    }

    /// The number of partitions of `topic`, from the producer's metadata.
    pub async fn partition_count(&self, topic: &str) -> Result<i32, ClientError> {
        let shared = self.shared();
        let deadline = Instant::now() + shared.config.max_block;
        Ok(shared
            .cluster
            .wait_for_topic(topic, deadline)
            .await?
            .leaders
            .len() as i32)
    }
}
