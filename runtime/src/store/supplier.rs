//! [`SledStores`]: the stores of an instance's tasks, every one a tree of one sled database
//! under the application's state directory (`state.dir/<application id>/stores/`), named
//! `<task>/<store>`. One database means one page cache, one flusher thread and one lock for
//! the instance however many tasks it runs; a second instance over the same directory is
//! refused rather than sharing it. State kept by earlier versions, a database per task
//! under `<task>/`, is moved into the instance's database when it is first opened. A task
//! whose stores have all been closed for `state.cleanup.delay.ms` (or that the instance found
//! on disk and never opened) has its trees dropped by [`SledStores::clean_released`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use eddy_core::streams::store::{BytesStore, StoreBuilder, StoreSupplier};

use super::applier::Applier;
use super::sled_store::{
    PageBudget, PageSize, SharedTree, SledBytesStore, TreeShare, CHANGELOG_OFFSET,
};
use crate::time::Instant;

/// The directory of the instance's database, under the application's state directory.
const DATABASE: &str = "stores";

/// How many entries of a task's database of an earlier version are copied at a time.
const COPY_CHUNK: usize = 16 << 10;

/// Supplies each task's stores as trees of the instance's one sled database.
pub struct SledStores {
    dir: PathBuf,
    /// The bytes of sled's page cache.
    page_cache: u64,
    /// What the pages the stores hold beside their bounds may take, every tree together.
    held_pages: Arc<PageBudget>,
    /// The database, opened with the first store or the first look at the state on disk.
    database: Mutex<Option<sled::Db>>,
    /// What the stores over each tree share (its scan lock, its pages' bounds), by task and
    /// store: a query reads a task's store through a store of its own over the same tree.
    tree_shares: TreeShares,
    /// The thread that applies the stores' checkpoints, started with the first store (none
    /// if it could not be: the stores then apply their checkpoints themselves).
    applier: OnceLock<Option<Applier>>,
    /// Which tasks have stores open, and since when the others' state lies unused.
    uses: Arc<Mutex<TaskUses>>,
}

/// What the stores over each tree share, by task and store.
type TreeShares = Arc<Mutex<HashMap<(String, String), SharedTree>>>;

/// The tasks whose state is in use: those with stores open, and since when each of the
/// others has had none.
#[derive(Debug, Default)]
struct TaskUses {
    /// Stores open, by task.
    open: HashMap<String, usize>,
    /// Since when each task with state on disk and no store open has had none.
    released: HashMap<String, Instant>,
    /// Tasks whose state was dropped, until they open stores again.
    cleaned: HashSet<String>,
}

/// A store's hold on its task's state: while a task has one, its trees stay, and so do the
/// pages its trees hold in memory.
#[derive(Debug)]
pub(crate) struct TaskLease {
    task: String,
    uses: Arc<Mutex<TaskUses>>,
    shares: TreeShares,
}

impl Drop for TaskLease {
    fn drop(&mut self) {
        let mut uses = self.uses.lock().unwrap_or_else(|e| e.into_inner());
        let open = uses.open.entry(self.task.clone()).or_insert(1);
        *open -= 1;
        if *open == 0 {
            uses.open.remove(&self.task);
            uses.released.insert(self.task.clone(), Instant::now());
            // The task's last store is closed: its pages leave the budget to the others.
            let shares = self.shares.lock().unwrap_or_else(|e| e.into_inner());
            for ((task, _), share) in shares.iter() {
                if *task == self.task {
                    share.forget_pages();
                }
            }
        }
    }
}

impl std::fmt::Debug for SledStores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledStores")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// The tree of `store` of `task`.
fn tree_name(task: &str, store: &str) -> String {
    format!("{task}/{store}")
}

