//! What a processor can do while it runs ([`ProcessorContext`]): forward records to its
//! children, schedule punctuations, use its stores through handles looked up once, and read
//! where the current record came from; and [`StoreReader`], by which a table's value getter
//! reads a store whatever the types of the processor reading.

use std::marker::PhantomData;
use std::sync::Arc;

use super::flush::{ChangeFlush, FlushForward, FlushForwarder, FlushedKeys, SessionFlush};
use super::{Data, Graph, PunctuationType, Schedule, ScheduleId, StoreInstance};
use crate::log::Timestamp;
use crate::streams::record::{Record, RecordMetadata};
use crate::streams::store::{
    Flushed, KeyValueSerdes, KeyValueStore, SessionStore, ValueAndTimestamp, WindowStore,
};
use crate::streams::StreamsError;

/// Where a store is in its task, with its serdes.
struct StoreHandle<K, V> {
    index: usize,
    serdes: KeyValueSerdes<K, V>,
}

impl<K, V> Clone for StoreHandle<K, V> {
    fn clone(&self) -> Self {
        Self {
            index: self.index,
            serdes: self.serdes.clone(),
        }
    }
}

/// A processor's handle on one of its key-value stores, looked up once (in `init`) and used
/// for each record without a search by name.
pub struct KeyValueStoreHandle<K, V>(StoreHandle<K, V>);

impl<K, V> Clone for KeyValueStoreHandle<K, V> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

/// A processor's handle on one of its window stores.
pub struct WindowStoreHandle<K, V>(StoreHandle<K, V>);

/// A processor's handle on one of its session stores.
pub struct SessionStoreHandle<K, V>(StoreHandle<K, V>);

/// What a processor can do while it runs.
pub struct ProcessorContext<'a, KOut, VOut> {
    graph: &'a mut Graph,
    node: usize,
    _out: PhantomData<fn(KOut, VOut)>,
}

impl<'a, KOut, VOut> ProcessorContext<'a, KOut, VOut> {
    #[inline]
    pub(crate) fn new(graph: &'a mut Graph, node: usize) -> Self {
        Self {
            graph,
            node,
            _out: PhantomData,
        }
    }

    /// This processor's name.
    pub fn name(&self) -> &str {
        &self.graph.nodes[self.node].name
    }

    /// The application id.
    pub fn application_id(&self) -> &str {
        &self.graph.state.application_id
    }

    /// The task, as Kafka names it (`"0_1"`: sub-topology 0, partition 1).
    pub fn task_id(&self) -> &str {
        &self.graph.state.task_id
    }

    /// The partition number of this task.
    pub fn partition(&self) -> i32 {
        self.graph.state.partition
    }

    /// Where the record being processed was read; `None` during a punctuation.
    pub fn record_metadata(&self) -> Option<&RecordMetadata> {
        self.graph.state.metadata.as_ref()
    }

    /// The timestamp of the record being processed, or of the punctuation.
    pub fn timestamp(&self) -> Timestamp {
        self.graph.state.timestamp
    }

    /// The task's stream time: the largest timestamp it has processed (-1 before any).
    pub fn stream_time(&self) -> Timestamp {
        self.graph.state.stream_time
    }

    /// The wall-clock time of the task, in milliseconds since the epoch.
    pub fn wall_clock_time(&self) -> Timestamp {
        self.graph.state.wall_clock
    }

    /// How often the task's throttled emissions may happen.
    pub(crate) fn emit_intervals(&self) -> super::EmitIntervals {
        self.graph.state.emit_intervals
    }

    /// Schedules [`Processor::punctuate`](crate::streams::processor::Processor::punctuate) every `interval_ms` of `kind`'s clock, as Kafka
    /// does. In stream time punctuations fall on multiples of the interval, the first with
    /// the first record; in wall-clock time on multiples of it from one interval after now.
    /// Missed punctuations are not made up: after a jump the next is the next multiple.
    pub fn schedule(&mut self, interval_ms: i64, kind: PunctuationType) -> ScheduleId {
        let state = &mut self.graph.state;
        let id = ScheduleId(state.next_schedule);
        state.next_schedule += 1;
        let next = match kind {
            PunctuationType::StreamTime => 0,
            PunctuationType::WallClockTime => state.wall_clock + interval_ms,
        };
        state.schedules.push(Schedule {
            id,
            node: self.node,
            interval: interval_ms.max(1),
            kind,
            next,
            cancelled: false,
        });
        id
    }

    /// Cancels a schedule.
    pub fn cancel(&mut self, schedule: ScheduleId) {
        for s in &mut self.graph.state.schedules {
            if s.id == schedule {
                s.cancelled = true;
            }
        }
    }

