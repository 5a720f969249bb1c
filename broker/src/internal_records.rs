//! The primitives of the records coordinators keep in internal topics (`__consumer_offsets`,
//! `__transaction_state`), in Kafka's non-flexible layout: big-endian integers,
//! i16-length-prefixed strings, i32-length-prefixed byte arrays. Decoding checks every length
//! against what remains and never panics.

use bytes::{BufMut, BytesMut};

/// Writes a string (i16 length, UTF-8).
pub(crate) fn put_string(buf: &mut BytesMut, s: &str) {
    buf.put_i16(s.len() as i16);
    buf.extend_from_slice(s.as_bytes());
}

/// Writes a nullable string (length -1 for null).
pub(crate) fn put_nullable_string(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_string(buf, s),
        None => buf.put_i16(-1),
    }
}

/// Writes a byte array (i32 length).
pub(crate) fn put_bytes(buf: &mut BytesMut, b: &[u8]) {
    buf.put_i32(b.len() as i32);
    buf.extend_from_slice(b);
}

/// A cursor that checks every read against what remains.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    pub(crate) fn i8(&mut self) -> Option<i8> {
        Some(i8::from_be_bytes(self.take(1)?.try_into().ok()?))
    }

    pub(crate) fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }

    pub(crate) fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    pub(crate) fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    pub(crate) fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.i16()?).ok()?;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }

    pub(crate) fn nullable_string(&mut self) -> Option<Option<String>> {
        let len = self.i16()?;
        if len == -1 {
            return Some(None);
        }
        let len = usize::try_from(len).ok()?;
        Some(Some(String::from_utf8(self.take(len)?.to_vec()).ok()?))
    }

    pub(crate) fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.i32()?).ok()?;
        self.take(len)
    }

    /// Whether everything was read.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
