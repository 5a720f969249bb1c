//! Reading request frames off a connection with the frame decoder both sides share
//! (`eddy_core::wire::frame`): the announced size is checked against
//! `socket.request.max.bytes` before anything is read for it, the buffer grows only as bytes
//! arrive, and a connection from which nothing arrives for `connections.max.idle.ms` is
//! closed.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use eddy_core::wire::frame::{FrameDecoder, FrameTooLarge};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Why no frame could be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The announced size is negative or above the limit.
    #[error(transparent)]
    TooLarge(#[from] FrameTooLarge),
    /// The connection ended inside a frame.
    #[error("the connection closed inside a frame")]
    Truncated,
    /// Nothing arrived for the idle limit.
    #[error("nothing arrived for {0:?}")]
    Idle(Duration),
    /// The socket failed.
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The frames of one connection, read in order.
pub(crate) struct FrameReader<R> {
    reader: R,
    buf: BytesMut,
    decoder: FrameDecoder,
    idle: Duration,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Frames of at most `limit` bytes from `reader`, which may be silent for `idle` at most.
    pub(crate) fn new(reader: R, limit: usize, idle: Duration) -> Self {
        Self {
            reader,
            buf: BytesMut::new(),
            decoder: FrameDecoder::new(limit),
            idle,
        }
    }

    /// The next frame's body; `None` when the peer closed the connection between frames.
    pub(crate) async fn next(&mut self) -> Result<Option<Bytes>, FrameError> {
        loop {
            if let Some(frame) = self.decoder.decode(&mut self.buf)? {
                return Ok(Some(frame));
            }
            self.buf.reserve(self.decoder.room(&self.buf));
            let read = tokio::time::timeout(self.idle, self.reader.read_buf(&mut self.buf));
            match read.await {
                Err(_) => return Err(FrameError::Idle(self.idle)),
                Ok(Ok(0)) if self.buf.is_empty() => return Ok(None),
                Ok(Ok(0)) => return Err(FrameError::Truncated),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Duration = Duration::from_secs(600);

    #[tokio::test]
    async fn frames_are_read_whole_and_limits_hold() {
        let input: &[u8] = &[0, 0, 0, 3, b'a', b'b', b'c', 0, 0, 0, 0];
        let mut frames = FrameReader::new(input, 10, IDLE);
        assert_eq!(frames.next().await.unwrap().unwrap(), &b"abc"[..]);
        assert_eq!(frames.next().await.unwrap().unwrap(), &b""[..]);
        assert!(frames.next().await.unwrap().is_none());

        let big: &[u8] = &[0, 0, 0, 11, 1];
        assert!(matches!(
            FrameReader::new(big, 10, IDLE).next().await,
            Err(FrameError::TooLarge(FrameTooLarge { size: 11, .. }))
        ));
        let negative: &[u8] = &[0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            FrameReader::new(negative, 10, IDLE).next().await,
            Err(FrameError::TooLarge(FrameTooLarge { size: -1, .. }))
        ));
        let cut: &[u8] = &[0, 0, 0, 5, 1, 2];
        assert!(matches!(
            FrameReader::new(cut, 10, IDLE).next().await,
            Err(FrameError::Truncated)
        ));
        let cut_size: &[u8] = &[0, 0];
        assert!(matches!(
            FrameReader::new(cut_size, 10, IDLE).next().await,
            Err(FrameError::Truncated)
        ));
    }

    #[tokio::test]
    async fn a_large_frame_arriving_in_pieces_is_read_whole() {
        let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut input = i32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
        input.extend_from_slice(&body);
        let (mut client, server) = tokio::io::duplex(4096);
        let writer =
            tokio::spawn(
                async move { tokio::io::AsyncWriteExt::write_all(&mut client, &input).await },
            );
        let frame = FrameReader::new(server, 1 << 20, IDLE)
            .next()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(frame, body);
        writer.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_peer_is_idle_after_the_limit() {
        let (_client, server) = tokio::io::duplex(64);
        let idle = Duration::from_secs(600);
        let started = tokio::time::Instant::now();
        let read = FrameReader::new(server, 1 << 20, idle).next().await;
        assert!(matches!(read, Err(FrameError::Idle(_))));
        assert_eq!(started.elapsed(), idle);
    }
}
