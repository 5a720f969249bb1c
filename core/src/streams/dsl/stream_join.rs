//! Stream-stream joins (`join`, `left_join`, `outer_join` with [`JoinWindows`]), with Kafka
//! Streams' nodes and semantics: each side's records wait in a window store; a record joins
//! the other side's records whose timestamps are within the window (both bounds included) and
//! the result carries the later timestamp. A left or outer join holds a record that found no
//! partner in a shared store and emits it with no partner only once its window has closed
//! (Kafka 3.1+), throttled like Kafka to once per second of wall-clock time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::BufMut;

use super::kstream::KStream;
use super::nulls::Nulls;
use super::options::SerdeOf;
use crate::log::Timestamp;
use crate::serde::{Serde, SerdeError};
use crate::streams::processor::{
    Data, KeyValueStoreHandle, Processor, ProcessorContext, WindowStoreHandle,
};
use crate::streams::record::Record;
use crate::streams::store::{StoreBuilder, StoreKind};
use crate::streams::windows::JoinWindows;
use crate::streams::{StreamsError, TopologyError};

/// How the two sides of a stream-stream join are stored: their serdes and names (Kafka's
/// `StreamJoined`).
pub struct StreamJoined<K, V1, V2> {
    pub(crate) keys: Option<SerdeOf<K>>,
    pub(crate) values: Option<SerdeOf<V1>>,
    pub(crate) other_values: Option<SerdeOf<V2>>,
    pub(crate) name: Option<String>,
    pub(crate) store_name: Option<String>,
    pub(crate) logging: bool,
}

impl<K, V1, V2> Default for StreamJoined<K, V1, V2> {
    fn default() -> Self {
        Self {
            keys: None,
            values: None,
            other_values: None,
            name: None,
            store_name: None,
            logging: true,
        }
    }
}

impl<K: 'static, V1: 'static, V2: 'static> StreamJoined<K, V1, V2> {
    /// Stores the sides with these serdes.
    pub fn with(
        keys: impl Serde<Value = K>,
        values: impl Serde<Value = V1>,
        other_values: impl Serde<Value = V2>,
    ) -> Self {
        Self {
            keys: Some(Arc::new(keys)),
            values: Some(Arc::new(values)),
            other_values: Some(Arc::new(other_values)),
            ..Self::default()
        }
    }

    /// Names the join's nodes (`<name>-this-windowed`, `<name>-this-join`, …).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Names the join's stores (`<name>-this-join-store`, …).
    pub fn with_store_name(mut self, name: impl Into<String>) -> Self {
        self.store_name = Some(name.into());
        self
    }

    /// Keeps the join's stores without changelog topics.
    pub fn with_logging_disabled(mut self) -> Self {
        self.logging = false;
        self
    }
}

/// A join's value function over the left and right values, either of which a left or outer
/// join may lack; `None` where the kind of join gives no result for the pair.
pub(crate) type Joiner<V1, V2, R> =
    Arc<dyn Fn(Option<&V1>, Option<&V2>) -> Option<R> + Send + Sync>;

/// One side's value with the other's: `None` where the join gives no result.
type Pair<VThis, VOther, R> = Arc<dyn Fn(&VThis, &VOther) -> Option<R> + Send + Sync>;

/// The shared store of records waiting for a partner.
type SharedHandle<K, V1, V2> = KeyValueStoreHandle<OuterKey<K>, Vec<LeftOrRight<V1, V2>>>;

/// Which side a join processor runs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Left,
    Right,
}

/// A value in a left or outer join's shared store: which side it came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LeftOrRight<V1, V2> {
    Left(V1),
    Right(V2),
}

/// Kafka's `LeftOrRightValueSerde` (a byte, 1 for left, then the value), for a list of them.
struct LeftOrRightListSerde<V1, V2> {
    left: SerdeOf<V1>,
    right: SerdeOf<V2>,
}

impl<V1: 'static, V2: 'static> Serde for LeftOrRightListSerde<V1, V2> {
    type Value = Vec<LeftOrRight<V1, V2>>;

