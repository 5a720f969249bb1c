//! The processors of windowed aggregations, as Kafka Streams runs them: each keeps its own
//! observed stream time (the largest timestamp it has seen), drops a record for a window that
//! closed (its end plus grace is at or before that time) and counts the drop, and forwards
//! every update of a window with the window in the key.
//!
//! - time windows (tumbling and hopping): every window holding the record;
//! - sliding windows: Kafka's algorithm of left and right windows around each record, so
//!   that every distinct set of records within the time difference has one window;
//! - session windows: the record's session, merged with every session it comes within the
//!   inactivity gap of (the merged ones are deleted downstream with a tombstone).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::aggregate::Fold;
use super::emit_final::EmitFinal;
use crate::log::{Header, Timestamp};
use crate::streams::processor::{
    Data, Processor, ProcessorContext, SessionStoreHandle, WindowStoreHandle,
};
use crate::streams::record::{Change, Record};
use crate::streams::store::ValueAndTimestamp;
use crate::streams::windowed::Windowed;
use crate::streams::windows::{SessionWindows, SlidingWindows, TimeWindows, Window};
use crate::streams::StreamsError;

/// `(key, aggregate, aggregate) -> aggregate`: how two sessions' aggregates combine.
pub(crate) type Merger<K, VA> = Arc<dyn Fn(&K, VA, VA) -> VA + Send + Sync>;

type Ctx<'a, 'b, K, VA> = &'a mut ProcessorContext<'b, Windowed<K>, Change<VA>>;

/// Count, reduce or aggregate in time windows.
pub(crate) struct TimeWindowAggregate<K, V, VA> {
    pub(crate) store: String,
    pub(crate) windows: TimeWindows,
    pub(crate) fold: Fold<K, V, VA>,
    pub(crate) send_old_values: Arc<AtomicBool>,
    pub(crate) observed: Timestamp,
    pub(crate) handle: Option<WindowStoreHandle<K, ValueAndTimestamp<VA>>>,
    /// Emit each window once, when it closes, instead of every update.
    pub(crate) emit_final: Option<EmitFinal>,
}

impl<K: Data, V: Data, VA: Data> TimeWindowAggregate<K, V, VA> {
    /// Kafka's `maybeForwardFinalResult` for time windows: those that closed since the last
    /// emission (a window closes when its end is at or before the close time).
    fn forward_final(
        &mut self,
        r: &Record<K, V>,
        ctx: Ctx<'_, '_, K, VA>,
        close: Timestamp,
    ) -> Result<(), StreamsError> {
        let (Some(state), Some(handle)) = (self.emit_final.as_mut(), &self.handle) else {
            return Ok(());
        };
        let windows = self.windows;
        let size = windows.size_ms();
        forward_closed_windows(state, handle, ctx, r, close, size, |state| {
            let upper = close - size;
            if upper < 0 {
                return None;
            }
            if state.first() {
                return Some((0, upper));
            }
            let lower = (state.last_close - size).max(0) + 1;
            // Nothing to fetch when no window closed since the last emission.
            let closing: Vec<Window> = windows.windows_for(upper).collect();
            let emitted: Vec<Window> = windows.windows_for(lower - 1).collect();
            (closing != emitted).then_some((lower, upper))
        })
    }
}

/// Kafka's `fetchAndEmit` for windows of `size` in a window store: when an emission is due and
/// `bounds` gives the range of window starts that closed, forwards each window's final
/// aggregate (by start, then key) at its aggregate's timestamp with the headers of the record
/// that closed it, and remembers `close` as emitted.
#[allow(clippy::too_many_arguments)]
fn forward_closed_windows<K: Data, V, VA: Data>(
    state: &mut EmitFinal,
    handle: &WindowStoreHandle<K, ValueAndTimestamp<VA>>,
    ctx: Ctx<'_, '_, K, VA>,
    r: &Record<K, V>,
    close: Timestamp,
    size: i64,
    bounds: impl FnOnce(&EmitFinal) -> Option<(Timestamp, Timestamp)>,
) -> Result<(), StreamsError> {
    if !state.due(ctx.wall_clock_time(), close) {
        return Ok(());
    }
    let Some((lower, upper)) = bounds(state) else {
        return Ok(());
    };
    for (key, start, value) in ctx.window_store(handle).fetch_all(lower, upper)? {
        ctx.forward(Record {
            key: Windowed::new(
                key,
                Window {
                    start,
                    end: start + size,
                },
            ),
            value: Change::new(Some(value.value), None),
            timestamp: value.timestamp,
            headers: r.headers.clone(),
        });
    }
    state.last_close = close;
    Ok(())
}

