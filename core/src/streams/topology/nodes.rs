//! The three kinds of node a task runs: sources (bytes from a topic become typed records,
//! with the event time a [`TimestampExtractor`] gives), processors (a [`Processor`] behind
//! the erased [`Node`] interface) and sinks (typed records become bytes for a topic).

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::log::Timestamp;
use crate::serde::{deserialize_nullable, serialize_nullable, Serde};
use crate::streams::graph::{Graph, Node, PartitionCounts};
use crate::streams::processor::{Data, Processor, ProcessorContext, Punctuation};
use crate::streams::record::Record;
use crate::streams::StreamsError;

/// Takes a node's input of type `T` out of `input`. The topology checks types when it is
/// built, so another type is never expected; it is an error all the same (see
/// [`wrong_type`]), not a panic.
#[inline(always)]
fn take_input<T: 'static>(input: &mut dyn Any) -> Option<T> {
    input.downcast_mut::<Option<T>>().and_then(Option::take)
}

/// The error of a node handed a record of another type than its input's.
#[cold]
fn wrong_type(graph: &Graph, me: usize) -> StreamsError {
    StreamsError::processor(
        graph.nodes[me].name.to_string(),
        "received a record of another type",
    )
}

/// A [`Processor`] as a node.
pub(crate) struct ProcessorNode<P, KIn, VIn, KOut, VOut> {
    processor: P,
    _types: PhantomData<fn(KIn, VIn, KOut, VOut)>,
}

impl<P, KIn, VIn, KOut, VOut> ProcessorNode<P, KIn, VIn, KOut, VOut> {
    pub(crate) fn new(processor: P) -> Self {
        Self {
            processor,
            _types: PhantomData,
        }
    }
}

impl<P, KIn, VIn, KOut, VOut> Node for ProcessorNode<P, KIn, VIn, KOut, VOut>
where
    P: Processor<KIn, VIn, KOut, VOut>,
    KIn: 'static,
    VIn: 'static,
    KOut: 'static,
    VOut: 'static,
{
    fn init(&mut self, graph: &mut Graph, me: usize) -> Result<(), StreamsError> {
        self.processor.init(&mut ProcessorContext::new(graph, me))
    }

    fn process(
        &mut self,
        input: &mut dyn Any,
        graph: &mut Graph,
        me: usize,
    ) -> Result<(), StreamsError> {
        let Some(record) = take_input::<Record<KIn, VIn>>(input) else {
            return Err(wrong_type(graph, me));
        };
        self.processor
            .process(record, &mut ProcessorContext::new(graph, me))
    }

    fn punctuate(
        &mut self,
        punctuation: Punctuation,
        graph: &mut Graph,
        me: usize,
    ) -> Result<(), StreamsError> {
        self.processor
            .punctuate(punctuation, &mut ProcessorContext::new(graph, me))
    }

    fn close(&mut self, graph: &mut Graph, me: usize) -> Result<(), StreamsError> {
        self.processor.close(&mut ProcessorContext::new(graph, me))
    }
}

/// Reads records of a topic with the source's serdes.
pub(crate) struct SourceNode<K, V> {
    pub(crate) keys: Arc<dyn Serde<Value = K>>,
    pub(crate) values: Arc<dyn Serde<Value = V>>,
}

impl<K: Data, V: Data> Node for SourceNode<K, V> {
    fn process(
        &mut self,
        input: &mut dyn Any,
        graph: &mut Graph,
        me: usize,
    ) -> Result<(), StreamsError> {
        // The raw record is read in place: only its parts move.
        let Some(raw) = input.downcast_mut::<crate::log::Record>() else {
            return Err(wrong_type(graph, me));
        };
        // The topic only names the source in errors: borrowed, not cloned per record.
        let topic = graph.state.metadata.as_ref().map_or("", |m| &*m.topic);
        let key = deserialize_nullable(&*self.keys, topic, raw.key.as_deref())?;
        let value = deserialize_nullable(&*self.values, topic, raw.value.as_deref())?;
        let record = Record {
            key,
            value,
            timestamp: graph.state.timestamp,
            headers: std::mem::take(&mut raw.headers),
        };
        graph.forward(me, record);
        Ok(())
    }
}

/// Chooses a record's partition: `(topic, key, value, partitions)` to a partition, or `None`
/// for the default (murmur2 of the serialized key, as Kafka's producer).
pub type StreamPartitioner<K, V> = Arc<dyn Fn(&str, &K, &V, i32) -> Option<i32> + Send + Sync>;

