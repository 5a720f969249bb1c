//! [`Streams`]: a topology running as an application, Kafka Streams' `KafkaStreams`. It
//! starts the embedded broker when no `bootstrap.servers` is set, creates the internal
//! topics, and runs `num.stream.threads` stream threads as members of the application's
//! consumer group, their tasks' state in sled under `state.dir/<application.id>/`. Its
//! [`State`] moves as Kafka's does, and a listener hears every change.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eddy_core::serde::Serde;
use eddy_core::streams::Topology;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use super::metrics::{MetricsSnapshot, StreamsMetrics};
use super::query::{Hosted, KeyQueryMetadata, KeyValueView, QueryError, Queryable, WindowView};
use super::supervisor::{self, Launcher, ThreadResponse, UncaughtErrorHandler};
use super::thread::{self, Instance, ThreadError};
use super::{create_internal_topics, Bootstrap, ConfigError, StartError, StreamsConfig};
use crate::client::{Admin, ClientError};
#[cfg(feature = "embedded")]
use crate::embedded::EmbeddedBroker;
use crate::store::SledStores;

/// Where an application is in its life (Kafka Streams' `KafkaStreams.State`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Built, not started.
    Created,
    /// Started; its threads are joining the group or taking up tasks.
    Rebalancing,
    /// Every thread has its tasks.
    Running,
    /// Closing.
    PendingShutdown,
    /// Closed.
    NotRunning,
    /// A thread failed: the instance is stopping ([`State::Error`] follows).
    PendingError,
    /// A thread failed; the application stopped.
    Error,
}

/// Told of each change of state: the new one and the one before.
pub type StateListener = Box<dyn Fn(State, State) + Send + Sync>;

/// The state of an instance, shared with its supervisor.
pub(crate) struct Shared {
    state: Mutex<State>,
    listener: Mutex<Option<StateListener>>,
}

impl Shared {
    pub(crate) fn set(&self, next: State) {
        let previous = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::replace(&mut *state, next)
        };
        if previous != next {
            if let Some(listener) = &*self.listener.lock().unwrap_or_else(|e| e.into_inner()) {
                listener(next, previous);
            }
        }
    }

    pub(crate) fn get(&self) -> State {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Why an application did not close cleanly.
#[derive(Debug, thiserror::Error)]
pub enum CloseError {
    /// A thread had failed, or failed while closing.
    #[error(transparent)]
    Thread(#[from] ThreadError),
    /// The threads did not stop within the timeout.
    #[error("the stream threads did not stop within {0:?}")]
    TimedOut(Duration),
    /// The embedded broker did not stop cleanly.
    #[error("stopping the embedded broker: {0}")]
    Broker(std::io::Error),
}

/// A streams application.
pub struct Streams {
    topology: Arc<Topology>,
    config: StreamsConfig,
    shared: Arc<Shared>,
    shutdown: Option<Arc<watch::Sender<bool>>>,
    supervisor: Option<JoinHandle<Result<(), ThreadError>>>,
    uncaught: Option<UncaughtErrorHandler>,
    queryable: Option<Queryable>,
    metrics: Arc<StreamsMetrics>,
    #[cfg(feature = "embedded")]
    embedded: Option<EmbeddedBroker>,
    bootstrap: Option<String>,
}

impl std::fmt::Debug for Streams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streams")
            .field("application_id", &self.config.application_id)
            .field("state", &self.state())
            .field("bootstrap", &self.bootstrap)
            .finish_non_exhaustive()
    }
}