impl<K: Data, V: Data, VA: Data> Processor<K, V, Windowed<K>, Change<VA>>
    for TimeWindowAggregate<K, V, VA>
{
    fn init(&mut self, ctx: Ctx<'_, '_, K, VA>) -> Result<(), StreamsError> {
        self.handle = Some(ctx.window_store_handle(&self.store)?);
        Ok(())
    }

    fn process(&mut self, r: Record<K, V>, ctx: Ctx<'_, '_, K, VA>) -> Result<(), StreamsError> {
        let Some(handle) = &self.handle else {
            return Ok(());
        };
        self.observed = self.observed.max(r.timestamp);
        let close = self.observed - self.windows.grace_ms();
        let send_old = self.send_old_values.load(Ordering::Relaxed);
        let windows = self.windows;
        for window in windows.windows_for(r.timestamp) {
            if window.end <= close {
                ctx.record_dropped();
                continue;
            }
            let mut outcome = None;
            let fold = &self.fold;
            ctx.window_store(handle)
                .update(&r.key, window.start, |stored| {
                    let (old, timestamp) = match stored {
                        Some(s) => (Some(s.value), r.timestamp.max(s.timestamp)),
                        None => (None, r.timestamp),
                    };
                    let kept = if send_old { old.clone() } else { None };
                    let new = fold.apply(&r.key, r.value.clone(), old);
                    outcome = Some((new.clone(), kept, timestamp));
                    Some(ValueAndTimestamp {
                        value: new,
                        timestamp,
                    })
                })?;
            let Some((new, old, timestamp)) = outcome else {
                continue;
            };
            if self.emit_final.is_none() {
                ctx.forward(Record {
                    key: Windowed::new(r.key.clone(), window),
                    value: Change::new(Some(new), old),
                    timestamp,
                    headers: r.headers.clone(),
                });
            }
        }
        self.forward_final(&r, ctx, close)
    }
}

/// Count, reduce or aggregate in sliding windows (Kafka's `KStreamSlidingWindowAggregate`,
/// walking the windows from the latest back, as Kafka does with its stores).
pub(crate) struct SlidingWindowAggregate<K, V, VA> {
    pub(crate) store: String,
    pub(crate) windows: SlidingWindows,
    pub(crate) fold: Fold<K, V, VA>,
    pub(crate) send_old_values: Arc<AtomicBool>,
    pub(crate) observed: Timestamp,
    pub(crate) handle: Option<WindowStoreHandle<K, ValueAndTimestamp<VA>>>,
    /// Emit each window once, when it closes, instead of every update.
    pub(crate) emit_final: Option<EmitFinal>,
}

type Stored<VA> = ValueAndTimestamp<VA>;

/// A window's aggregate so far and its timestamp; no aggregate for a new window of a
/// `reduce` (Kafka's null aggregate).
type Current<VA> = (Option<VA>, Timestamp);

impl<K: Data, V: Data, VA: Data> SlidingWindowAggregate<K, V, VA> {
    fn diff(&self) -> i64 {
        self.windows.time_difference_ms()
    }

    /// A new window's aggregate: the seed, at the record's time.
    fn fresh(&self, t: Timestamp) -> Current<VA> {
        (self.fold.seed(), t)
    }

    fn window(&self, start: Timestamp) -> Window {
        Window {
            start,
            end: start + self.diff(),
        }
    }

