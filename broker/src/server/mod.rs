//! The network side: a listener accepting connections, and per connection a reader that
//! decodes frames and starts each request in order, and a writer that sends the responses in
//! the same order. A connection that sends something malformed, or nothing for
//! `connections.max.idle.ms`, is closed with a logged reason; nothing else is affected. An
//! address may hold `max.connections.per.ip` connections at once; more are closed as they
//! arrive.

mod connection;
mod frame;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

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
    let open = Arc::new(OpenConnections::default());
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Some(slot) = open.take(peer.ip(), state.config.max_connections_per_ip)
                    else {
                        tracing::warn!(%peer, "closing connection: max.connections.per.ip reached");
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let state = Arc::clone(&state);
                    connections.spawn(async move {
                        connection::run(stream, peer, state).await;
                        drop(slot);
                    });
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

/// How many connections each address has open.
#[derive(Debug, Default)]
struct OpenConnections(Mutex<HashMap<IpAddr, usize>>);

impl OpenConnections {
    /// A place for one more connection from `ip`, if it has fewer than `limit`; the place is
    /// given back when the slot is dropped.
    fn take(self: &Arc<Self>, ip: IpAddr, limit: usize) -> Option<ConnectionSlot> {
        let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let count = open.entry(ip).or_default();
        if *count >= limit {
            return None;
        }
        *count += 1;
        Some(ConnectionSlot {
            open: Arc::clone(self),
            ip,
        })
    }
}

/// One open connection of an address, counted until dropped.
struct ConnectionSlot {
    open: Arc<OpenConnections>,
    ip: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.open.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}
