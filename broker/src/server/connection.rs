//! One client connection. The reader decodes each frame and starts its request in order
//! (appends happen here, so a producer's batches keep their order); each reply is handed, in
//! order, to the writer, which awaits them one after the other and writes the responses. At
//! most `max_in_flight_per_connection` requests are under way at once. Stored batches in a
//! fetch response go from the segment file to the socket with `sendfile`.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncWriteExt, BufWriter, Interest};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::frame::FrameReader;
use crate::handler::{self, Part, ProtocolError, Reply, Response};
use crate::state::BrokerState;
use crate::storage::FileRange;

/// A response on its way to the writer.
enum Outgoing {
    Ready(Bytes),
    Pending(JoinHandle<Result<Response, ProtocolError>>),
}

pub(super) async fn run(stream: TcpStream, peer: SocketAddr, state: Arc<BrokerState>) {
    let (read_half, write_half) = stream.into_split();
    let (tx, rx) = mpsc::channel(state.config.max_in_flight_per_connection.max(1));
    let writer = tokio::spawn(write_responses(write_half, rx, peer));
    let mut frames = FrameReader::new(
        read_half,
        state.config.socket_request_max_bytes,
        state.config.connections_max_idle,
    );
    loop {
        let frame = match frames.next().await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "closing connection");
                break;
            }
        };
        let outgoing = match handler::handle(&state, frame, peer) {
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
        let response = match outgoing {
            Outgoing::Ready(bytes) => Response::Frame(bytes),
            Outgoing::Pending(task) => match task.await {
                Ok(Ok(response)) => response,
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
        let written = match response {
            Response::Frame(bytes) => writer.write_all(&bytes).await,
            Response::Parts(parts) => write_parts(&mut writer, parts).await,
        };
        if let Err(e) = written {
            tracing::debug!(%peer, error = %e, "write failed; closing connection");
            return;
        }
        // Write out once nothing else is ready to go with it.
        if rx.is_empty() && writer.flush().await.is_err() {
            return;
        }
    }
    let _ = writer.flush().await;
}

async fn write_parts(
    writer: &mut BufWriter<tokio::net::tcp::OwnedWriteHalf>,
    parts: Vec<Part>,
) -> std::io::Result<()> {
    for part in parts {
        match part {
            Part::Bytes(bytes) => writer.write_all(&bytes).await?,
            Part::File(range) => {
                writer.flush().await?;
                send_file(writer.get_ref().as_ref(), &range).await?;
            }
        }
    }
    Ok(())
}

/// Sends a file range to the socket from the page cache. A file shorter than the range would
/// leave the frame short, so it is an error that closes the connection.
async fn send_file(stream: &TcpStream, range: &FileRange) -> std::io::Result<()> {
    let mut offset = range.position as i64;
    let end = offset + range.len as i64;
    while offset < end {
        stream.writable().await?;
        let remaining = (end - offset) as usize;
        let sent = stream.try_io(Interest::WRITABLE, || {
            nix::sys::sendfile::sendfile64(stream, &*range.file, Some(&mut offset), remaining)
                .map_err(std::io::Error::from)
        });
        match sent {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "a segment file ended inside a fetch response",
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
