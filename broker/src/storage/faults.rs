//! Storage faults injected on purpose, for tests of what a slow or failing disk does to the
//! broker: a delay before every fsync or append (a slow disk), fsyncs that fail, appends that
//! find the disk full.
//! Without the `failpoints` feature nothing can be injected and every check is a no-op.

use std::io;

/// The faults a broker's partitions are to meet, shared by all of them.
#[derive(Debug, Clone, Default)]
pub struct StorageFaults {
    #[cfg(any(test, feature = "failpoints"))]
    injected: std::sync::Arc<std::sync::Mutex<Injected>>,
}

#[cfg(any(test, feature = "failpoints"))]
#[derive(Debug, Default)]
struct Injected {
    fsync_delay: std::time::Duration,
    write_delay: std::time::Duration,
    failing_fsyncs: bool,
    full_disk: bool,
}

impl StorageFaults {
    /// Runs before an fsync, on the thread that will fsync.
    pub(crate) fn before_fsync(&self) -> io::Result<()> {
        #[cfg(any(test, feature = "failpoints"))]
        {
            let (delay, fail) = {
                let injected = self.lock();
                (injected.fsync_delay, injected.failing_fsyncs)
            };
            std::thread::sleep(delay);
            if fail {
                return Err(io::Error::other("injected: fsync failed"));
            }
        }
        Ok(())
    }

    /// Runs before an append writes anything, under the partition's lock, as a write to a
    /// slow disk would hold it.
    pub(crate) fn before_append(&self) -> io::Result<()> {
        #[cfg(any(test, feature = "failpoints"))]
        {
            let (delay, full) = {
                let injected = self.lock();
                (injected.write_delay, injected.full_disk)
            };
            std::thread::sleep(delay);
            if full {
                return Err(io::Error::from_raw_os_error(28)); // ENOSPC
            }
        }
        Ok(())
    }
}

#[cfg(any(test, feature = "failpoints"))]
impl StorageFaults {
    fn lock(&self) -> std::sync::MutexGuard<'_, Injected> {
        self.injected.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every fsync from now on first waits `delay`: a slow disk.
    pub fn set_fsync_delay(&self, delay: std::time::Duration) {
        self.lock().fsync_delay = delay;
    }

    /// Every append from now on first waits `delay`, holding its partition: a disk slow to
    /// write.
    pub fn set_write_delay(&self, delay: std::time::Duration) {
        self.lock().write_delay = delay;
    }

    /// Every fsync from now on fails (`true`), or works again (`false`).
    pub fn fail_fsyncs(&self, fail: bool) {
        self.lock().failing_fsyncs = fail;
    }

    /// Every append from now on fails with "no space left on device" (`true`), or works
    /// again (`false`).
    pub fn fill_disk(&self, full: bool) {
        self.lock().full_disk = full;
    }
}
