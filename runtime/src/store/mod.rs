//! State stores on disk: the inner stores an application's tasks keep their state in. An
//! instance keeps them in one sled database under `state.dir/<application id>/stores/`, a
//! tree per store of each task; the core's layers (change-logging, record cache,
//! exactly-once write buffer) are built over them as over the stores in memory, so a task
//! runs the same engine in an application as in the `TestDriver`.

mod applier;
mod sled_store;
mod supplier;

pub use sled_store::SledBytesStore;
pub use supplier::SledStores;
