//! One client connection. The reader decodes each frame and starts its request in order: a
//! produce's appends end before the next frame is read, so a producer's batches keep their
//! order, and every other request does its work up to its first wait before the next frame is
//! read, so what a coordinator decides (a commit queued, a member gone) is decided in the order
//! the client sent it, as when Kafka serves a connection's requests one at a time. Each reply
//! is handed, in order, to the writer, which awaits them one after the other and writes the
//! responses. At most `max_in_flight_per_connection` requests are under way at once. Stored
//! batches in a fetch response go from the segment file to the socket with `sendfile`.

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::task::Poll;

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
    Answered(Response),
    Pending(JoinHandle<Result<Response, ProtocolError>>),
}

/// Starts a reply that comes later: its future runs now up to its first wait, in the
/// connection's order, and the rest of it as a task of its own.
async fn start_later(
    mut reply: futures::future::BoxFuture<'static, Result<Response, ProtocolError>>,
) -> Result<Outgoing, ProtocolError> {
    match futures::poll!(reply.as_mut()) {
        Poll::Ready(response) => response.map(Outgoing::Answered),
        Poll::Pending => Ok(Outgoing::Pending(tokio::spawn(reply))),
    }
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
        let mut reply = handler::handle(&state, frame, peer);
        // Ends before the next request is read: a producer's appends keep their order.
        while let Ok(Reply::InOrder(work)) = reply {
            reply = work.await;
        }
        let outgoing = match reply {
            Ok(Reply::Ready(bytes)) => Ok(Outgoing::Ready(bytes)),
            Ok(Reply::Later(future)) => start_later(future).await,
            Ok(Reply::Nothing | Reply::InOrder(_)) => continue,
            Err(e) => Err(e),
        };
        let outgoing = match outgoing {
            Ok(outgoing) => outgoing,
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
            Outgoing::Answered(response) => response,
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

/// Sends a file range to the socket from the page cache. `sendfile` reads the file, and a
/// page not in the cache waits for the disk, so each call runs on a blocking thread (with its
/// own handle on the socket) while this task waits for the socket to take more. A file
/// shorter than the range would leave the frame short, so it is an error that closes the
/// connection.
async fn send_file(stream: &TcpStream, range: &FileRange) -> std::io::Result<()> {
    let socket = Arc::new(stream.as_fd().try_clone_to_owned()?);
    let mut offset = range.position as i64;
    let end = offset + range.len as i64;
    while offset < end {
        stream.writable().await?;
        let remaining = (end - offset) as usize;
        let (socket_handle, file) = (Arc::clone(&socket), Arc::clone(&range.file));
        let sent = tokio::task::spawn_blocking(move || {
            let mut at = offset;
            nix::sys::sendfile::sendfile64(&*socket_handle, &*file, Some(&mut at), remaining)
                .map(|_| at)
                .map_err(std::io::Error::from)
        })
        .await
        .map_err(std::io::Error::other)?;
        match sent {
            Ok(at) if at == offset => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "a segment file ended inside a fetch response",
                ))
            }
            Ok(at) => offset = at,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // The socket was full. tokio is told so (for `writable` to wait for room) only
                // from inside `try_io`, by a check of the socket made there: room made since
                // the `sendfile` above is seen, and room made after the check is a readiness
                // event of its own, which `try_io` leaves. Clearing tokio's readiness without
                // that check could drop an event that arrived meanwhile, and with the client
                // waiting for the rest of the response nothing would wake the writer again.
                let _ = stream.try_io(Interest::WRITABLE, || {
                    if has_room(stream)? {
                        Ok(())
                    } else {
                        Err(std::io::ErrorKind::WouldBlock.into())
                    }
                });
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether the socket takes more bytes now (`poll` without waiting).
fn has_room(stream: &TcpStream) -> std::io::Result<bool> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLOUT)];
    let ready = poll(&mut fds, PollTimeout::ZERO).map_err(std::io::Error::from)?;
    let revents = fds[0].revents().unwrap_or(PollFlags::empty());
    // An error or hang-up is "room" too: the next `sendfile` reports it.
    Ok(ready > 0
        && revents.intersects(PollFlags::POLLOUT | PollFlags::POLLERR | PollFlags::POLLHUP))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// The work a later reply does before its first wait is done before the connection reads
    /// its next request; what follows runs on its own.
    #[tokio::test]
    async fn a_later_reply_starts_before_the_next_request_is_read() {
        let steps = Arc::new(AtomicUsize::new(0));
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let reply = {
            let steps = Arc::clone(&steps);
            Box::pin(async move {
                steps.fetch_add(1, Ordering::SeqCst);
                let _ = released.await;
                steps.fetch_add(1, Ordering::SeqCst);
                Ok(Response::Frame(Bytes::from_static(b"answer")))
            })
        };
        let Ok(Outgoing::Pending(task)) = start_later(reply).await else {
            panic!("a reply that waits runs on as a task");
        };
        assert_eq!(steps.load(Ordering::SeqCst), 1, "started in order");
        release.send(()).unwrap();
        assert!(matches!(task.await, Ok(Ok(Response::Frame(_)))));
        assert_eq!(steps.load(Ordering::SeqCst), 2);

        let ready = Box::pin(async { Ok(Response::Frame(Bytes::from_static(b"now"))) });
        assert!(matches!(
            start_later(ready).await,
            Ok(Outgoing::Answered(Response::Frame(_)))
        ));
    }

    /// A file range larger than the socket takes at once reaches a reader that drains it in
    /// small reads, however the socket's room comes and goes, every time: a wake-up of the
    /// sender lost between a full socket and the wait for room would leave it waiting for
    /// good (seen as fetches unanswered until the client's request timeout).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_file_range_reaches_a_slow_reader_whole() {
        use std::io::Write;
        use tokio::io::AsyncReadExt;
        use tokio::net::TcpSocket;

        const LEN: usize = 1 << 20;
        const SENDS: usize = 40;
        let mut file = tempfile::tempfile().unwrap();
        let content: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
        file.write_all(&content).unwrap();
        let range = FileRange {
            file: Arc::new(file),
            position: 0,
            len: LEN as u64,
            end_offset: 0,
        };
        let listener = TcpSocket::new_v4().unwrap();
        listener.set_send_buffer_size(4096).unwrap();
        listener.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = listener.listen(1).unwrap();
        let client = TcpSocket::new_v4().unwrap();
        client.set_recv_buffer_size(4096).unwrap();
        let (client, accepted) = tokio::join!(
            client.connect(listener.local_addr().unwrap()),
            listener.accept()
        );
        let (mut client, (server, _)) = (client.unwrap(), accepted.unwrap());
        let reader = tokio::spawn(async move {
            let mut chunk = vec![0u8; 3000];
            let mut received = Vec::with_capacity(LEN);
            for _ in 0..SENDS {
                received.clear();
                while received.len() < LEN {
                    let want = chunk.len().min(LEN - received.len());
                    let n = client.read(&mut chunk[..want]).await.unwrap();
                    assert!(n > 0, "the sender closed the connection");
                    received.extend_from_slice(&chunk[..n]);
                    tokio::task::yield_now().await;
                }
                assert!(received == content, "a range arrived changed");
            }
        });
        let sender = async {
            for _ in 0..SENDS {
                send_file(&server, &range).await.unwrap();
            }
        };
        // Generous: a lost wake-up never finishes; the bound only turns a hang into a failure.
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            tokio::join!(sender, reader).1.unwrap()
        })
        .await
        .expect("every range was sent and read");
    }
}
