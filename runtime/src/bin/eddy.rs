//! The `eddy` command-line tool: `eddy broker`, `bench`, `groups`, `topics`, `transactions`,
//! `produce` and `consume` (see `eddy --help`); its code is the library's `cli` module.
//!
//! The command allocates with jemalloc, set up as the book's state chapter advises an
//! application with large state to be: one arena, a background thread that gives freed pages
//! back to the system, and freed pages kept for about 100 ms ([`malloc_conf`]). Measured
//! with `eddy bench streams` over 1M keys, it counts 30% more records a second than on
//! glibc's malloc (`MALLOC_ARENA_MAX=2`), and over 10M keys it holds less. The environment
//! variable `_RJEM_MALLOC_CONF` overrides any of these settings.

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read when it starts (its `malloc_conf`, under the prefix the
/// allocator's crate gives its symbols).
#[cfg(not(target_env = "msvc"))]
#[allow(unsafe_code, non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8; 69] =
    b"narenas:1,background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0\0";

fn main() -> std::process::ExitCode {
    eddy::cli::main()
}
