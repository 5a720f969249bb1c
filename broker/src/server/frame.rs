//! Request framing: a big-endian i32 size, then that many bytes. The size is checked against
//! the limit before anything is read or allocated, and the buffer grows only as bytes arrive,
//! so a peer that announces a large frame and sends little costs little.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Why no frame could be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The announced size is negative or above the limit.
    #[error("a frame of {size} bytes is refused (the limit is {limit})")]
    TooLarge {
        /// The announced size.
        size: i64,
        /// The limit.
        limit: usize,
    },
    /// The connection ended inside a frame.
    #[error("the connection closed inside a frame")]
    Truncated,
    /// The socket failed.
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads one frame's body; `None` when the peer closed the connection between frames.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> Result<Option<Bytes>, FrameError> {
    let mut size = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = reader.read(&mut size[got..]).await?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(FrameError::Truncated)
            };
        }
        got += n;
    }
    let size = i32::from_be_bytes(size);
    if size < 0 || size as usize > limit {
        return Err(FrameError::TooLarge {
            size: i64::from(size),
            limit,
        });
    }
    let size = size as usize;
    let mut body = BytesMut::with_capacity(size.min(64 * 1024));
    while body.len() < size {
        if body.capacity() == body.len() {
            body.reserve((size - body.len()).min(body.len().max(64 * 1024)));
        }
        let want = size - body.len();
        let n = (&mut *reader).take(want as u64).read_buf(&mut body).await?;
        if n == 0 {
            return Err(FrameError::Truncated);
        }
    }
    Ok(Some(body.freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_are_read_whole_and_limits_hold() {
        let mut input: &[u8] = &[0, 0, 0, 3, b'a', b'b', b'c', 0, 0, 0, 0];
        assert_eq!(
            read_frame(&mut input, 10).await.unwrap().unwrap(),
            &b"abc"[..]
        );
        assert_eq!(read_frame(&mut input, 10).await.unwrap().unwrap(), &b""[..]);
        assert!(read_frame(&mut input, 10).await.unwrap().is_none());

        let mut big: &[u8] = &[0, 0, 0, 11, 1];
        assert!(matches!(
            read_frame(&mut big, 10).await,
            Err(FrameError::TooLarge { size: 11, .. })
        ));
        let mut negative: &[u8] = &[0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            read_frame(&mut negative, 10).await,
            Err(FrameError::TooLarge { size: -1, .. })
        ));
        let mut cut: &[u8] = &[0, 0, 0, 5, 1, 2];
        assert!(matches!(
            read_frame(&mut cut, 10).await,
            Err(FrameError::Truncated)
        ));
        let mut cut_size: &[u8] = &[0, 0];
        assert!(matches!(
            read_frame(&mut cut_size, 10).await,
            Err(FrameError::Truncated)
        ));
    }

    #[tokio::test]
    async fn a_large_frame_arriving_in_pieces_is_assembled() {
        let body: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        let mut input = (body.len() as i32).to_be_bytes().to_vec();
        input.extend_from_slice(&body);
        let (mut client, mut server) = tokio::io::duplex(1000);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            client.write_all(&input).await.unwrap();
        });
        let frame = read_frame(&mut server, 1 << 20).await.unwrap().unwrap();
        assert_eq!(&frame[..], &body[..]);
        writer.await.unwrap();
    }
}