    fn name(&self) -> &'static str {
        "left-or-right"
    }

    fn serialize_into(
        &self,
        topic: &str,
        values: &Self::Value,
        out: &mut Vec<u8>,
    ) -> Result<(), SerdeError> {
        for v in values {
            let mut one = Vec::new();
            match v {
                LeftOrRight::Left(l) => {
                    one.push(1);
                    self.left.serialize_into(topic, l, &mut one)?;
                }
                LeftOrRight::Right(r) => {
                    one.push(0);
                    self.right.serialize_into(topic, r, &mut one)?;
                }
            }
            out.put_u32(
                u32::try_from(one.len())
                    .map_err(|_| SerdeError::new(self.name(), topic, "value too large"))?,
            );
            out.extend_from_slice(&one);
        }
        Ok(())
    }

    fn deserialize(&self, topic: &str, mut bytes: &[u8]) -> Result<Self::Value, SerdeError> {
        let bad = |why: &str| SerdeError::new("left-or-right", topic, why);
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let Some((len, rest)) = bytes.split_first_chunk::<4>() else {
                return Err(bad("truncated length"));
            };
            let len = u32::from_be_bytes(*len) as usize;
            if rest.len() < len || len == 0 {
                return Err(bad("truncated value"));
            }
            let (one, rest) = rest.split_at(len);
            out.push(match one[0] {
                1 => LeftOrRight::Left(self.left.deserialize(topic, &one[1..])?),
                _ => LeftOrRight::Right(self.right.deserialize(topic, &one[1..])?),
            });
            bytes = rest;
        }
        Ok(out)
    }
}

/// Kafka's `TimestampedKeyAndJoinSide` layout: timestamp (8 bytes BE), 1 for left or 0 for
/// right, then the key: the shared store iterates by time, right before left, then key.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OuterKey<K> {
    timestamp: Timestamp,
    left: bool,
    key: K,
}

struct OuterKeySerde<K>(SerdeOf<K>);

impl<K: 'static> Serde for OuterKeySerde<K> {
    type Value = OuterKey<K>;

    fn name(&self) -> &'static str {
        "timestamped-key-and-join-side"
    }

    fn serialize_into(
        &self,
        topic: &str,
        value: &OuterKey<K>,
        out: &mut Vec<u8>,
    ) -> Result<(), SerdeError> {
        out.put_i64(value.timestamp);
        out.push(u8::from(value.left));
        self.0.serialize_into(topic, &value.key, out)
    }

    fn deserialize(&self, topic: &str, bytes: &[u8]) -> Result<OuterKey<K>, SerdeError> {
        if bytes.len() < 9 {
            return Err(SerdeError::new(self.name(), topic, "shorter than 9 bytes"));
        }
        Ok(OuterKey {
            timestamp: i64::from_be_bytes(bytes[..8].try_into().expect("8 bytes")),
            left: bytes[8] == 1,
            key: self.0.deserialize(topic, &bytes[9..])?,
        })
    }
}

/// The time both join processors of a task share (Kafka's `TimeTracker`).
#[derive(Debug, Clone, Copy)]
struct TimeTracker {
    stream_time: Timestamp,
    min_time: Timestamp,
    next_time_to_emit: Timestamp,
}

impl Default for TimeTracker {
    fn default() -> Self {
        Self {
            stream_time: -1,
            min_time: i64::MAX,
            next_time_to_emit: 0,
        }
    }
}

/// The trackers of every task, shared by a join's two processors.
type Trackers = Arc<Mutex<HashMap<String, TimeTracker>>>;

/// Puts each record in its side's window store, after handing it to the join processor; a
/// record with a null key joins nothing and is not stored.
struct JoinWindowProcessor<K, V> {
    store: String,
    null_keys: Nulls<K>,
    seq: u32,
    handle: Option<WindowStoreHandle<K, V>>,
}

impl<K: Data, V: Data> Processor<K, V, K, V> for JoinWindowProcessor<K, V> {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, V>) -> Result<(), StreamsError> {
        self.handle = Some(ctx.window_store_handle(&self.store)?);
        Ok(())
    }

    fn process(
        &mut self,
        r: Record<K, V>,
        ctx: &mut ProcessorContext<'_, K, V>,
    ) -> Result<(), StreamsError> {
        let Some(handle) = &self.handle else {
            return Ok(());
        };
        if self.null_keys.is_null(&r.key) {
            ctx.forward(r);
            return Ok(());
        }
        let (key, value, ts) = (r.key.clone(), r.value.clone(), r.timestamp);
        ctx.forward(r);
        self.seq = (self.seq + 1) & 0x7FFF_FFFF;
        ctx.window_store(handle)
            .put_seq(&key, ts, self.seq, Some(&value))?;
        Ok(())
    }
}

