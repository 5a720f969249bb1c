//! The processors of windowed aggregations, as Kafka Streams runs them: each keeps its own
//! observed stream time (the largest timestamp it has seen), drops a record for a window that
//! closed (its end plus grace is at or before that time) and counts the drop, and forwards
//! every update of a window with the window in the key, or, with emit-on-window-close, each
//! window once after it closed.
//!
//! - [`time`]: tumbling and hopping windows, every window holding the record;
//! - [`sliding`]: Kafka's algorithm of left and right windows around each record, so that
//!   every distinct set of records within the time difference has one window;
//! - [`session`]: the record's session, merged with every session it comes within the
//!   inactivity gap of (the merged ones are deleted downstream with a tombstone).

mod session;
mod sliding;
mod time;

pub(crate) use session::{Merger, SessionWindowAggregate};
pub(crate) use sliding::SlidingWindowAggregate;
pub(crate) use time::TimeWindowAggregate;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::aggregate::Fold;
use super::emit_final::EmitFinal;
use super::nulls::Nulls;
use crate::log::Timestamp;
use crate::streams::processor::{Data, ProcessorContext, WindowStoreHandle};
use crate::streams::record::{Change, Record};
use crate::streams::store::ValueAndTimestamp;
use crate::streams::windowed::Windowed;
use crate::streams::windows::Window;
use crate::streams::StreamsError;

/// A windowed aggregation's processor over a window store, in windows `W`: time windows
/// ([`TimeWindowAggregate`]) or sliding windows ([`SlidingWindowAggregate`]), whose
/// processing is each one's own.
pub(crate) struct WindowAggregate<K, V, VA, W> {
    pub(crate) store: String,
    /// Null keys (and, where Kafka skips them, null values) are skipped.
    pub(crate) nulls: (Nulls<K>, Nulls<V>),
    pub(crate) windows: W,
    pub(crate) fold: Fold<K, V, VA>,
    pub(crate) send_old_values: Arc<AtomicBool>,
    pub(crate) observed: Timestamp,
    pub(crate) handle: Option<WindowStoreHandle<K, ValueAndTimestamp<VA>>>,
    /// Emit each window once, when it closes, instead of every update.
    pub(crate) emit_final: Option<EmitFinal>,
    /// Whether the store's record cache forwards the updates, when it sends them down.
    pub(crate) forwarded_at_flush: bool,
}

impl<K, V, VA, W> WindowAggregate<K, V, VA, W> {
    /// The aggregation into `store` in `windows`, before it has seen a record.
    pub(crate) fn new(
        store: String,
        nulls: (Nulls<K>, Nulls<V>),
        windows: W,
        fold: Fold<K, V, VA>,
        send_old_values: Arc<AtomicBool>,
        emit_final: Option<EmitFinal>,
    ) -> Self {
        Self {
            store,
            nulls,
            windows,
            fold,
            send_old_values,
            observed: -1,
            handle: None,
            emit_final,
            forwarded_at_flush: false,
        }
    }
}

/// The context of a windowed aggregation's processor.
type Ctx<'a, 'b, K, VA> = &'a mut ProcessorContext<'b, Windowed<K>, Change<VA>>;

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
    let interval = ctx.emit_intervals().windowed_aggregation_ms;
    if !state.due(ctx.wall_clock_time(), interval, close) {
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