impl Streams {
    /// The application running `topology` with `config`.
    pub fn new(topology: Topology, config: StreamsConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            topology: Arc::new(topology),
            config,
            shared: Arc::new(Shared {
                state: Mutex::new(State::Created),
                listener: Mutex::new(None),
            }),
            shutdown: None,
            supervisor: None,
            uncaught: None,
            queryable: None,
            metrics: Arc::new(StreamsMetrics::default()),
            #[cfg(feature = "embedded")]
            embedded: None,
            bootstrap: None,
        })
    }

    /// Hears every change of state from now on.
    pub fn set_state_listener(&self, listener: impl Fn(State, State) + Send + Sync + 'static) {
        *self
            .shared
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(Box::new(listener));
    }

    /// Decides what happens when a stream thread stops on an error (Kafka Streams'
    /// `setUncaughtExceptionHandler`); without one the instance shuts down
    /// ([`ThreadResponse::ShutdownClient`]). Set it before [`Self::start`].
    pub fn set_uncaught_error_handler(
        &mut self,
        handler: impl Fn(&ThreadError) -> ThreadResponse + Send + Sync + 'static,
    ) {
        self.uncaught = Some(Arc::new(handler));
    }

    fn queryable(&self) -> Result<&Queryable, QueryError> {
        match (self.state(), &self.queryable) {
            (State::Running | State::Rebalancing, Some(q)) => Ok(q),
            (state, _) => Err(QueryError::NotRunning(format!("{state:?}"))),
        }
    }

    /// A read-only view of the key-value store `name` across the tasks this instance runs:
    /// what the stores committed (Kafka Streams' `store()` with a key-value store type).
    pub fn key_value_store<K: 'static, V: 'static>(
        &self,
        name: &str,
    ) -> Result<KeyValueView<K, V>, QueryError> {
        self.queryable()?.key_value(name)
    }

    /// A read-only view of the window store `name` across the tasks this instance runs.
    pub fn window_store<K: 'static, V: 'static>(
        &self,
        name: &str,
    ) -> Result<WindowView<K, V>, QueryError> {
        self.queryable()?.window(name)
    }

    /// Which instance (`application.server`) runs the task holding `key` of store `store`,
    /// and which keep standbys of it; `keys` serializes the key as the store's input is
    /// keyed.
    pub fn query_metadata_for_key<K: 'static>(
        &self,
        store: &str,
        key: &K,
        keys: &dyn Serde<Value = K>,
    ) -> Result<KeyQueryMetadata, QueryError> {
        self.queryable()?.metadata_for_key(store, key, keys)
    }

    /// The instance's figures now: records processed, commits, lag, restoration, dropped
    /// records, rebalances (also published through the `metrics` facade).
    pub fn metrics(&self) -> MetricsSnapshot {
        self.metrics.snapshot()
    }

    /// Where the application is in its life.
    pub fn state(&self) -> State {
        self.shared.get()
    }

    /// The brokers the application uses (the embedded one's address once started).
    pub fn bootstrap(&self) -> Option<&str> {
        self.bootstrap.as_deref()
    }

    /// Starts the application: the embedded broker if it has no other, its internal topics,
    /// and its stream threads. Returns once the threads run; they join the group in the
    /// background ([`State::Rebalancing`], then [`State::Running`]).
    pub async fn start(&mut self) -> Result<(), StartError> {
        if self.state() != State::Created {
            return Err(StartError::NotCreated(self.state()));
        }
        if crate::allocator::hold_mmap_threshold() {
            tracing::debug!("glibc's mmap threshold held at its first value");
        }
        let dir = self.config.application_state_dir();
        let bootstrap = match &self.config.bootstrap {
            Bootstrap::Servers(servers) => servers.join(","),
            Bootstrap::Embedded => self.start_embedded(&dir).await?,
        };
        self.bootstrap = Some(bootstrap.clone());
        let admin_config = self
            .config
            .admin_config(&bootstrap)
            .map_err(ClientError::from)?;
        let admin = Admin::new(admin_config).await?;
        create_internal_topics(&admin, &self.topology, &self.config).await?;
        let page_cache = self.config.state_memory().page_cache;
        let stores = Arc::new(SledStores::with_page_cache(
            &dir,
            u64::try_from(page_cache).unwrap_or(u64::MAX),
        ));
        let database_dir = stores.database_dir();
        // Opening the database reads and writes files: off the async workers.
        let on_disk = {
            let stores = stores.clone();
            crate::blocking::unblocked(move || stores.open().map(|()| stores.offsets_on_disk()))
                .await
                .map_err(|e| StartError::StateDir {
                    dir: database_dir,
                    source: match e {
                        sled::Error::Io(e) => e,
                        other => std::io::Error::other(other.to_string()),
                    },
                })?
        };
        let on_disk_sums = thread::on_disk_sums(on_disk);
        let (shutdown, watch) = watch::channel(false);
        let process = process_id(&dir).map_err(|source| StartError::StateDir {
            dir: dir.clone(),
            source,
        })?;
        self.shared.set(State::Rebalancing);
        let hosted = Arc::new(Hosted::default());
        self.queryable = Some(Queryable {
            topology: self.topology.clone(),
            application_id: self.config.application_id.clone(),
            stores: stores.clone(),
            hosted: hosted.clone(),
        });
        let instance = Instance {
            topology: self.topology.clone(),
            config: self.config.clone(),
            bootstrap,
            stores,
            on_disk_sums,
            hosted,
            metrics: self.metrics.clone(),
            shutdown: watch,
            process,
        };
        let launcher = Arc::new(Launcher::new(instance, self.shared.clone()));
        let mut threads = JoinSet::new();
        for index in 0..self.config.num_stream_threads {
            launcher.spawn(index, &mut threads);
        }
        let shutdown = Arc::new(shutdown);
        self.supervisor = Some(tokio::spawn(supervisor::supervise(
            launcher,
            threads,
            self.uncaught.clone(),
            shutdown.clone(),
        )));
        self.shutdown = Some(shutdown);
        Ok(())
    }

    /// Starts the embedded broker, its log beside the stores it backs (so the two stay in
    /// step), and returns its address.
    #[cfg(feature = "embedded")]
    async fn start_embedded(&mut self, dir: &Path) -> Result<String, StartError> {
        let log = dir.join("broker");
        let broker = EmbeddedBroker::start_in(&log)
            .await
            .map_err(|source| StartError::StateDir { dir: log, source })?;
        let bootstrap = broker.bootstrap();
        self.embedded = Some(broker);
        Ok(bootstrap)
    }

    /// Without the embedded broker, an application needs `bootstrap.servers`.
    #[cfg(not(feature = "embedded"))]
    async fn start_embedded(&mut self, _dir: &Path) -> Result<String, StartError> {
        Err(StartError::Client(
            crate::client::ConfigError::rejected(
                "bootstrap.servers",
                "is not set, and this build has no embedded broker",
            )
            .into(),
        ))
    }

    /// Stops the threads (each commits what it processed and closes its tasks), waiting up
    /// to `timeout`, then the embedded broker.
    pub async fn close(&mut self, timeout: Duration) -> Result<(), CloseError> {
        // Queries end with the application; the stores' databases close with its threads.
        self.queryable = None;
        let failed = matches!(self.state(), State::Error | State::PendingError);
        if !failed {
            self.shared.set(State::PendingShutdown);
        }
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(true);
        }
        let mut outcome = Ok(());
        if let Some(supervisor) = self.supervisor.take() {
            match tokio::time::timeout(timeout, supervisor).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => outcome = Err(CloseError::Thread(e)),
                Ok(Err(e)) => {
                    outcome = Err(CloseError::Thread(ThreadError::Assignment(format!(
                        "the stream threads' supervisor panicked: {e}"
                    ))))
                }
                Err(_) => outcome = Err(CloseError::TimedOut(timeout)),
            }
        }
        #[cfg(feature = "embedded")]
        if let Some(broker) = self.embedded.take() {
            if let Err(e) = broker.shutdown().await {
                outcome = outcome.and(Err(CloseError::Broker(e)));
            }
        }
        if !failed && self.state() != State::Error {
            self.shared.set(State::NotRunning);
        }
        outcome
    }

    /// Deletes the application's local state (its stores, and the embedded broker's log);
    /// only while it does not run.
    pub fn cleanup(&self) -> std::io::Result<()> {
        if matches!(
            self.state(),
            State::Rebalancing | State::Running | State::PendingShutdown
        ) {
            return Err(std::io::Error::other(
                "the application is running: close it before cleaning up its state",
            ));
        }
        match std::fs::remove_dir_all(self.config.application_state_dir()) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

/// The id of this instance: kept in its state directory, so that an instance restarted
/// over the same state is the same instance to the group's assignor and to the
/// transaction coordinator (its transactional ids fence what a crashed run left open).
fn process_id(dir: &Path) -> std::io::Result<String> {
    const FILE: &str = "eddy-process-id";
    let path = dir.join(FILE);
    if let Ok(text) = std::fs::read_to_string(&path) {
        let id = text.trim();
        let valid = !id.is_empty()
            && id.len() <= 64
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if valid {
            return Ok(id.to_string());
        }
    }
    std::fs::create_dir_all(dir)?;
    let pid = std::process::id();
    let random = std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), pid);
    let id = format!("{pid:x}-{random:x}");
    std::fs::write(&path, &id)?;
    Ok(id)
}
