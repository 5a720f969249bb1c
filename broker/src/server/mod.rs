//! The network side: a listener accepting connections, and per connection a reader that
//! decodes frames and starts each request in order, and a writer that sends the responses in
//! the same order. A connection that sends something malformed is closed with a logged
//! reason; nothing else is affected.

mod connection;
mod frame;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::state::BrokerState;

/// Accepts connections until `shutdown` says stop, then closes them all.
pub(crate) async fn serve(
    listener: TcpListener,
    state: Arc<BrokerState>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let state = Arc::clone(&state);
                    connections.spawn(connection::run(stream, peer, state));
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    connections.shutdown().await;
}
