//! The stream threads of an instance and what happens when one fails (Kafka Streams'
//! uncaught exception handler): the [`Launcher`] starts a thread by its index, and the
//! supervisor waits for them, asking the handler what to do about a thread that stopped on
//! an error — start a replacement ([`ThreadResponse::ReplaceThread`]), stop this instance
//! ([`ThreadResponse::ShutdownClient`], the default), or stop every instance of the
//! application ([`ThreadResponse::ShutdownApplication`], carried to the others by the
//! group's next assignment).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::assignor::placement::PlacementConfig;
use super::assignor::{LocalState, StreamsAssignor};
use super::streams::{Shared, State};
use super::thread::{self, Instance, ThreadContext, ThreadError};

/// What to do about a stream thread that stopped on an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadResponse {
    /// Start a new thread in its place; the others go on.
    ReplaceThread,
    /// Stop this instance: its other threads close, and it ends in [`State::Error`].
    ShutdownClient,
    /// Stop every instance of the application, this one included.
    ShutdownApplication,
}

/// Decides what to do about a thread's error.
pub type UncaughtErrorHandler = Arc<dyn Fn(&ThreadError) -> ThreadResponse + Send + Sync>;

/// Starts an instance's stream threads.
pub(crate) struct Launcher {
    /// What every thread shares.
    instance: Instance,
    placement: PlacementConfig,
    pub(crate) shared: Arc<Shared>,
    /// Threads that have taken up their first tasks.
    assigned: Arc<AtomicUsize>,
    /// The running threads' assignors, by index: where a shutdown request goes.
    assignors: Mutex<BTreeMap<usize, Arc<StreamsAssignor>>>,
}

impl Launcher {
    pub(crate) fn new(instance: Instance, shared: Arc<Shared>) -> Self {
        let config = &instance.config;
        let placement = PlacementConfig {
            standby_replicas: config.num_standby_replicas,
            acceptable_recovery_lag: config.acceptable_recovery_lag,
            max_warmup_replicas: config.max_warmup_replicas,
        };
        Self {
            instance,
            placement,
            shared,
            assigned: Arc::new(AtomicUsize::new(0)),
            assignors: Mutex::new(BTreeMap::new()),
        }
    }

    /// Starts thread `index` in `threads`.
    pub(crate) fn spawn(
        &self,
        index: usize,
        threads: &mut JoinSet<(usize, Result<(), ThreadError>)>,
    ) {
        let instance = &self.instance;
        let assignor = Arc::new(StreamsAssignor::new(
            instance.topology.clone(),
            instance.config.application_id.clone(),
            self.placement,
            LocalState {
                process: instance.process.clone(),
                endpoint: instance.config.application_server.clone(),
                ..LocalState::default()
            },
        ));
        self.assignors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(index, assignor.clone());
        let (shared, assigned) = (self.shared.clone(), self.assigned.clone());
        let count = instance.config.num_stream_threads;
        let on_first_assignment = Box::new(move || {
            if assigned.fetch_add(1, Ordering::AcqRel) + 1 >= count
                && shared.get() == State::Rebalancing
            {
                shared.set(State::Running);
            }
        });
        let context = ThreadContext {
            instance: instance.clone(),
            assignor,
            index,
            on_first_assignment: Some(on_first_assignment),
        };
        threads.spawn(async move { (index, thread::run(context).await) });
    }

    /// Asks the group, through the running threads' next joins, to stop every instance.
    /// `false` when no thread runs to carry the request.
    fn request_application_shutdown(&self, failed: usize) -> bool {
        let mut assignors = self.assignors.lock().unwrap_or_else(|e| e.into_inner());
        assignors.remove(&failed);
        for assignor in assignors.values() {
            assignor.request_application_shutdown();
        }
        !assignors.is_empty()
    }

    /// Tells the instance's remaining threads that the application's shutdown was ordered,
    /// so that they close without leaving the group.
    fn application_shutdown_ordered(&self) {
        let assignors = self.assignors.lock().unwrap_or_else(|e| e.into_inner());
        for assignor in assignors.values() {
            assignor.application_shutdown_ordered();
        }
    }

    fn forget(&self, index: usize) {
        self.assignors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&index);
    }
}

/// Waits for the threads, answering their errors with `handler`, until every thread has
/// stopped; returns the first error of those that stopped the instance.
pub(crate) async fn supervise(
    launcher: Arc<Launcher>,
    mut threads: JoinSet<(usize, Result<(), ThreadError>)>,
    handler: Option<UncaughtErrorHandler>,
    stop: Arc<watch::Sender<bool>>,
) -> Result<(), ThreadError> {
    let mut outcome = Ok(());
    let mut stopping = false;
    while let Some(joined) = threads.join_next().await {
        let (index, result) = match joined {
            Ok(done) => done,
            Err(e) => (
                usize::MAX,
                Err(ThreadError::Assignment(format!(
                    "a stream thread panicked: {e}"
                ))),
            ),
        };
        launcher.forget(index);
        let Err(error) = result else {
            continue;
        };
        if matches!(error, ThreadError::ApplicationShutdown) {
            // Before the others are told to stop.
            launcher.application_shutdown_ordered();
        }
        if stopping || *stop.borrow() {
            // Already stopping: a thread that fails on the way adds nothing to do.
            if outcome.is_ok() {
                outcome = Err(error);
            }
            continue;
        }
        let response = match &error {
            // Told by another instance: no handler is asked.
            ThreadError::ApplicationShutdown => ThreadResponse::ShutdownClient,
            other => handler
                .as_ref()
                .map_or(ThreadResponse::ShutdownClient, |h| h(other)),
        };
        tracing::error!(thread = index, ?response, "stream thread failed: {error}");
        match response {
            ThreadResponse::ReplaceThread if index != usize::MAX => {
                launcher.spawn(index, &mut threads);
            }
            ThreadResponse::ShutdownApplication if launcher.request_application_shutdown(index) => {
                // The other threads stop when the group's next assignment says so.
                launcher.shared.set(State::PendingError);
                stopping = true;
                outcome = Err(error);
            }
            _ => {
                launcher.shared.set(State::PendingError);
                let _ = stop.send(true);
                stopping = true;
                outcome = Err(error);
            }
        }
    }
    if stopping {
        launcher.shared.set(State::Error);
    }
    outcome
}
