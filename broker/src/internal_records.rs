//! The primitives of the records coordinators keep in internal topics (`__consumer_offsets`,
//! `__transaction_state`), in Kafka's non-flexible layout: big-endian integers,
//! i16-length-prefixed strings, i32-length-prefixed byte arrays. Writing refuses a value its
//! length field cannot hold; decoding checks every length against what remains and never
//! panics.

use bytes::{BufMut, BytesMut};

/// A value too large for the field that would store it: a string over `i16::MAX` bytes, a
/// byte array or a list over `i32::MAX`. Nothing is written then: a length is never narrowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} of {len} is too long for the record (at most {max})")]
pub(crate) struct TooLong {
    /// What was being written.
    pub(crate) field: &'static str,
    /// Its length.
    pub(crate) len: usize,
    /// The most the field can hold.
    pub(crate) max: usize,
}

/// `len` as an `i16` length of `field`.
pub(crate) fn i16_len(field: &'static str, len: usize) -> Result<i16, TooLong> {
    i16::try_from(len).map_err(|_| TooLong {
        field,
        len,
        max: i16::MAX as usize,
    })
}

/// `len` as an `i32` length or count of `field`.
pub(crate) fn i32_len(field: &'static str, len: usize) -> Result<i32, TooLong> {
    i32::try_from(len).map_err(|_| TooLong {
        field,
        len,
        max: i32::MAX as usize,
    })
}

/// Writes a string (i16 length, UTF-8).
pub(crate) fn put_string(buf: &mut BytesMut, field: &'static str, s: &str) -> Result<(), TooLong> {
    buf.put_i16(i16_len(field, s.len())?);
    buf.extend_from_slice(s.as_bytes());
    Ok(())
}

/// Writes a nullable string (length -1 for null).
pub(crate) fn put_nullable_string(
    buf: &mut BytesMut,
    field: &'static str,
    s: Option<&str>,
) -> Result<(), TooLong> {
    match s {
        Some(s) => put_string(buf, field, s),
        None => {
            buf.put_i16(-1);
            Ok(())
        }
    }
}

/// Writes a byte array (i32 length).
pub(crate) fn put_bytes(buf: &mut BytesMut, field: &'static str, b: &[u8]) -> Result<(), TooLong> {
    buf.put_i32(i32_len(field, b.len())?);
    buf.extend_from_slice(b);
    Ok(())
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
