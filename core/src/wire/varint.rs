//! Zig-zag varints as the record format uses them (protobuf's encoding): small magnitudes,
//! negative ones included, take few bytes.

use super::WireError;

/// Reads a zig-zag varint of at most 5 bytes (a 32-bit value) from the front of `buf`.
#[inline]
pub fn read_varint(buf: &mut &[u8]) -> Result<i32, WireError> {
    let raw = read_unsigned(buf, 5)?;
    if raw > u64::from(u32::MAX) {
        return Err(WireError::Corrupt("varint does not fit in 32 bits".into()));
    }
    let raw = raw as u32;
    Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
}

/// Reads a zig-zag varlong of at most 10 bytes (a 64-bit value) from the front of `buf`.
#[inline]
pub fn read_varlong(buf: &mut &[u8]) -> Result<i64, WireError> {
    let raw = read_unsigned(buf, 10)?;
    Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
}

#[inline]
fn read_unsigned(buf: &mut &[u8], max_bytes: usize) -> Result<u64, WireError> {
    // Most varints of a record (attributes, deltas, lengths of keys and values of up to
    // 8 KiB, header counts) take one or two bytes.
    match **buf {
        [first, ..] if first & 0x80 == 0 => {
            *buf = &buf[1..];
            Ok(u64::from(first))
        }
        [first, second, ..] if second & 0x80 == 0 => {
            *buf = &buf[2..];
            Ok(u64::from(first & 0x7f) | (u64::from(second) << 7))
        }
        _ => read_unsigned_long(buf, max_bytes),
    }
}

fn read_unsigned_long(buf: &mut &[u8], max_bytes: usize) -> Result<u64, WireError> {
    let mut value = 0u64;
    for i in 0..max_bytes {
        let Some((&byte, rest)) = buf.split_first() else {
            return Err(WireError::Truncated("varint"));
        };
        *buf = rest;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(WireError::Corrupt(format!(
        "varint longer than {max_bytes} bytes"
    )))
}

/// Appends `value` as a zig-zag varint.
pub fn write_varint(out: &mut Vec<u8>, value: i32) {
    write_unsigned(out, ((value << 1) ^ (value >> 31)) as u32 as u64);
}

/// Appends `value` as a zig-zag varlong.
pub fn write_varlong(out: &mut Vec<u8>, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn write_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The number of bytes [`write_varint`] writes for `value`.
pub fn varint_len(value: i32) -> usize {
    unsigned_len(((value << 1) ^ (value >> 31)) as u32 as u64)
}

/// The number of bytes [`write_varlong`] writes for `value`.
pub fn varlong_len(value: i64) -> usize {
    unsigned_len(((value << 1) ^ (value >> 63)) as u64)
}

fn unsigned_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        // Values from the protobuf documentation of zig-zag encoding.
        for (value, bytes) in [
            (0, vec![0x00]),
            (-1, vec![0x01]),
            (1, vec![0x02]),
            (-2, vec![0x03]),
            (63, vec![0x7e]),
            (-64, vec![0x7f]),
            (64, vec![0x80, 0x01]),
            (i32::MAX, vec![0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, vec![0xff, 0xff, 0xff, 0xff, 0x0f]),
        ] {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            assert_eq!(out, bytes, "{value}");
            assert_eq!(read_varint(&mut out.as_slice()).unwrap(), value);
        }
    }

    #[test]
    fn bad_varints_are_errors() {
        assert_eq!(
            read_varint(&mut &[][..]),
            Err(WireError::Truncated("varint"))
        );
        assert_eq!(
            read_varint(&mut &[0x80][..]),
            Err(WireError::Truncated("varint"))
        );
        assert!(read_varint(&mut &[0xff, 0xff, 0xff, 0xff, 0xff, 0x01][..]).is_err());
        assert!(read_varint(&mut &[0xff, 0xff, 0xff, 0xff, 0x7f][..]).is_err());
        assert!(read_varlong(&mut &[0xff; 11][..]).is_err());
    }

    proptest! {
        #[test]
        fn varint_round_trips(value: i32, tail: Vec<u8>) {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            prop_assert_eq!(out.len(), varint_len(value));
            out.extend_from_slice(&tail);
            let mut input = out.as_slice();
            prop_assert_eq!(read_varint(&mut input)?, value);
            prop_assert_eq!(input, tail.as_slice());
        }

        #[test]
        fn varlong_round_trips(value: i64) {
            let mut out = Vec::new();
            write_varlong(&mut out, value);
            prop_assert_eq!(out.len(), varlong_len(value));
            prop_assert_eq!(read_varlong(&mut out.as_slice())?, value);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes: Vec<u8>) {
            let _ = read_varint(&mut bytes.as_slice());
            let _ = read_varlong(&mut bytes.as_slice());
        }
    }
}
