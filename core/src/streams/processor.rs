//! The Processor API: what a user processor implements ([`Processor`]) and what it can do
//! while it runs ([`ProcessorContext`]): forward records to its children, schedule
//! punctuations in stream time or wall-clock time, use its stores, and read where the current
//! record came from.
//!
//! ```
//! use eddy_core::streams::{Processor, ProcessorContext, Record, StreamsError};
//!
//! /// Forwards each value with its length.
//! struct Lengths;
//!
//! impl Processor<String, String, String, usize> for Lengths {
//!     fn process(
//!         &mut self,
//!         record: Record<String, String>,
//!         ctx: &mut ProcessorContext<'_, String, usize>,
//!     ) -> Result<(), StreamsError> {
//!         let len = record.value.len();
//!         ctx.forward(record.with_value(len));
//!         Ok(())
//!     }
//! }
//! ```

use crate::streams::record::Record;
use crate::streams::StreamsError;

pub(crate) use crate::streams::graph::StoreReader;
pub use crate::streams::graph::{
    Data, KeyValueStoreHandle, ProcessorContext, Punctuation, PunctuationType, ScheduleId,
    SessionStoreHandle, WindowStoreHandle,
};
/// A node of a topology that takes records with keys `KIn` and values `VIn` and forwards
/// records with keys `KOut` and values `VOut`. One instance runs per task, built by the
/// supplier given to the topology.
pub trait Processor<KIn, VIn, KOut, VOut>: Send + 'static {
    /// Called once before the first record: the place to look up stores and schedule
    /// punctuations.
    fn init(&mut self, _ctx: &mut ProcessorContext<'_, KOut, VOut>) -> Result<(), StreamsError> {
        Ok(())
    }

    /// Processes one record.
    fn process(
        &mut self,
        record: Record<KIn, VIn>,
        ctx: &mut ProcessorContext<'_, KOut, VOut>,
    ) -> Result<(), StreamsError>;

    /// A punctuation scheduled with [`ProcessorContext::schedule`] is due.
    fn punctuate(
        &mut self,
        _punctuation: Punctuation,
        _ctx: &mut ProcessorContext<'_, KOut, VOut>,
    ) -> Result<(), StreamsError> {
        Ok(())
    }

    /// Called once when the task closes.
    fn close(&mut self, _ctx: &mut ProcessorContext<'_, KOut, VOut>) -> Result<(), StreamsError> {
        Ok(())
    }
}
