//! Count, reduce or aggregate in sliding windows, as Kafka's `KStreamSlidingWindowAggregate`
//! does: each record has a left window (ending at it) and a right window (starting just after
//! it, once a later record falls in it), so that every distinct set of records within the time
//! difference has one window; records before the first time difference share the window that
//! starts at 0.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use super::{forward_closed_windows, Ctx, WindowAggregate};
use crate::log::Timestamp;
use crate::streams::processor::{Data, Processor};
use crate::streams::record::{Change, Record};
use crate::streams::store::ValueAndTimestamp;
use crate::streams::windowed::Windowed;
use crate::streams::windows::{SlidingWindows, Window};
use crate::streams::StreamsError;

/// Count, reduce or aggregate in sliding windows (Kafka's `KStreamSlidingWindowAggregate`,
/// walking the windows from the latest back, as Kafka does with its stores).
pub(crate) type SlidingWindowAggregate<K, V, VA> = WindowAggregate<K, V, VA, SlidingWindows>;

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
        let kept = if self.send_old_values.load(Ordering::Relaxed) && !self.forwarded_at_flush {
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
        if self.emit_final.is_some() || self.forwarded_at_flush {
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
        if self.emit_final.is_some() || self.forwarded_at_flush {
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

fn unexpected<K, VA>(ctx: Ctx<'_, '_, K, VA>, start: Timestamp, t: Timestamp) -> StreamsError {
    StreamsError::processor(
        ctx.name(),
        format!("unexpected sliding window starting at {start} for a record at {t}"),
    )
}

impl<K: Data, V: Data, VA: Data> Processor<K, V, Windowed<K>, Change<VA>>
    for SlidingWindowAggregate<K, V, VA>
{
    fn init(&mut self, ctx: Ctx<'_, '_, K, VA>) -> Result<(), StreamsError> {
        let handle = ctx.window_store_handle(&self.store)?;
        if self.emit_final.is_none() {
            // A sliding window's store keeps windows `time_difference` long.
            let old_values = self.send_old_values.load(Ordering::Relaxed);
            self.forwarded_at_flush =
                ctx.forward_windows_on_flush(&handle, self.diff(), old_values);
        }
        self.handle = Some(handle);
        Ok(())
    }

    fn process(&mut self, r: Record<K, V>, ctx: Ctx<'_, '_, K, VA>) -> Result<(), StreamsError> {
        // Kafka's KStreamSlidingWindowAggregate skips null keys and null values.
        if self.nulls.0.is_null(&r.key) || self.nulls.1.is_null(&r.value) {
            ctx.record_dropped();
            return Ok(());
        }
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
