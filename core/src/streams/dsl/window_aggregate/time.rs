//! Count, reduce or aggregate in time windows (tumbling and hopping): the record goes into
//! every window holding it that has not closed.

use std::sync::atomic::Ordering;

use super::{forward_closed_windows, Ctx, WindowAggregate};
use crate::log::Timestamp;
use crate::streams::processor::{Data, Processor};
use crate::streams::record::{Change, Record};
use crate::streams::store::ValueAndTimestamp;
use crate::streams::windowed::Windowed;
use crate::streams::windows::{TimeWindows, Window};
use crate::streams::StreamsError;

/// Count, reduce or aggregate in time windows.
pub(crate) type TimeWindowAggregate<K, V, VA> = WindowAggregate<K, V, VA, TimeWindows>;

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

impl<K: Data, V: Data, VA: Data> Processor<K, V, Windowed<K>, Change<VA>>
    for TimeWindowAggregate<K, V, VA>
{
    fn init(&mut self, ctx: Ctx<'_, '_, K, VA>) -> Result<(), StreamsError> {
        let handle = ctx.window_store_handle(&self.store)?;
        if self.emit_final.is_none() {
            let old_values = self.send_old_values.load(Ordering::Relaxed);
            self.forwarded_at_flush =
                ctx.forward_windows_on_flush(&handle, self.windows.size_ms(), old_values);
        }
        self.handle = Some(handle);
        Ok(())
    }

    fn process(&mut self, r: Record<K, V>, ctx: Ctx<'_, '_, K, VA>) -> Result<(), StreamsError> {
        let Some(handle) = &self.handle else {
            return Ok(());
        };
        // Kafka's KStreamWindowAggregate: a null key is skipped, a null value aggregated.
        if self.nulls.0.is_null(&r.key) {
            ctx.record_dropped();
            return Ok(());
        }
        self.observed = self.observed.max(r.timestamp);
        let close = self.observed - self.windows.grace_ms();
        let send_old = self.send_old_values.load(Ordering::Relaxed);
        // Emitted at close, or forwarded at flush, an update needs no copy here.
        let forward_now = self.emit_final.is_none() && !self.forwarded_at_flush;
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
                    let kept = if send_old && forward_now {
                        old.clone()
                    } else {
                        None
                    };
                    let new = fold.apply(&r.key, r.value.clone(), old);
                    if forward_now {
                        outcome = Some((new.clone(), kept, timestamp));
                    }
                    Some(ValueAndTimestamp {
                        value: new,
                        timestamp,
                    })
                })?;
            let Some((new, old, timestamp)) = outcome else {
                continue;
            };
            ctx.forward(Record {
                key: Windowed::new(r.key.clone(), window),
                value: Change::new(Some(new), old),
                timestamp,
                headers: r.headers.clone(),
            });
        }
        self.forward_final(&r, ctx, close)
    }
}
