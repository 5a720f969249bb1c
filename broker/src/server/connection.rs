//! One client connection. The reader decodes each frame and starts its request in order
//! (appends happen here, so a producer's batches keep their order); each reply is handed, in
//! order, to the writer, which awaits them one after the other and writes the responses. At
//! most `max_in_flight_per_connection` requests are under way at once.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::frame::read_frame;
use crate::handler::{self, ProtocolError, Reply};
use crate::state::BrokerState;

/// A response on its way to the writer.
enum Outgoing {
    Ready(Bytes),
    Pending(JoinHandle<Result<Bytes, ProtocolError>>),
}

pub(super) async fn run(stream: TcpStream, peer: SocketAddr, state: Arc<BrokerState>) {
    let (read_half, write_half) = stream.into_split();
    let (tx, rx) = mpsc::channel(state.config.max_in_flight_per_connection.max(1));
    let writer = tokio::spawn(write_responses(write_half, rx, peer));
    let mut reader = BufReader::with_capacity(64 * 1024, read_half);
    let limit = state.config.socket_request_max_bytes;
    loop {
        let frame = match read_frame(&mut reader, limit).await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "closing connection");
                break;
            }
        };
        let outgoing = match handler::handle(&state, frame) {
            Ok(Reply::Ready(bytes)) => Outgoing::Ready(bytes),
            Ok(Reply::Later(future)) => Outgoing::Pending(tokio::spawn(future)),
            Ok(Reply::Nothing) => continue,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "closing connection");
                break;
            }
        };
        if tx.send(outgoing).await.is_err() {
            break; // the writer stopped: the peer is gone
        }
    }
    // Let the writer finish the responses already under way, then close.
    drop(tx);
    let _ = writer.await;
}

async fn write_responses(
    write_half: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::Receiver<Outgoing>,
    peer: SocketAddr,
) {
    let mut writer = BufWriter::with_capacity(64 * 1024, write_half);
    while let Some(outgoing) = rx.recv().await {
        let bytes = match outgoing {
            Outgoing::Ready(bytes) => bytes,
            Outgoing::Pending(task) => match task.await {
                Ok(Ok(bytes)) => bytes,
                Ok(Err(e)) => {
                    tracing::error!(%peer, error = %e, "closing connection");
                    return;
                }
                Err(e) => {
                    tracing::error!(%peer, error = %e, "a request task failed; closing connection");
                    return;
                }
            },
        };
        if writer.write_all(&bytes).await.is_err() {
            return;
        }
        // Write out once nothing else is ready to go with it.
        if rx.is_empty() && writer.flush().await.is_err() {
            return;
        }
    }
    let _ = writer.flush().await;
}