    fn store_handle<K: 'static, V: 'static>(
        &self,
        name: &str,
        kind: fn(&StoreInstance) -> bool,
    ) -> Result<StoreHandle<K, V>, StreamsError> {
        let unknown = || StreamsError::UnknownStore {
            processor: self.name().to_string(),
            store: name.to_string(),
        };
        let index = self.graph.store_of(self.node, name).ok_or_else(unknown)?;
        let slot = &self.graph.state.stores[index];
        if !kind(&slot.store) {
            return Err(unknown());
        }
        let serdes = slot
            .definition
            .serdes()
            .clone()
            .downcast::<KeyValueSerdes<K, V>>()
            .map_err(|_| unknown())?;
        Ok(StoreHandle {
            index,
            serdes: KeyValueSerdes::clone(&serdes),
        })
    }

    /// A handle on the key-value store `name`, which must be connected to this processor and
    /// hold keys `K` and values `V`.
    pub fn key_value_store_handle<K: 'static, V: 'static>(
        &self,
        name: &str,
    ) -> Result<KeyValueStoreHandle<K, V>, StreamsError> {
        self.store_handle(name, |s| {
            matches!(s, StoreInstance::KeyValue(_) | StoreInstance::Shared(_))
        })
        .map(KeyValueStoreHandle)
    }

    /// Has the updates of the timestamped key-value store behind `handle` forwarded from
    /// this processor when the store's record cache sends them down (at a commit, or when
    /// it evicts them), as Kafka's caching stores do: `Change`s with the stored timestamp, the
    /// old value when `old_values`. `true` when the store has a cache; the processor must not
    /// forward its updates itself then.
    pub(crate) fn forward_on_flush<K: Data, V: Data>(
        &mut self,
        handle: &KeyValueStoreHandle<K, ValueAndTimestamp<V>>,
        old_values: bool,
    ) -> bool {
        self.forward_flushes_of(&handle.0, FlushedKeys::Plain, old_values)
    }

    fn forward_flushes_of<K: Data, V: Data>(
        &mut self,
        handle: &StoreHandle<K, ValueAndTimestamp<V>>,
        keys: FlushedKeys,
        old_values: bool,
    ) -> bool {
        let forward = ChangeFlush {
            store: self.graph.state.stores[handle.index]
                .definition
                .name()
                .to_string(),
            serdes: handle.serdes.clone(),
            keys,
            old_values,
        };
        self.forward_flushes_with(handle.index, old_values, Box::new(forward))
    }

    /// Has `forward` forward, from this processor, what the cache of store `index` sends
    /// down; `false` when the store has no cache.
    fn forward_flushes_with(
        &mut self,
        index: usize,
        old_values: bool,
        forward: Box<dyn FlushForward>,
    ) -> bool {
        if !self.graph.state.stores[index]
            .store
            .forward_flushes(old_values)
        {
            return false;
        }
        self.graph.state.flush_forwarders.push(FlushForwarder {
            store: index,
            node: self.node,
            forward: Some(forward),
            buffer: Flushed::default(),
        });
        true
    }