/// One side of a stream-stream join.
struct JoinProcessor<K, VThis, VOther, V1, V2, R> {
    side: Side,
    other_store: String,
    outer_store: Option<String>,
    /// Whether this side emits its records without a partner.
    outer: bool,
    null_keys: Nulls<K>,
    join_before: i64,
    join_after: i64,
    windows: JoinWindows,
    /// The result of this side's value with the other side's.
    pair: Pair<VThis, VOther, R>,
    /// The result of a record without a partner, from the shared store.
    joiner: Joiner<V1, V2, R>,
    wrap: Arc<dyn Fn(VThis) -> LeftOrRight<V1, V2> + Send + Sync>,
    trackers: Trackers,
    other: Option<WindowStoreHandle<K, VOther>>,
    shared: Option<SharedHandle<K, V1, V2>>,
}

type JoinCtx<'a, 'b, K, R> = &'a mut ProcessorContext<'b, K, R>;

impl<K: Data, VThis: Data, VOther: Data, V1: Data, V2: Data, R: Data>
    JoinProcessor<K, VThis, VOther, V1, V2, R>
{
    fn tracker(&self, ctx: &ProcessorContext<'_, K, R>) -> TimeTracker {
        let trackers = self.trackers.lock().unwrap_or_else(|e| e.into_inner());
        trackers.get(ctx.task_id()).copied().unwrap_or_default()
    }

    fn set_tracker(&self, ctx: &ProcessorContext<'_, K, R>, tracker: TimeTracker) {
        let mut trackers = self.trackers.lock().unwrap_or_else(|e| e.into_inner());
        // The task's id is copied once, at its first record, not at every record.
        match trackers.get_mut(ctx.task_id()) {
            Some(kept) => *kept = tracker,
            None => {
                trackers.insert(ctx.task_id().to_string(), tracker);
            }
        }
    }

    /// Whether the window of a record without a partner at `key` is still open.
    fn still_open(&self, tracker: &TimeTracker, key: &OuterKey<K>) -> bool {
        let look_back = if key.left {
            self.windows.after_ms()
        } else {
            self.windows.before_ms()
        };
        tracker.min_time + look_back + self.windows.grace_ms() >= tracker.stream_time
    }

    fn emit_non_joined(
        &self,
        r: &Record<K, VThis>,
        ctx: JoinCtx<'_, '_, K, R>,
    ) -> Result<(), StreamsError> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        let mut tracker = self.tracker(ctx);
        if tracker
            .min_time
            .saturating_add(self.join_after + self.windows.grace_ms())
            >= tracker.stream_time
        {
            return Ok(());
        }
        let now = ctx.wall_clock_time();
        if now < tracker.next_time_to_emit {
            return Ok(());
        }
        // How often a left or outer join looks for records to emit without a partner.
        tracker.next_time_to_emit = now.saturating_add(ctx.emit_intervals().outer_join_ms);
        tracker.min_time = i64::MAX;
        let entries = ctx.key_value_store(shared).all()?;
        let mut emitted = Vec::new();
        // As Kafka: entries come by time, then side; once a window is still open on both
        // sides, no later entry can be emitted, and the scan stops there (the minimum time
        // kept being that entry's).
        let (mut left_open, mut right_open) = (false, false);
        for (key, values) in entries {
            tracker.min_time = key.timestamp;
            if left_open && right_open {
                break;
            }
            if self.still_open(&tracker, &key) {
                if key.left {
                    left_open = true;
                } else {
                    right_open = true;
                }
                continue;
            }
            for value in values {
                let (left, right) = match &value {
                    LeftOrRight::Left(l) => (Some(l), None),
                    LeftOrRight::Right(v) => (None, Some(v)),
                };
                if let Some(out) = (self.joiner)(left, right) {
                    ctx.forward(Record {
                        key: key.key.clone(),
                        value: out,
                        timestamp: key.timestamp,
                        headers: r.headers.clone(),
                    });
                }
            }
            emitted.push(key);
        }
        {
            let mut store = ctx.key_value_store(shared);
            for key in emitted {
                store.put(&key, None)?;
            }
        }
        self.set_tracker(ctx, tracker);
        Ok(())
    }
}

