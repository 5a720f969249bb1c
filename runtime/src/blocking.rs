//! Work that blocks a thread — opening sled databases, which reads and writes files and may
//! wait for another database's lock — run on tokio's blocking threads, so that the async
//! workers that drive the clients and the stream threads never wait on a disk.

/// Runs `work` on a blocking thread and returns what it returns; a panic in it goes on in
/// the caller, as if `work` had run there.
pub(crate) async fn unblocked<T, F>(work: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // Cancelled: only when the runtime shuts down, which drops the caller too.
            Err(e) => panic!("blocking work cancelled: {e}"),
        },
    }
}
