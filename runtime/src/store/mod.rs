//! State stores on disk: the inner stores an application's tasks keep their state in. Each
//! task has its own sled database under `state.dir/<application id>/<task>/`, with one tree
//! per store; the core's layers (change-logging, record cache, exactly-once write buffer)
//! are built over them as over the stores in memory, so a task runs the same engine in an
//! application as in the `TestDriver`.

mod applier;
mod sled_store;

pub use sled_store::{SledBytesStore, SledStores};