impl<K: Data, VThis: Data, VOther: Data, V1: Data, V2: Data, R: Data> Processor<K, VThis, K, R>
    for JoinProcessor<K, VThis, VOther, V1, V2, R>
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, R>) -> Result<(), StreamsError> {
        self.other = Some(ctx.window_store_handle(&self.other_store)?);
        if let Some(shared) = &self.outer_store {
            self.shared = Some(ctx.key_value_store_handle(shared)?);
        }
        Ok(())
    }

    fn process(
        &mut self,
        r: Record<K, VThis>,
        ctx: &mut ProcessorContext<'_, K, R>,
    ) -> Result<(), StreamsError> {
        let t = r.timestamp;
        let mut tracker = self.tracker(ctx);
        tracker.stream_time = tracker.stream_time.max(t);
        self.set_tracker(ctx, tracker);
        // Kafka (KIP-962): a record with a null key has no partner; an outer side forwards
        // it at once, after its time counted for the join.
        if self.null_keys.is_null(&r.key) {
            if self.outer {
                self.forward_without_partner(r, ctx);
            } else {
                ctx.record_dropped();
            }
            return Ok(());
        }
        if t == tracker.stream_time {
            self.emit_non_joined(&r, ctx)?;
        }
        let from = (t - self.join_before).max(0);
        let to = (t + self.join_after).max(0);
        let Some(other) = &self.other else {
            return Ok(());
        };
        let partners = ctx.window_store(other).fetch_range(&r.key, from, to)?;
        let need_outer = self.outer && partners.is_empty();
        for (other_time, _, other_value) in partners {
            if let Some(shared) = &self.shared {
                let key = OuterKey {
                    timestamp: other_time,
                    left: self.side == Side::Right,
                    key: r.key.clone(),
                };
                let mut store = ctx.key_value_store(shared);
                if store.get(&key)?.is_some() {
                    store.put(&key, None)?;
                }
            }
            if let Some(out) = (self.pair)(&r.value, &other_value) {
                ctx.forward(Record {
                    key: r.key.clone(),
                    value: out,
                    timestamp: t.max(other_time),
                    headers: r.headers.clone(),
                });
            }
        }
        if need_outer {
            let tracker = self.tracker(ctx);
            match &self.shared {
                Some(shared) if to >= tracker.stream_time => {
                    let mut tracker = tracker;
                    tracker.min_time = tracker.min_time.min(t);
                    self.set_tracker(ctx, tracker);
                    let key = OuterKey {
                        timestamp: t,
                        left: self.side == Side::Left,
                        key: r.key,
                    };
                    let mut store = ctx.key_value_store(shared);
                    let mut waiting = store.get(&key)?.unwrap_or_default();
                    waiting.push((self.wrap)(r.value));
                    store.put(&key, Some(&waiting))?;
                }
                _ => self.forward_without_partner(r, ctx),
            }
        }
        Ok(())
    }
}

impl<K: Data, VThis: Data, VOther: Data, V1: Data, V2: Data, R: Data>
    JoinProcessor<K, VThis, VOther, V1, V2, R>
{
    /// Forwards `r` joined with no partner, at its own time.
    fn forward_without_partner(&self, r: Record<K, VThis>, ctx: JoinCtx<'_, '_, K, R>) {
        let (left, right) = match (self.wrap)(r.value) {
            LeftOrRight::Left(l) => (Some(l), None),
            LeftOrRight::Right(v) => (None, Some(v)),
        };
        if let Some(out) = (self.joiner)(left.as_ref(), right.as_ref()) {
            ctx.forward(Record {
                key: r.key,
                value: out,
                timestamp: r.timestamp,
                headers: r.headers,
            });
        }
    }
}

/// Which join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinKind {
    Inner,
    Left,
    Outer,
}

impl<K: Data, V1: Data> KStream<K, V1> {
    /// Joins with `other`: each pair of records with equal keys within `windows` gives
    /// `joiner(left, right)`, at the later of their timestamps.
    pub fn join<V2: Data, R: Data>(
        self,
        other: KStream<K, V2>,
        joiner: impl Fn(&V1, &V2) -> R + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V1, V2>,
    ) -> KStream<K, R> {
        let joiner: Joiner<V1, V2, R> = Arc::new(move |l, r| Some(joiner(l?, r?)));
        self.stream_join(other, joiner, windows, joined, JoinKind::Inner)
    }

    /// As [`KStream::join`], and a left record that finds no right record within the window
    /// gives `joiner(left, None)` once the window has closed.
    pub fn left_join<V2: Data, R: Data>(
        self,
        other: KStream<K, V2>,
        joiner: impl Fn(&V1, Option<&V2>) -> R + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V1, V2>,
    ) -> KStream<K, R> {
        let joiner: Joiner<V1, V2, R> = Arc::new(move |l, r| Some(joiner(l?, r)));
        self.stream_join(other, joiner, windows, joined, JoinKind::Left)
    }

