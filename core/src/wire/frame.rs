//! Kafka's framing, with no I/O: every request and response is a big-endian i32 size, then
//! that many bytes. One decoder serves the broker (requests) and the client (responses).
//!
//! The size a peer announces is checked against a limit before anything is read for it, and
//! the buffer a frame is read into grows only as its bytes arrive: [`FrameDecoder::room`]
//! asks for at most as much again as the frame already holds, so a peer that announces a
//! large frame and sends little costs little.
//!
//! ```
//! use bytes::BytesMut;
//! use eddy_core::wire::frame::FrameDecoder;
//!
//! let decoder = FrameDecoder::new(1 << 20);
//! let mut buf = BytesMut::from(&[0, 0, 0, 3, b'a', b'b'][..]);
//! assert_eq!(decoder.decode(&mut buf).unwrap(), None); // one byte is missing
//! buf.extend_from_slice(b"c");
//! assert_eq!(decoder.decode(&mut buf).unwrap().unwrap(), &b"abc"[..]);
//! ```

use bytes::{Buf, Bytes, BytesMut};

/// Bytes of the size prefix.
pub const SIZE_LEN: usize = 4;

/// The least room a read is given, so small frames arrive many at a time.
const MIN_READ: usize = 64 * 1024;

/// A frame that must not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a frame of {size} bytes is refused (the limit is {limit})")]
pub struct FrameTooLarge {
    /// The size the peer announced.
    pub size: i64,
    /// The limit.
    pub limit: usize,
}

/// Splits whole frames off the front of a buffer that a connection reads into.
#[derive(Debug, Clone, Copy)]
pub struct FrameDecoder {
    limit: usize,
}

impl FrameDecoder {
    /// A decoder refusing frames whose body is larger than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self { limit }
    }

    /// The largest frame body taken.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The body of the frame at the front of `buf`, taken off it, if `buf` holds all of it;
    /// `None` if more bytes are needed. A size above the limit, or negative, is refused as
    /// soon as its four bytes are there.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameTooLarge> {
        let Some(size) = self.announced(buf)? else {
            return Ok(None);
        };
        if buf.len() < SIZE_LEN + size {
            return Ok(None);
        }
        buf.advance(SIZE_LEN);
        Ok(Some(buf.split_to(size).freeze()))
    }

    /// How many bytes of spare room `buf` should have before the next read: what the frame at
    /// the front still lacks, but no more than the bytes already there (and at least 64 KiB),
    /// so the buffer doubles as a large frame arrives instead of being allocated whole when
    /// its size is announced.
    pub fn room(&self, buf: &BytesMut) -> usize {
        let missing = match self.announced(buf) {
            Ok(Some(size)) => (SIZE_LEN + size).saturating_sub(buf.len()),
            Ok(None) => SIZE_LEN - buf.len(),
            Err(_) => 0,
        };
        missing.min(buf.len().max(MIN_READ))
    }

    /// The body size announced at the front of `buf`, once its four bytes are there.
    fn announced(&self, buf: &[u8]) -> Result<Option<usize>, FrameTooLarge> {
        let Some(prefix) = buf.get(..SIZE_LEN) else {
            return Ok(None);
        };
        let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        match usize::try_from(size) {
            Ok(size) if size <= self.limit => Ok(Some(size)),
            _ => Err(FrameTooLarge {
                size: i64::from(size),
                limit: self.limit,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_off_whole_and_in_order() {
        let decoder = FrameDecoder::new(10);
        let mut buf = BytesMut::from(&[0, 0, 0, 3, b'a', b'b', b'c', 0, 0, 0, 0, 0, 0][..]);
        assert_eq!(decoder.decode(&mut buf).unwrap().unwrap(), &b"abc"[..]);
        assert_eq!(decoder.decode(&mut buf).unwrap().unwrap(), &b""[..]);
        assert_eq!(
            decoder.decode(&mut buf).unwrap(),
            None,
            "half a size prefix"
        );
        assert_eq!(&buf[..], &[0, 0]);
    }

    #[test]
    fn sizes_over_the_limit_or_negative_are_refused_before_any_body() {
        let decoder = FrameDecoder::new(10);
        let mut big = BytesMut::from(&[0, 0, 0, 11][..]);
        assert_eq!(
            decoder.decode(&mut big),
            Err(FrameTooLarge {
                size: 11,
                limit: 10
            })
        );
        let mut negative = BytesMut::from(&[0xff, 0xff, 0xff, 0xff][..]);
        assert_eq!(decoder.decode(&mut negative).unwrap_err().size, -1);
        assert_eq!(decoder.room(&negative), 0);
    }

    #[test]
    fn room_grows_with_what_arrived_not_with_what_was_announced() {
        let decoder = FrameDecoder::new(1 << 30);
        let mut buf = BytesMut::new();
        assert_eq!(decoder.room(&buf), SIZE_LEN);
        buf.extend_from_slice(&(256i32 << 20).to_be_bytes());
        assert_eq!(
            decoder.room(&buf),
            MIN_READ,
            "256 MiB announced, 4 bytes sent"
        );
        buf.resize(1 << 20, 7);
        assert_eq!(decoder.room(&buf), 1 << 20, "as much again as arrived");
        let mut small = BytesMut::from(&[0, 0, 0, 10, 1, 2][..]);
        assert_eq!(decoder.room(&small), 8, "only what the frame lacks");
        small.extend_from_slice(&[0; 8]);
        assert_eq!(decoder.room(&small), 0);
    }

    proptest::proptest! {
        #[test]
        fn any_split_of_the_input_gives_the_same_frames(
            bodies in proptest::collection::vec(proptest::collection::vec(0u8..=255, 0..40), 0..6),
            cut in 0usize..300,
        ) {
            let mut input = Vec::new();
            for body in &bodies {
                input.extend_from_slice(&i32::try_from(body.len()).unwrap().to_be_bytes());
                input.extend_from_slice(body);
            }
            let decoder = FrameDecoder::new(64);
            let cut = cut.min(input.len());
            let mut buf = BytesMut::from(&input[..cut]);
            let mut got = Vec::new();
            while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                got.push(frame.to_vec());
            }
            buf.extend_from_slice(&input[cut..]);
            while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                got.push(frame.to_vec());
            }
            proptest::prop_assert_eq!(got, bodies);
            proptest::prop_assert!(buf.is_empty());
        }
    }
}