/// Chooses a record's topic.
pub type TopicNameExtractor<K, V> = Arc<dyn Fn(&K, &V, Timestamp) -> String + Send + Sync>;

/// Where a sink writes.
pub(crate) enum SinkTopic<K, V> {
    /// Always this topic (full name).
    Fixed(Arc<str>),
    /// A topic chosen per record.
    Chosen(TopicNameExtractor<K, V>),
}

impl<K, V> Clone for SinkTopic<K, V> {
    fn clone(&self) -> Self {
        match self {
            Self::Fixed(t) => Self::Fixed(t.clone()),
            Self::Chosen(f) => Self::Chosen(f.clone()),
        }
    }
}

/// Writes records to a topic with the sink's serdes.
pub(crate) struct SinkNode<K, V> {
    pub(crate) topic: SinkTopic<K, V>,
    pub(crate) keys: Arc<dyn Serde<Value = K>>,
    pub(crate) values: Arc<dyn Serde<Value = V>>,
    pub(crate) partitioner: Option<StreamPartitioner<K, V>>,
    pub(crate) partitions: Option<PartitionCounts>,
    /// The fixed topic's index in the task's output, once known (the output keeps its table
    /// of topics for the task's life).
    pub(crate) topic_index: Option<u32>,
}

impl<K: Data, V: Data> Node for SinkNode<K, V> {
    fn process(
        &mut self,
        input: &mut dyn Any,
        graph: &mut Graph,
        me: usize,
    ) -> Result<(), StreamsError> {
        let Some(record) = take_input::<Record<K, V>>(input) else {
            return Err(wrong_type(graph, me));
        };
        let chosen;
        let topic: &Arc<str> = match &self.topic {
            SinkTopic::Fixed(t) => t,
            SinkTopic::Chosen(choose) => {
                chosen = Arc::from(choose(&record.key, &record.value, record.timestamp));
                &chosen
            }
        };
        let partition = match (&self.partitioner, &self.partitions) {
            (Some(choose), Some(counts)) => {
                counts(topic).and_then(|n| choose(topic, &record.key, &record.value, n))
            }
            _ => None,
        };
        let output = &mut graph.state.output;
        let topic_index = match (&self.topic, self.topic_index) {
            (SinkTopic::Fixed(_), Some(i)) => i,
            (SinkTopic::Fixed(_), None) => {
                let i = output.topic_index(topic);
                self.topic_index = Some(i);
                i
            }
            (SinkTopic::Chosen(_), _) => output.topic_index(topic),
        };
        let data = output.data();
        let start = data.len();
        let key = write(&*self.keys, topic, &record.key, data);
        let value =
            key.and_then(|key| Ok((key, write(&*self.values, topic, &record.value, data)?)));
        match value {
            Ok((key, value)) => {
                output.push(
                    topic_index,
                    partition,
                    key,
                    value,
                    record.timestamp,
                    record.headers,
                );
            }
            Err(e) => {
                // Nothing of a record that failed to serialize stays in the buffer.
                output.data().truncate(start);
                return Err(e.into());
            }
        }
        Ok(())
    }
}

/// Appends a key or value to the output buffer: its range, or `None` for a null.
fn write<T: 'static>(
    serde: &dyn Serde<Value = T>,
    topic: &str,
    value: &T,
    data: &mut Vec<u8>,
) -> Result<Option<(u32, u32)>, crate::serde::SerdeError> {
    let start = data.len();
    if !serialize_nullable(serde, topic, value, data)? {
        return Ok(None);
    }
    let too_large =
        || crate::serde::SerdeError::new(serde.name(), topic, "output larger than 4 GiB");
    let from = u32::try_from(start).map_err(|_| too_large())?;
    let len = u32::try_from(data.len() - start).map_err(|_| too_large())?;
    Ok(Some((from, len)))
}

/// Gives a record its event time (Kafka's `TimestampExtractor`). The default takes the
/// record's own timestamp.
pub trait TimestampExtractor: Send + Sync {
    /// The event time of `record`; `partition_time` is the largest timestamp seen so far on
    /// its partition (-1 before the first). A negative result fails the task, as Kafka's
    /// default `FailOnInvalidTimestamp` does.
    fn extract(&self, record: &crate::log::Record, partition_time: Timestamp) -> Timestamp;
}

impl<F> TimestampExtractor for F
where
    F: Fn(&crate::log::Record, Timestamp) -> Timestamp + Send + Sync,
{
    fn extract(&self, record: &crate::log::Record, partition_time: Timestamp) -> Timestamp {
        self(record, partition_time)
    }
}