    /// The store behind `handle`, typed.
    pub fn key_value_store<'s, K: 'static, V: 'static>(
        &'s mut self,
        handle: &'s KeyValueStoreHandle<K, V>,
    ) -> KeyValueStore<'s, K, V> {
        let state = &mut self.graph.state;
        match &mut state.stores[handle.0.index].store {
            StoreInstance::KeyValue(store) => {
                KeyValueStore::new(&mut **store, &handle.0.serdes, &mut state.scratch)
            }
            StoreInstance::Shared(store) => KeyValueStore::locked(
                store.lock().unwrap_or_else(|e| e.into_inner()),
                &handle.0.serdes,
                &mut state.scratch,
            ),
            _ => unreachable!("a key-value handle is made for a key-value store"),
        }
    }

    /// A handle on the window store `name`.
    pub fn window_store_handle<K: 'static, V: 'static>(
        &self,
        name: &str,
    ) -> Result<WindowStoreHandle<K, V>, StreamsError> {
        self.store_handle(name, |s| matches!(s, StoreInstance::Window(_)))
            .map(WindowStoreHandle)
    }

    /// As [`forward_on_flush`](Self::forward_on_flush), for a timestamped window store of
    /// windows `size_ms` long: the updates are forwarded with windowed keys.
    pub(crate) fn forward_windows_on_flush<K: Data, V: Data>(
        &mut self,
        handle: &WindowStoreHandle<K, ValueAndTimestamp<V>>,
        size_ms: i64,
        old_values: bool,
    ) -> bool {
        self.forward_flushes_of(&handle.0, FlushedKeys::Windows { size_ms }, old_values)
    }

    /// The window store behind `handle`, typed.
    pub fn window_store<'s, K: 'static, V: 'static>(
        &'s mut self,
        handle: &'s WindowStoreHandle<K, V>,
    ) -> WindowStore<'s, K, V> {
        let state = &mut self.graph.state;
        let StoreInstance::Window(store) = &mut state.stores[handle.0.index].store else {
            unreachable!("a window handle is made for a window store");
        };
        WindowStore::new(&mut **store, &handle.0.serdes, &mut state.scratch.key)
    }

    /// A handle on the session store `name`.
    pub fn session_store_handle<K: 'static, V: 'static>(
        &self,
        name: &str,
    ) -> Result<SessionStoreHandle<K, V>, StreamsError> {
        self.store_handle(name, |s| matches!(s, StoreInstance::Session(_)))
            .map(SessionStoreHandle)
    }

    /// As [`forward_on_flush`](Self::forward_on_flush), for a session store: the updates
    /// are forwarded with windowed keys, each at its session's end.
    pub(crate) fn forward_sessions_on_flush<K: Data, V: Data>(
        &mut self,
        handle: &SessionStoreHandle<K, V>,
        old_values: bool,
    ) -> bool {
        let forward = SessionFlush {
            store: self.graph.state.stores[handle.0.index]
                .definition
                .name()
                .to_string(),
            serdes: handle.0.serdes.clone(),
            old_values,
        };
        self.forward_flushes_with(handle.0.index, old_values, Box::new(forward))
    }

    /// The session store behind `handle`, typed.
    pub fn session_store<'s, K: 'static, V: 'static>(
        &'s mut self,
        handle: &'s SessionStoreHandle<K, V>,
    ) -> SessionStore<'s, K, V> {
        let state = &mut self.graph.state;
        let StoreInstance::Session(store) = &mut state.stores[handle.0.index].store else {
            unreachable!("a session handle is made for a session store");
        };
        SessionStore::new(&mut **store, &handle.0.serdes, &mut state.scratch.key)
    }

    /// Reads the stores of this processor by name, for value getters of tables.
    pub(crate) fn reader(&mut self) -> StoreReader<'_> {
        StoreReader {
            graph: self.graph,
            node: self.node,
        }
    }

    /// Counts the current record as dropped on purpose by this processor (a record later
    /// than its window's grace period); the count is in the task's dropped-records figures.
    pub fn record_dropped(&mut self) {
        let name: Arc<str> = self.graph.nodes[self.node].name.clone();
        self.graph.state.count_dropped(&name);
    }
}

impl<KOut: Data, VOut: Data> ProcessorContext<'_, KOut, VOut> {
    /// Hands `record` to every child of this processor, in the order they were added.
    #[inline]
    pub fn forward(&mut self, record: Record<KOut, VOut>) {
        self.graph.forward(self.node, record);
    }

    /// Hands `record` to the child called `child` only.
    pub fn forward_to(
        &mut self,
        child: &str,
        record: Record<KOut, VOut>,
    ) -> Result<(), StreamsError> {
        self.graph.forward_to(self.node, child, record)
    }
}

/// Reads key-value stores by name, whatever the types of the processor reading: what a
/// table's value getter uses to look a key up in the store behind the table.
pub(crate) struct StoreReader<'a> {
    graph: &'a mut Graph,
    node: usize,
}

impl StoreReader<'_> {
    /// The value of `key` in the key-value store `store` of keys `K` and values `V`.
    pub(crate) fn get<K: 'static, V: 'static>(
        &mut self,
        store: &str,
        key: &K,
    ) -> Result<Option<V>, StreamsError> {
        let unknown = || StreamsError::UnknownStore {
            processor: self.graph.nodes[self.node].name.to_string(),
            store: store.to_string(),
        };
        let connected = self.graph.store_of(self.node, store);
        let state = &mut self.graph.state;
        let (definition, shared) = match connected {
            Some(index) => {
                let slot = &mut state.stores[index];
                match &mut slot.store {
                    StoreInstance::KeyValue(inner) => {
                        let serdes = downcast::<K, V>(&slot.definition).ok_or_else(unknown)?;
                        let value = KeyValueStore::new(&mut **inner, &serdes, &mut state.scratch)
                            .get(key)?;
                        return Ok(value);
                    }
                    StoreInstance::Shared(shared) => (slot.definition.clone(), shared.clone()),
                    _ => return Err(unknown()),
                }
            }
            None => state
                .globals
                .iter()
                .find(|(d, _)| d.name() == store)
                .cloned()
                .ok_or_else(unknown)?,
        };
        let serdes = downcast::<K, V>(&definition).ok_or_else(unknown)?;
        let guard = shared.lock().unwrap_or_else(|e| e.into_inner());
        let value = KeyValueStore::locked(guard, &serdes, &mut state.scratch).get(key)?;
        Ok(value)
    }
}

fn downcast<K: 'static, V: 'static>(
    definition: &crate::streams::store::StoreBuilder,
) -> Option<Arc<KeyValueSerdes<K, V>>> {
    definition
        .serdes()
        .clone()
        .downcast::<KeyValueSerdes<K, V>>()
        .ok()
}