    /// Folds the record into `window` (whose aggregate so far is `current`) and forwards the
    /// update, unless the window closed.
    fn update(
        &self,
        ctx: Ctx<'_, '_, K, VA>,
        r: &Record<K, V>,
        window: Window,
        current: Current<VA>,
        close: Timestamp,
    ) -> Result<(), StreamsError> {
        if window.end < close {
            ctx.record_dropped();
            return Ok(());
        }
        let handle = self.handle.as_ref().expect("initialized");
        let (old, stored_at) = current;
        let timestamp = match old {
            Some(_) => r.timestamp.max(stored_at),
            None => r.timestamp,
        };
        let kept = if self.send_old_values.load(Ordering::Relaxed) {
            old.clone()
        } else {
            None
        };
        let new = self.fold.apply(&r.key, r.value.clone(), old);
        ctx.window_store(handle).put(
            &r.key,
            window.start,
            Some(&ValueAndTimestamp {
                value: new.clone(),
                timestamp,
            }),
        )?;
        if self.emit_final.is_some() {
            return Ok(());
        }
        ctx.forward(Record {
            key: Windowed::new(r.key.clone(), window),
            value: Change::new(Some(new), kept),
            timestamp,
            headers: r.headers.clone(),
        });
        Ok(())
    }

    /// Stores and forwards an aggregate as it is, for a new right window.
    fn put_as_is(
        &self,
        ctx: Ctx<'_, '_, K, VA>,
        key: &K,
        window: Window,
        value: Stored<VA>,
        r: &Record<K, V>,
    ) -> Result<(), StreamsError> {
        let handle = self.handle.as_ref().expect("initialized");
        ctx.window_store(handle)
            .put(key, window.start, Some(&value))?;
        if self.emit_final.is_some() {
            return Ok(());
        }
        ctx.forward(Record {
            key: Windowed::new(key.clone(), window),
            value: Change::new(Some(value.value), None),
            timestamp: value.timestamp,
            headers: r.headers.clone(),
        });
        Ok(())
    }