impl SledStores {
    /// Stores under `dir` (an application's state directory: `state.dir/<application id>`),
    /// with the page cache the default `statestore.memory.max.bytes` leaves sled.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self::with_page_cache(dir, default_page_cache())
    }

    /// Stores under `dir` whose pages in memory take `bytes`: three quarters of it sled's
    /// page cache (its `cache_capacity`: what it counts of the nodes it keeps in memory), a
    /// quarter the pages the stores hold beside their bounds, read without a walk of sled's
    /// tree.
    pub fn with_page_cache(dir: impl Into<PathBuf>, bytes: u64) -> Self {
        let held = bytes / 4;
        Self {
            dir: dir.into(),
            page_cache: bytes - held,
            held_pages: PageBudget::new(usize::try_from(held).unwrap_or(usize::MAX)),
            database: Mutex::new(None),
            tree_shares: TreeShares::default(),
            applier: OnceLock::new(),
            uses: Arc::default(),
        }
    }

    /// Where the instance's database is.
    pub fn database_dir(&self) -> PathBuf {
        self.dir.join(DATABASE)
    }

    /// Opens the database (and moves the state of earlier versions into it): what an
    /// instance does first, so that it does not start over a directory another instance
    /// holds. Waits up to 10 s for a database of the same directory just dropped to let go
    /// of its lock: callers on async workers run it on a blocking thread.
    pub(crate) fn open(&self) -> Result<(), sled::Error> {
        self.database().map(drop)
    }

    /// Opens the database ahead of the stores of `task`, so that creating them finds it
    /// open. Opening reads and writes files (and moves the state of earlier versions into
    /// it), and waits up to 10 s for a database of the same directory just dropped to let go
    /// of its lock: callers on async workers run it on a blocking thread.
    pub(crate) fn open_task(&self, _task: &str) -> Result<(), sled::Error> {
        self.database().map(drop)
    }

    fn database(&self) -> Result<sled::Db, sled::Error> {
        let mut database = self.database.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(db) = &*database {
            return Ok(db.clone());
        }
        let db = open(&self.database_dir(), self.page_cache)?;
        self.move_task_databases(&db)?;
        // The state found on disk lies unused until its task opens stores.
        let now = Instant::now();
        let mut uses = self.lock_uses();
        for task in tasks_of(&db) {
            if !uses.open.contains_key(&task) {
                uses.released.entry(task).or_insert(now);
            }
        }
        drop(uses);
        *database = Some(db.clone());
        Ok(db)
    }

    fn lock_uses(&self) -> std::sync::MutexGuard<'_, TaskUses> {
        self.uses.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A hold on `task`'s state for one of its stores.
    fn lease(&self, task: &str) -> TaskLease {
        let mut uses = self.lock_uses();
        *uses.open.entry(task.to_string()).or_insert(0) += 1;
        uses.released.remove(task);
        uses.cleaned.remove(task);
        TaskLease {
            task: task.to_string(),
            uses: self.uses.clone(),
            shares: self.tree_shares.clone(),
        }
    }

    /// Drops the trees of every task whose stores have all been closed for `delay` (or that
    /// was found on disk that long ago and never opened), as Kafka Streams' state directory
    /// cleaner removes a task's directory `state.cleanup.delay.ms` after it moved away; the
    /// tasks cleaned. A task that comes back later restores its state from its changelogs.
    /// Reads and writes files: callers on async workers run it on a blocking thread.
    pub fn clean_released(&self, delay: Duration) -> Result<Vec<String>, sled::Error> {
        let db = self.database()?;
        let mut uses = self.lock_uses();
        let due: Vec<String> = uses
            .released
            .iter()
            .filter(|(_, since)| since.elapsed() >= delay)
            .map(|(task, _)| task.clone())
            .collect();
        if due.is_empty() {
            return Ok(due);
        }
        let names = db.tree_names();
        let mut shares = self.tree_shares.lock().unwrap_or_else(|e| e.into_inner());
        for task in &due {
            let prefix = tree_name(task, "");
            for name in names.iter().filter(|n| n.starts_with(prefix.as_bytes())) {
                db.drop_tree(name)?;
            }
            shares.retain(|(t, _), _| t != task);
            uses.released.remove(task);
            uses.cleaned.insert(task.clone());
            tracing::info!(
                task,
                "dropped the state of a task not run here for state.cleanup.delay.ms"
            );
        }
        db.flush()?;
        Ok(due)
    }

    /// Whether the state of `task` was dropped (and the task has not opened stores since).
    pub fn is_cleaned(&self, task: &str) -> bool {
        self.lock_uses().cleaned.contains(task)
    }

    /// Moves the databases an earlier version kept per task (`<dir>/<task>/`) into `db`,
    /// each tree whole into `<task>/<store>`; a task's directory is removed once its trees
    /// are copied and on disk, so a crash in between copies them again, whole.
    fn move_task_databases(&self, db: &sled::Db) -> Result<(), sled::Error> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let Ok(task) = entry.file_name().into_string() else {
                continue;
            };
            let path = entry.path();
            if task == DATABASE || !path.join("conf").is_file() {
                continue;
            }
            let old = open(&path, self.page_cache)?;
            let mut copied = 0;
            for name in old.tree_names() {
                let Ok(store) = std::str::from_utf8(&name) else {
                    continue;
                };
                if name == old.name() {
                    continue;
                }
                let tree = db.open_tree(tree_name(&task, store))?;
                tree.clear()?;
                let mut batch = sled::Batch::default();
                let mut held = 0;
                for entry in old.open_tree(&name)?.iter() {
                    let (key, value) = entry?;
                    batch.insert(key, value);
                    held += 1;
                    if held == COPY_CHUNK {
                        tree.apply_batch(std::mem::take(&mut batch))?;
                        held = 0;
                    }
                    copied += 1;
                }
                tree.apply_batch(batch)?;
            }
            db.flush()?;
            drop(old);
            std::fs::remove_dir_all(&path)?;
            tracing::info!(
                task,
                entries = copied,
                "moved a task's state into the instance's database"
            );
        }
        Ok(())
    }

    /// The tasks whose state lies in the database, with the changelog offset each of their
    /// stores reached: what an instance reports so that tasks return to where their state
    /// is. Nothing when the database cannot be opened.
    pub fn offsets_on_disk(&self) -> Vec<(String, Vec<i64>)> {
        let Ok(db) = self.database() else {
            return Vec::new();
        };
        let mut found: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for name in db.tree_names() {
            let Some((task, _)) = std::str::from_utf8(&name)
                .ok()
                .and_then(|name| name.split_once('/'))
            else {
                continue;
            };
            let offsets = found.entry(task.to_string()).or_default();
            let offset = db
                .open_tree(&name)
                .ok()
                .and_then(|tree| tree.get(CHANGELOG_OFFSET).ok()?)
                .and_then(|value| <[u8; 8]>::try_from(&value[..]).ok());
            offsets.extend(offset.map(i64::from_be_bytes));
        }
        found.into_iter().collect()
    }

    /// Writes the stores of `task` to disk once they are dropped (the database holds them
    /// still; the next stores of the task open them again).
    pub fn close(&self, task: &str) -> Result<(), sled::Error> {
        tracing::debug!(task, "writing a closed task's stores to disk");
        let database = self.database.lock().unwrap_or_else(|e| e.into_inner());
        match &*database {
            Some(db) => db.flush().map(|_| ()),
            None => Ok(()),
        }
    }

    fn applier(&self) -> Option<&Applier> {
        self.applier
            .get_or_init(|| match Applier::start() {
                Ok(applier) => Some(applier),
                Err(e) => {
                    tracing::warn!("checkpoints are applied on the stream threads: {e}");
                    None
                }
            })
            .as_ref()
    }
}

