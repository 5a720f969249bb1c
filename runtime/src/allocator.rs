//! glibc's malloc under the state memory budget. glibc raises its mmap threshold each time a
//! block it mapped is freed (up to 32 MiB), after which blocks of that size come from its
//! heaps, and a heap gives memory back to the system only from its top. A stream thread frees
//! such blocks all the time (a commit's flushed records, a fetch's answer, sled's 512 KiB IO
//! buffers), and sled's page cache frees a page's old version each time it is rewritten, so
//! the heaps fill with holes between long-lived entries. An application's
//! [`Streams`](crate::app::Streams) therefore holds the threshold where it starts, unless the
//! process was given one of its own (`MALLOC_MMAP_THRESHOLD_`, or the tunable in
//! `GLIBC_TUNABLES`), and the thread that applies checkpoints gives the heaps' free pages back
//! (`malloc_trim`) at most once a second. Measured at 10M keys of count state with the
//! default budget of 256 MiB (`eddy bench streams`, `MALLOC_ARENA_MAX=2`): 437–504 MiB
//! resident with neither, 322–331 MiB with the threshold held, 295 MiB with both. Elsewhere
//! than glibc nothing is changed.

/// glibc's first mmap threshold: blocks from this size up are mapped on their own and given
/// back to the system when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 128 * 1024;

/// Holds glibc's mmap threshold at its first value for the rest of the process, unless the
/// process's environment sets it. Returns whether it did.
pub(crate) fn hold_mmap_threshold() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static HELD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HELD.get_or_init(|| {
            if set_by_environment(|name| std::env::var_os(name)) {
                return false;
            }
            // SAFETY: mallopt only changes a parameter of the allocator, under the
            // allocator's own lock; it is safe to call at any time from any thread.
            #[allow(unsafe_code)]
            let changed = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
            changed == 1
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Gives the system the pages of what glibc's heaps hold free (`malloc_trim`), at most once
/// a second however often it is called: what sled's page cache frees as it rewrites pages
/// leaves holes in the heaps, which glibc would otherwise keep resident.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::sync::Mutex;
        use std::time::Duration;

        use crate::time::Instant;
        static LAST: Mutex<Option<Instant>> = Mutex::new(None);
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_some_and(|at| at.elapsed() < Duration::from_secs(1)) {
            return;
        }
        *last = Some(Instant::now());
        // SAFETY: malloc_trim only returns free pages of the heaps to the system, under the
        // allocator's own locks; it is safe to call at any time from any thread.
        #[allow(unsafe_code)]
        unsafe {
            libc::malloc_trim(0)
        };
    }
}

/// Whether the environment (read through `var`) gives glibc an mmap threshold of its own.
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
fn set_by_environment(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    var("MALLOC_MMAP_THRESHOLD_").is_some()
        || var("GLIBC_TUNABLES").is_some_and(|tunables| {
            tunables
                .to_string_lossy()
                .contains("glibc.malloc.mmap_threshold")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn environment<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn a_threshold_the_environment_sets_is_left_alone() {
        assert!(!set_by_environment(environment(&[])));
        assert!(!set_by_environment(environment(&[(
            "GLIBC_TUNABLES",
            "glibc.malloc.arena_max=2"
        )])));
        assert!(!set_by_environment(environment(&[(
            "MALLOC_ARENA_MAX",
            "2"
        )])));
        assert!(set_by_environment(environment(&[(
            "MALLOC_MMAP_THRESHOLD_",
            "65536"
        )])));
        assert!(set_by_environment(environment(&[(
            "GLIBC_TUNABLES",
            "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=65536"
        )])));
    }
}
