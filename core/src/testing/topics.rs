//! The test's ends of the driver's topics: [`TestInputTopic`] serializes and pipes records in,
//! [`TestOutputTopic`] reads and deserializes what the topology wrote, and
//! [`TestKeyValueStore`] reads a store across the tasks that share it.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::log::{Header, Record, Timestamp};
use crate::serde::{deserialize_nullable, serialize_nullable, Serde};
use crate::streams::internals::StoreInstance;
use crate::streams::store::StoreDecoder;
use crate::streams::StreamsError;

use super::driver::DriverState;

/// A record as a test writes or reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct TestRecord<K, V> {
    /// The key.
    pub key: K,
    /// The value.
    pub value: V,
    /// The timestamp.
    pub timestamp: Timestamp,
    /// The headers.
    pub headers: Vec<Header>,
    /// The partition it was written to (when read).
    pub partition: i32,
}

impl<K, V> TestRecord<K, V> {
    /// A record without headers.
    pub fn new(key: K, value: V, timestamp: Timestamp) -> Self {
        Self {
            key,
            value,
            timestamp,
            headers: Vec::new(),
            partition: 0,
        }
    }

    /// The same record with these headers.
    pub fn with_headers(mut self, headers: Vec<Header>) -> Self {
        self.headers = headers;
        self
    }
}

/// Pipes records into a topic of the driver.
pub struct TestInputTopic<K, V> {
    state: Rc<RefCell<DriverState>>,
    topic: String,
    keys: Arc<dyn Serde<Value = K>>,
    values: Arc<dyn Serde<Value = V>>,
    next_timestamp: RefCell<Timestamp>,
    advance: i64,
}

impl<K: 'static, V: 'static> TestInputTopic<K, V> {
    pub(crate) fn new(
        state: Rc<RefCell<DriverState>>,
        topic: &str,
        keys: Arc<dyn Serde<Value = K>>,
        values: Arc<dyn Serde<Value = V>>,
    ) -> Self {
        Self {
            state,
            topic: topic.to_string(),
            keys,
            values,
            next_timestamp: RefCell::new(0),
            advance: 0,
        }
    }

    /// The same topic, its records stamped from `start` and each `advance` ms after the
    /// previous one when no timestamp is given.
    pub fn with_start_time(self, start: Timestamp, advance: i64) -> Self {
        *self.next_timestamp.borrow_mut() = start;
        Self { advance, ..self }
    }

    /// Pipes a record stamped with the topic's clock, and processes it.
    pub fn pipe_input(&self, key: K, value: V) -> Result<(), StreamsError> {
        let timestamp = {
            let mut next = self.next_timestamp.borrow_mut();
            let ts = *next;
            *next += self.advance;
            ts
        };
        self.pipe_record(TestRecord::new(key, value, timestamp))
    }

    /// Pipes a record with this timestamp, and processes it.
    pub fn pipe_input_at(
        &self,
        key: K,
        value: V,
        timestamp: Timestamp,
    ) -> Result<(), StreamsError> {
        self.pipe_record(TestRecord::new(key, value, timestamp))
    }

    /// Pipes a record (key, value, timestamp and headers), and processes it with everything it
    /// causes downstream.
    pub fn pipe_record(&self, record: TestRecord<K, V>) -> Result<(), StreamsError> {
        let mut key = Vec::new();
        let has_key = serialize_nullable(&*self.keys, &self.topic, &record.key, &mut key)?;
        let mut value = Vec::new();
        let has_value = serialize_nullable(&*self.values, &self.topic, &record.value, &mut value)?;
        let mut state = self.state.borrow_mut();
        state.write(
            &self.topic,
            None,
            Record {
                key: has_key.then(|| key.into()),
                value: has_value.then(|| value.into()),
                headers: record.headers,
                timestamp: record.timestamp,
            },
        )?;
        state.run()
    }

    /// Pipes each pair in turn, stamped with the topic's clock.
    pub fn pipe_key_value_list(
        &self,
        records: impl IntoIterator<Item = (K, V)>,
    ) -> Result<(), StreamsError> {
        for (k, v) in records {
            self.pipe_input(k, v)?;
        }
        Ok(())
    }
}

/// Reads what the topology wrote to a topic, in the order it was written.
pub struct TestOutputTopic<K, V> {
    state: Rc<RefCell<DriverState>>,
    topic: String,
    keys: Arc<dyn Serde<Value = K>>,
    values: Arc<dyn Serde<Value = V>>,
    position: RefCell<usize>,
}