/// The tasks with trees in `db`.
fn tasks_of(db: &sled::Db) -> HashSet<String> {
    db.tree_names()
        .iter()
        .filter_map(|name| std::str::from_utf8(name).ok()?.split_once('/'))
        .map(|(task, _)| task.to_string())
        .collect()
}

/// How long an open waits for a database of the same directory, just dropped, to let go
/// of its lock (sled's flusher thread holds it a moment after the drop).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The page cache of stores opened without a memory budget: sled's share of the default
/// `statestore.memory.max.bytes`.
pub(crate) fn default_page_cache() -> u64 {
    let bytes = crate::app::StreamsConfig::new("").state_memory().page_cache;
    u64::try_from(bytes).unwrap_or(u64::MAX)
}

/// Opens the database under `dir` with a page cache of `page_cache` bytes.
pub(crate) fn open(dir: &Path, page_cache: u64) -> Result<sled::Db, sled::Error> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match sled::Config::new()
            .path(dir)
            .cache_capacity(page_cache)
            .open()
        {
            Err(sled::Error::Io(e))
                if e.to_string().contains("could not acquire lock")
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

impl StoreSupplier for SledStores {
    fn inner(&self, task: &str, definition: &StoreBuilder) -> Box<dyn BytesStore> {
        let name = definition.name();
        // Held before the tree is opened: a cleaning then either sees the task in use or
        // has dropped its trees already.
        let lease = self.lease(task);
        let tree = self
            .database()
            .and_then(|db| db.open_tree(tree_name(task, name)));
        let tree = match tree {
            Ok(tree) => tree,
            Err(e) => {
                return Box::new(SledBytesStore::failed(format!(
                    "store {name} of task {task} could not be opened under {}: {e}",
                    self.database_dir().display()
                )))
            }
        };
        let share = self
            .tree_shares
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((task.to_string(), name.to_string()))
            .or_insert_with(|| Arc::new(TreeShare::new(self.held_pages.clone())))
            .clone();
        let store = SledBytesStore::with_page_size(tree, PageSize::default(), share).leased(lease);
        Box::new(match self.applier() {
            Some(applier) => store.with_applier(applier.clone()),
            None => store,
        })
    }
}

#[cfg(test)]
mod tests;