    fn fetch(
        &self,
        ctx: Ctx<'_, '_, K, VA>,
        key: &K,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<(Timestamp, Stored<VA>)>, StreamsError> {
        let handle = self.handle.as_ref().expect("initialized");
        Ok(ctx
            .window_store(handle)
            .fetch_range(key, from, to)?
            .into_iter()
            .map(|(start, _, v)| (start, v))
            .collect())
    }

    fn process_early(
        &self,
        r: &Record<K, V>,
        ctx: Ctx<'_, '_, K, VA>,
        close: Timestamp,
    ) -> Result<(), StreamsError> {
        let t = r.timestamp;
        let mut combined: Option<(Timestamp, Stored<VA>)> = None;
        let mut right_agg: Option<Stored<VA>> = None;
        let mut right_created = false;
        let mut starts = HashSet::new();
        let mut previous: Option<Timestamp> = None;
        for (start, value) in self.fetch(ctx, &r.key, 0, t + 1)? {
            starts.insert(start);
            if start == 0 {
                if value.timestamp < t {
                    previous = Some(value.timestamp);
                }
                combined = Some((start, value));
            } else if start <= t {
                right_agg = Some(value.clone());
                self.update(
                    ctx,
                    r,
                    self.window(start),
                    (Some(value.value), value.timestamp),
                    close,
                )?;
            } else if start == t + 1 {
                right_created = true;
            } else {
                return Err(unexpected(ctx, start, t));
            }
        }
        if right_agg.is_none() {
            if let Some((_, c)) = &combined {
                if c.timestamp > t {
                    right_agg = Some(c.clone());
                }
            }
        }
        if !right_created {
            if let Some(agg) = right_agg.filter(|a| a.timestamp > t) {
                self.put_as_is(ctx, &r.key, self.window(t + 1), agg, r)?;
            }
        }
        if let Some(p) = previous {
            if !starts.contains(&(p + 1)) {
                self.update(ctx, r, self.window(p + 1), self.fresh(t), close)?;
            }
        }
        match combined {
            None => self.update(ctx, r, self.window(0), self.fresh(t), close),
            Some((start, value)) => self.update(
                ctx,
                r,
                self.window(start),
                (Some(value.value), value.timestamp),
                close,
            ),
        }
    }
}

impl<K: Data, V: Data, VA: Data> SlidingWindowAggregate<K, V, VA> {
    /// Kafka's `maybeForwardFinalResult` for sliding windows: those that closed since the
    /// last emission (a window closes when its end is before the close time).
    fn forward_final(
        &mut self,
        r: &Record<K, V>,
        ctx: Ctx<'_, '_, K, VA>,
        close: Timestamp,
    ) -> Result<(), StreamsError> {
        let diff = self.diff();
        let (Some(state), Some(handle)) = (self.emit_final.as_mut(), &self.handle) else {
            return Ok(());
        };
        forward_closed_windows(state, handle, ctx, r, close, diff, |state| {
            let upper = close - diff - 1;
            let lower = if state.first() {
                0
            } else {
                (state.last_close - diff).max(0)
            };
            (upper >= 0).then_some((lower, upper))
        })
    }
}

fn unexpected<K, VA>(ctx: Ctx<'_, '_, K, VA>, start: Timestamp, t: Timestamp) -> StreamsError {
    StreamsError::Processor {
        processor: ctx.name().to_string(),
        reason: format!("unexpected sliding window starting at {start} for a record at {t}"),
    }
}

impl<K: Data, V: Data, VA: Data> Processor<K, V, Windowed<K>, Change<VA>>
    for SlidingWindowAggregate<K, V, VA>
{
    fn init(&mut self, ctx: Ctx<'_, '_, K, VA>) -> Result<(), StreamsError> {
        self.handle = Some(ctx.window_store_handle(&self.store)?);
        Ok(())
    }

    fn process(&mut self, r: Record<K, V>, ctx: Ctx<'_, '_, K, VA>) -> Result<(), StreamsError> {
        let t = r.timestamp;
        let diff = self.diff();
        self.observed = self.observed.max(t);
        let close = self.observed - self.windows.grace_ms();
        if t + 1 + diff <= close {
            ctx.record_dropped();
            return Ok(());
        }
        if t < diff {
            return self.process_early(&r, ctx, close);
        }
        self.aggregate(&r, ctx, close)?;
        self.forward_final(&r, ctx, close)
    }
}

impl<K: Data, V: Data, VA: Data> SlidingWindowAggregate<K, V, VA> {
    /// Folds a record (not an early one) into its windows, walking them from the latest back.
    fn aggregate(
        &self,
        r: &Record<K, V>,
        ctx: Ctx<'_, '_, K, VA>,
        close: Timestamp,
    ) -> Result<(), StreamsError> {
        let t = r.timestamp;
        let diff = self.diff();
        let mut starts = HashSet::new();
        let mut left_agg: Option<Stored<VA>> = None;
        let mut right_agg: Option<Stored<VA>> = None;
        let mut left_created = false;
        let mut right_created = false;
        let mut previous: Option<Timestamp> = None;
        let mut windows = self.fetch(ctx, &r.key, (t - 2 * diff).max(0), t + 1)?;
        windows.reverse();
        for (start, value) in windows {
            starts.insert(start);
            let end = start + diff;
            if start == t + 1 {
                right_created = true;
            } else if end > t {
                if right_agg.is_none() {
                    right_agg = Some(value.clone());
                }
                self.update(
                    ctx,
                    r,
                    self.window(start),
                    (Some(value.value), value.timestamp),
                    close,
                )?;
            } else if end == t {
                left_created = true;
                let max = value.timestamp;
                self.update(ctx, r, self.window(start), (Some(value.value), max), close)?;
                if max < t {
                    previous = Some(max);
                } else {
                    return Ok(());
                }
            } else {
                previous = Some(value.timestamp);
                left_agg = Some(value);
                break;
            }
        }
        // The previous record's right window, if it holds this record and is missing.
        if let Some(p) = previous {
            let start = p + 1;
            if !starts.contains(&start) && start + diff >= t {
                self.update(ctx, r, self.window(start), self.fresh(t), close)?;
            }
        }
        // This record's left window.
        if !left_created {
            let seed = match (&left_agg, previous) {
                (Some(agg), Some(p)) if t - diff <= p => Some(agg.value.clone()),
                _ => self.fold.seed(),
            };
            self.update(ctx, r, self.window(t - diff), (seed, t), close)?;
        }
        // This record's right window, if later records fall in it.
        if !right_created {
            if let Some(agg) = right_agg.filter(|a| a.timestamp > t) {
                self.put_as_is(ctx, &r.key, self.window(t + 1), agg, r)?;
            }
        }
        Ok(())
    }
}

/// Count, reduce or aggregate in session windows.
pub(crate) struct SessionWindowAggregate<K, V, VA> {
    pub(crate) store: String,
    pub(crate) windows: SessionWindows,
    pub(crate) fold: Fold<K, V, VA>,
    /// How sessions' aggregates combine when they merge.
    pub(crate) merger: Merger<K, VA>,
    pub(crate) send_old_values: Arc<AtomicBool>,
    pub(crate) observed: Timestamp,
    pub(crate) handle: Option<SessionStoreHandle<K, VA>>,
    /// Emit each session once, when it closes, instead of every update.
    pub(crate) emit_final: Option<EmitFinal>,
}

impl<K: Data, V: Data, VA: Data> SessionWindowAggregate<K, V, VA> {
    /// Kafka's `maybeForwardFinalResult` for sessions: those that ended since the last
    /// emission and before the close time, by end, start, then key; each at its end, with the
    /// headers of the record that closed them.
    fn forward_final(
        &mut self,
        headers: &[Header],
        ctx: Ctx<'_, '_, K, VA>,
        close: Timestamp,
    ) -> Result<(), StreamsError> {
        let (Some(state), Some(handle)) = (self.emit_final.as_mut(), &self.handle) else {
            return Ok(());
        };
        if !state.due(ctx.wall_clock_time(), close) {
            return Ok(());
        }
        let upper = close - 1;
        let lower = state.last_close.max(0);
        if upper < 0 || upper < lower {
            return Ok(());
        }
        let sessions = ctx.session_store(handle).sessions_ending(lower, upper)?;
        for (key, window, value) in sessions {
            ctx.forward(Record {
                key: Windowed::new(key, window),
                value: Change::new(Some(value), None),
                timestamp: window.end,
                headers: headers.to_vec(),
            });
        }
        state.last_close = close;
        Ok(())
    }
}

impl<K: Data, V: Data, VA: Data> Processor<K, V, Windowed<K>, Change<VA>>
    for SessionWindowAggregate<K, V, VA>
{
    fn init(&mut self, ctx: Ctx<'_, '_, K, VA>) -> Result<(), StreamsError> {
        self.handle = Some(ctx.session_store_handle(&self.store)?);
        Ok(())
    }

    fn process(&mut self, r: Record<K, V>, ctx: Ctx<'_, '_, K, VA>) -> Result<(), StreamsError> {
        let Some(handle) = &self.handle else {
            return Ok(());
        };
        let t = r.timestamp;
        let gap = self.windows.inactivity_gap_ms();
        self.observed = self.observed.max(t);
        let close = self.observed - self.windows.grace_ms() - gap;
        let send_old = self.send_old_values.load(Ordering::Relaxed);
        let found = ctx
            .session_store(handle)
            .find_sessions(&r.key, t - gap, t + gap)?;
        let single = Window { start: t, end: t };
        let mut merged_window = single;
        let mut agg = self.fold.seed();
        for (window, value) in &found {
            // A reduce starts from no aggregate: the first session's is taken as it is.
            agg = Some(match agg {
                Some(agg) => (self.merger)(&r.key, agg, value.clone()),
                None => value.clone(),
            });
            merged_window = Window {
                start: merged_window.start.min(window.start),
                end: merged_window.end.max(window.end),
            };
        }
        if merged_window.end < close {
            ctx.record_dropped();
            return self.forward_final(&r.headers, ctx, close);
        }
        let emit_updates = self.emit_final.is_none();
        if merged_window != single {
            for (window, value) in found {
                ctx.session_store(handle).put(&r.key, window, None)?;
                if !emit_updates {
                    continue;
                }
                ctx.forward(Record {
                    key: Windowed::new(r.key.clone(), window),
                    value: Change::new(None, send_old.then_some(value)),
                    timestamp: window.end,
                    headers: r.headers.clone(),
                });
            }
        }
        let agg = self.fold.apply(&r.key, r.value, agg);
        ctx.session_store(handle)
            .put(&r.key, merged_window, Some(&agg))?;
        if !emit_updates {
            return self.forward_final(&r.headers, ctx, close);
        }
        ctx.forward(Record {
            key: Windowed::new(r.key, merged_window),
            value: Change::new(Some(agg), None),
            timestamp: merged_window.end,
            headers: r.headers,
        });
        Ok(())
    }
}