impl<K: 'static, V: 'static> TestOutputTopic<K, V> {
    pub(crate) fn new(
        state: Rc<RefCell<DriverState>>,
        topic: &str,
        keys: Arc<dyn Serde<Value = K>>,
        values: Arc<dyn Serde<Value = V>>,
    ) -> Self {
        Self {
            state,
            topic: topic.to_string(),
            keys,
            values,
            position: RefCell::new(0),
        }
    }

    /// The next record not read yet.
    ///
    /// # Panics
    ///
    /// When the record does not deserialize with the topic's serdes: a test's output serdes
    /// disagree with the topology's, which is a failed test.
    pub fn read_record(&self) -> Option<TestRecord<K, V>> {
        let state = self.state.borrow();
        let topic = state.topics.get(&self.topic)?;
        let mut position = self.position.borrow_mut();
        let &(partition, offset) = topic.written.get(*position)?;
        *position += 1;
        let record = &topic.partitions[partition][offset];
        let key = deserialize_nullable(&*self.keys, &self.topic, record.key.as_deref())
            .unwrap_or_else(|e| panic!("a key written to {} does not read back: {e}", self.topic));
        let value = deserialize_nullable(&*self.values, &self.topic, record.value.as_deref())
            .unwrap_or_else(|e| {
                panic!("a value written to {} does not read back: {e}", self.topic)
            });
        Some(TestRecord {
            key,
            value,
            timestamp: record.timestamp,
            headers: record.headers.clone(),
            partition: partition as i32,
        })
    }

    /// The next value.
    pub fn read_value(&self) -> Option<V> {
        self.read_record().map(|r| r.value)
    }

    /// The next key and value.
    pub fn read_key_value(&self) -> Option<(K, V)> {
        self.read_record().map(|r| (r.key, r.value))
    }

    /// Every record not read yet.
    pub fn read_records_to_list(&self) -> Vec<TestRecord<K, V>> {
        std::iter::from_fn(|| self.read_record()).collect()
    }

    /// Every key and value not read yet.
    pub fn read_key_values_to_list(&self) -> Vec<(K, V)> {
        std::iter::from_fn(|| self.read_key_value()).collect()
    }

    /// Every value not read yet.
    pub fn read_values_to_list(&self) -> Vec<V> {
        std::iter::from_fn(|| self.read_value()).collect()
    }

    /// The number of records not read yet.
    pub fn queue_size(&self) -> usize {
        let state = self.state.borrow();
        let written = state.topics.get(&self.topic).map_or(0, |t| t.written.len());
        written - *self.position.borrow()
    }

    /// Whether every record has been read.
    pub fn is_empty(&self) -> bool {
        self.queue_size() == 0
    }
}

/// A key-value store of the topology, read across the tasks (partitions) that hold its parts.
pub struct TestKeyValueStore<K, V> {
    state: Rc<RefCell<DriverState>>,
    name: String,
    _types: std::marker::PhantomData<fn() -> (K, V)>,
}

impl<K: 'static, V: 'static> TestKeyValueStore<K, V> {
    pub(crate) fn new(state: Rc<RefCell<DriverState>>, name: &str) -> Self {
        Self {
            state,
            name: name.to_string(),
            _types: std::marker::PhantomData,
        }
    }

    /// Every entry, by task then in key order; `None` when the topology has no such store of
    /// these types.
    pub fn all(&self) -> Option<Vec<(K, V)>> {
        let mut state = self.state.borrow_mut();
        let mut out = Vec::new();
        let mut found = false;
        for task in state.tasks.values_mut() {
            let (definition, entries) = match task.store(&self.name) {
                Some((definition, StoreInstance::KeyValue(store))) => (definition, store.all()),
                Some((definition, StoreInstance::Shared(store))) => {
                    let entries = store.lock().unwrap_or_else(|e| e.into_inner()).all();
                    (definition, entries)
                }
                _ => continue,
            };
            found = true;
            let reader = StoreDecoder::<K, V>::new(definition)?;
            for (k, v) in entries {
                out.push((reader.key(&k).ok()?, reader.value(&v).ok()?));
            }
        }
        found.then_some(out)
    }

    /// The value of `key`, whichever partition holds it.
    pub fn get(&self, key: &K) -> Option<V>
    where
        K: PartialEq,
    {
        self.all()?
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
}