    /// As [`KStream::left_join`], for records of either side without a partner.
    pub fn outer_join<V2: Data, R: Data>(
        self,
        other: KStream<K, V2>,
        joiner: impl Fn(Option<&V1>, Option<&V2>) -> R + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V1, V2>,
    ) -> KStream<K, R> {
        let joiner: Joiner<V1, V2, R> = Arc::new(move |l, r| Some(joiner(l, r)));
        self.stream_join(other, joiner, windows, joined, JoinKind::Outer)
    }

    fn stream_join<V2: Data, R: Data>(
        self,
        other: KStream<K, V2>,
        joiner: Joiner<V1, V2, R>,
        windows: JoinWindows,
        joined: StreamJoined<K, V1, V2>,
        kind: JoinKind,
    ) -> KStream<K, R> {
        let builder = self.builder.clone();
        let keys = joined
            .keys
            .clone()
            .or(self.keys.clone())
            .or(other.keys.clone());
        let values = joined.values.clone().or(self.values.clone());
        let other_values = joined.other_values.clone().or(other.values.clone());
        let name = joined.name.clone();
        let mut this = self;
        let mut that = other;
        if this.repartition_required {
            let prefix = name
                .as_ref()
                .map_or_else(|| this.node.clone(), |n| format!("{n}-left"));
            let source = this.repartition_through(&prefix, keys.clone(), values.clone());
            this.node = source;
        }
        if that.repartition_required {
            let prefix = name
                .as_ref()
                .map_or_else(|| that.node.clone(), |n| format!("{n}-right"));
            let source = that.repartition_through(&prefix, keys.clone(), other_values.clone());
            that.node = source;
        }
        builder.with_topology(|t| {
            t.copartition(&[&this.node, &that.node]);
            Ok(())
        });
        let (left_outer, right_outer) = match kind {
            JoinKind::Inner => (false, false),
            JoinKind::Left => (true, false),
            JoinKind::Outer => (true, true),
        };
        let this_suffix = if right_outer {
            "-outer-this-join"
        } else {
            "-this-join"
        };
        let other_suffix = if left_outer {
            "-outer-other-join"
        } else {
            "-other-join"
        };
        let named_or =
            |suffix: &str, prefix: &str| builder.name_with_suffix(name.as_deref(), suffix, prefix);
        let this_windowed = named_or("-this-windowed", "KSTREAM-WINDOWED-");
        let other_windowed = named_or("-other-windowed", "KSTREAM-WINDOWED-");
        let this_prefix = if right_outer {
            "KSTREAM-OUTERTHIS-"
        } else {
            "KSTREAM-JOINTHIS-"
        };
        let other_prefix = if left_outer {
            "KSTREAM-OUTEROTHER-"
        } else {
            "KSTREAM-JOINOTHER-"
        };
        let this_generated = builder.new_name(this_prefix);
        let other_generated = builder.new_name(other_prefix);
        let join_this = name
            .as_ref()
            .map_or_else(|| this_generated.clone(), |n| format!("{n}{this_suffix}"));
        let join_other = name
            .as_ref()
            .map_or_else(|| other_generated.clone(), |n| format!("{n}{other_suffix}"));
        let merge = named_or("-merge", "KSTREAM-MERGE-");
        let store_base = |suffix: &str, generated: &str| match &joined.store_name {
            Some(s) => format!("{s}{suffix}-store"),
            None => format!("{generated}-store"),
        };
        let this_store = store_base(this_suffix, &this_generated);
        let other_store = store_base(other_suffix, &other_generated);
        let shared_store = left_outer.then(|| match &joined.store_name {
            Some(s) => format!(
                "{s}{}-store",
                if right_outer {
                    "-outer-shared-join"
                } else {
                    "-left-shared-join"
                }
            ),
            None => format!(
                "KSTREAM-OUTERSHARED-{}-store",
                &this_generated[this_prefix.len()..]
            ),
        });
        let (Some(keys), Some(values), Some(other_values)) = (keys, values, other_values) else {
            builder.fail(TopologyError::MissingSerde {
                node: join_this,
                which: "key or value (give them with StreamJoined)",
            });
            return KStream::new(builder, merge, None, None);
        };
        let retention = windows.before_ms() + windows.after_ms() + windows.grace_ms();
        let trackers: Trackers = Arc::new(Mutex::new(HashMap::new()));
        let (ts, os) = (this_store.clone(), other_store.clone());
        let (k1, v1, v2) = (keys.clone(), values.clone(), other_values.clone());
        builder.with_topology(|t| {
            let p = t.index_of(&this.node).into_iter().collect();
            let store = ts.clone();
            let null_keys = Nulls::of(Some(k1.clone()));
            let nk = null_keys.clone();
            t.add_processor_node(&this_windowed, p, move || JoinWindowProcessor::<K, V1> {
                store: store.clone(),
                null_keys: nk.clone(),
                seq: 0,
                handle: None,
            })?;
            let p = t.index_of(&that.node).into_iter().collect();
            let store = os.clone();
            let nk = null_keys.clone();
            t.add_processor_node(&other_windowed, p, move || JoinWindowProcessor::<K, V2> {
                store: store.clone(),
                null_keys: nk.clone(),
                seq: 0,
                handle: None,
            })?;
            let p = t.index_of(&this_windowed).into_iter().collect();
            let (other, shared, j, tr) = (
                os.clone(),
                shared_store.clone(),
                joiner.clone(),
                trackers.clone(),
            );
            let nk = null_keys.clone();
            t.add_processor_node(&join_this, p, move || {
                let pair_joiner = j.clone();
                JoinProcessor::<K, V1, V2, V1, V2, R> {
                    side: Side::Left,
                    other_store: other.clone(),
                    outer_store: shared.clone(),
                    outer: left_outer,
                    null_keys: nk.clone(),
                    join_before: windows.before_ms(),
                    join_after: windows.after_ms(),
                    windows,
                    pair: Arc::new(move |l, r| pair_joiner(Some(l), Some(r))),
                    joiner: j.clone(),
                    wrap: Arc::new(LeftOrRight::Left),
                    trackers: tr.clone(),
                    other: None,
                    shared: None,
                }
            })?;
            let p = t.index_of(&other_windowed).into_iter().collect();
            let (this_s, shared, j, tr) = (
                ts.clone(),
                shared_store.clone(),
                joiner.clone(),
                trackers.clone(),
            );
            let nk = null_keys.clone();
            t.add_processor_node(&join_other, p, move || {
                let pair_joiner = j.clone();
                JoinProcessor::<K, V2, V1, V1, V2, R> {
                    side: Side::Right,
                    other_store: this_s.clone(),
                    outer_store: shared.clone(),
                    outer: right_outer,
                    null_keys: nk.clone(),
                    join_before: windows.after_ms(),
                    join_after: windows.before_ms(),
                    windows,
                    pair: Arc::new(move |r, l| pair_joiner(Some(l), Some(r))),
                    joiner: j.clone(),
                    wrap: Arc::new(LeftOrRight::Right),
                    trackers: tr.clone(),
                    other: None,
                    shared: None,
                }
            })?;
            let p = [t.index_of(&join_this), t.index_of(&join_other)]
                .into_iter()
                .flatten()
                .collect();
            t.add_processor_node::<super::ops::PassThrough, K, R, K, R>(&merge, p, || {
                super::ops::PassThrough
            })?;
            let kind = StoreKind::Window {
                retention_ms: retention,
            };
            let mut this_def =
                StoreBuilder::key_value_with(&ts, k1.clone(), v1.clone()).with_kind(kind);
            let mut other_def =
                StoreBuilder::key_value_with(&os, k1.clone(), v2.clone()).with_kind(kind);
            if !joined.logging {
                this_def = this_def.with_logging_disabled();
                other_def = other_def.with_logging_disabled();
            }
            t.add_state_store(this_def, &[&this_windowed, &join_other])?;
            t.add_state_store(other_def, &[&other_windowed, &join_this])?;
            if let Some(shared) = &shared_store {
                let mut def = StoreBuilder::key_value_with(
                    shared,
                    Arc::new(OuterKeySerde(k1.clone())) as SerdeOf<OuterKey<K>>,
                    Arc::new(LeftOrRightListSerde {
                        left: v1.clone(),
                        right: v2.clone(),
                    }) as SerdeOf<Vec<LeftOrRight<V1, V2>>>,
                );
                if !joined.logging {
                    def = def.with_logging_disabled();
                }
                t.add_state_store(def, &[&join_this, &join_other])?;
            }
            Ok(())
        });
        KStream::new(builder, merge, Some(keys), None)
    }
}
