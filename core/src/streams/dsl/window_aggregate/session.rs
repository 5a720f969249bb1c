//! Count, reduce or aggregate in session windows: the record's session, merged with every
//! session of its key it comes within the inactivity gap of; the merged sessions are deleted
//! downstream with tombstones, unless final results are emitted by session end once closed.
//! As in Kafka 4.4, updates and tombstones carry no headers; final results carry those of the
//! record that closed their sessions. With a record cache, the updates and tombstones are
//! forwarded when the cache sends them down.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::Ctx;
use crate::log::{Header, Timestamp};
use crate::streams::dsl::aggregate::Fold;
use crate::streams::dsl::emit_final::EmitFinal;
use crate::streams::dsl::nulls::Nulls;
use crate::streams::processor::{Data, Processor, SessionStoreHandle};
use crate::streams::record::{Change, Record};
use crate::streams::windowed::Windowed;
use crate::streams::windows::{SessionWindows, Window};
use crate::streams::StreamsError;

/// `(key, aggregate, aggregate) -> aggregate`: how two sessions' aggregates combine.
pub(crate) type Merger<K, VA> = Arc<dyn Fn(&K, VA, VA) -> VA + Send + Sync>;

/// Count, reduce or aggregate in session windows.
pub(crate) struct SessionWindowAggregate<K, V, VA> {
    pub(crate) store: String,
    /// Null keys (and, where Kafka skips them, null values) are skipped.
    pub(crate) nulls: (Nulls<K>, Nulls<V>),
    pub(crate) windows: SessionWindows,
    pub(crate) fold: Fold<K, V, VA>,
    /// How sessions' aggregates combine when they merge.
    pub(crate) merger: Merger<K, VA>,
    pub(crate) send_old_values: Arc<AtomicBool>,
    pub(crate) observed: Timestamp,
    pub(crate) handle: Option<SessionStoreHandle<K, VA>>,
    /// Emit each session once, when it closes, instead of every update.
    pub(crate) emit_final: Option<EmitFinal>,
    /// Whether the store's record cache forwards the updates, when it sends them down.
    pub(crate) forwarded_at_flush: bool,
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
        let interval = ctx.emit_intervals().windowed_aggregation_ms;
        if !state.due(ctx.wall_clock_time(), interval, close) {
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
        let handle = ctx.session_store_handle(&self.store)?;
        if self.emit_final.is_none() {
            let old_values = self.send_old_values.load(Ordering::Relaxed);
            self.forwarded_at_flush = ctx.forward_sessions_on_flush(&handle, old_values);
        }
        self.handle = Some(handle);
        Ok(())
    }

    fn process(&mut self, r: Record<K, V>, ctx: Ctx<'_, '_, K, VA>) -> Result<(), StreamsError> {
        let Some(handle) = &self.handle else {
            return Ok(());
        };
        // Kafka's KStreamSessionWindowAggregate: a null key is skipped, a null value merged.
        if self.nulls.0.is_null(&r.key) {
            ctx.record_dropped();
            return Ok(());
        }
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
        // Emitted at close, or forwarded at flush, updates are not forwarded here.
        let emit_updates = self.emit_final.is_none() && !self.forwarded_at_flush;
        if merged_window != single {
            for (window, value) in found {
                ctx.session_store(handle).put(&r.key, window, None)?;
                if !emit_updates {
                    continue;
                }
                // As Kafka 4.4: a session's updates and tombstones carry no headers.
                ctx.forward(Record {
                    key: Windowed::new(r.key.clone(), window),
                    value: Change::new(None, send_old.then_some(value)),
                    timestamp: window.end,
                    headers: Vec::new(),
                });
            }
        }
        let agg = self.fold.apply(&r.key, r.value, agg);
        ctx.session_store(handle)
            .put(&r.key, merged_window, Some(&agg))?;
        if self.emit_final.is_some() {
            return self.forward_final(&r.headers, ctx, close);
        }
        if !emit_updates {
            return Ok(());
        }
        ctx.forward(Record {
            key: Windowed::new(r.key, merged_window),
            value: Change::new(Some(agg), None),
            timestamp: merged_window.end,
            headers: Vec::new(),
        });
        Ok(())
    }
}
