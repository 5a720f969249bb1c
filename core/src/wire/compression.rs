//! The compression codecs of RecordBatch v2. A batch's records section (everything after the
//! record count) is compressed as a whole; the codec is named in bits 0–2 of the attributes.
//!
//! Decompression takes a limit: compressed input can expand without bound, so every decoder
//! stops and fails once its output would pass the limit.

use std::io::{Read, Write};

use super::WireError;

/// A compression codec of RecordBatch v2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Compression {
    /// No compression.
    #[default]
    None,
    /// gzip (RFC 1952).
    Gzip,
    /// Snappy, in the Java client's framing when writing; raw or framed when reading.
    Snappy,
    /// The LZ4 frame format.
    Lz4,
    /// Zstandard.
    Zstd,
}

/// The first bytes of the framing that the Java client (snappy-java) puts around snappy blocks.
const SNAPPY_JAVA_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
/// The block size that snappy-java uses when writing.
const SNAPPY_JAVA_BLOCK: usize = 32 * 1024;

impl Compression {
    /// The codec named by a batch's attributes (bits 0–2).
    pub fn from_attributes(attributes: i16) -> Result<Self, WireError> {
        match attributes & 0x07 {
            0 => Ok(Self::None),
            1 => Ok(Self::Gzip),
            2 => Ok(Self::Snappy),
            3 => Ok(Self::Lz4),
            4 => Ok(Self::Zstd),
            other => Err(WireError::UnknownCompression(other)),
        }
    }

    /// The codec's id in a batch's attributes.
    pub fn id(self) -> i16 {
        match self {
            Self::None => 0,
            Self::Gzip => 1,
            Self::Snappy => 2,
            Self::Lz4 => 3,
            Self::Zstd => 4,
        }
    }

    /// The codec's name as Kafka's `compression.type` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Gzip => "gzip",
            Self::Snappy => "snappy",
            Self::Lz4 => "lz4",
            Self::Zstd => "zstd",
        }
    }

    /// Appends `data`, compressed, to `out`.
    pub fn compress(self, data: &[u8], out: &mut Vec<u8>) -> Result<(), WireError> {
        let failed = |e: std::io::Error| WireError::Compression {
            codec: self.name(),
            reason: e.to_string(),
        };
        match self {
            Self::None => out.extend_from_slice(data),
            Self::Gzip => {
                let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
                encoder.write_all(data).map_err(failed)?;
                encoder.finish().map_err(failed)?;
            }
            Self::Snappy => compress_snappy_java(data, out).map_err(failed)?,
            Self::Lz4 => {
                let mut encoder = lz4_flex::frame::FrameEncoder::new(out);
                encoder.write_all(data).map_err(failed)?;
                encoder.finish().map_err(|e| WireError::Compression {
                    codec: "lz4",
                    reason: e.to_string(),
                })?;
            }
            Self::Zstd => {
                let mut encoder = zstd::stream::write::Encoder::new(out, 1).map_err(failed)?;
                encoder.write_all(data).map_err(failed)?;
                encoder.finish().map_err(failed)?;
            }
        }
        Ok(())
    }

    /// `data` decompressed, failing if the result would exceed `limit` bytes.
    pub fn decompress(self, data: &[u8], limit: usize) -> Result<Vec<u8>, WireError> {
        let mut out = Vec::new();
        self.decompress_into(data, limit, &mut out)?;
        Ok(out)
    }

    /// `data` decompressed into `out` (cleared first, its memory kept for the next call),
    /// failing if the result would exceed `limit` bytes.
    pub fn decompress_into(
        self,
        data: &[u8],
        limit: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), WireError> {
        out.clear();
        match self {
            Self::None => {
                if data.len() > limit {
                    return Err(WireError::DecompressedTooLarge { limit });
                }
                out.extend_from_slice(data);
                Ok(())
            }
            Self::Gzip => read_bounded(self, flate2::read::MultiGzDecoder::new(data), limit, out),
            Self::Snappy => decompress_snappy(data, limit, out),
            Self::Lz4 => read_bounded(self, lz4_flex::frame::FrameDecoder::new(data), limit, out),
            Self::Zstd => {
                let decoder = zstd::stream::read::Decoder::with_buffer(data).map_err(|e| {
                    WireError::Decompression {
                        codec: "zstd",
                        reason: e.to_string(),
                    }
                })?;
                read_bounded(self, decoder, limit, out)
            }
        }
    }
}

fn read_bounded(
    codec: Compression,
    reader: impl Read,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), WireError> {
    let most = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader
        .take(most)
        .read_to_end(out)
        .map_err(|e| WireError::Decompression {
            codec: codec.name(),
            reason: e.to_string(),
        })?;
    if out.len() > limit {
        return Err(WireError::DecompressedTooLarge { limit });
    }
    Ok(())
}

/// snappy-java's framing: the magic, version 1, compatible version 1, then blocks of
/// (big-endian i32 length, raw snappy).
fn compress_snappy_java(data: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
    out.extend_from_slice(SNAPPY_JAVA_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for block in data.chunks(SNAPPY_JAVA_BLOCK) {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        out.resize(start + 4 + snap::raw::max_compress_len(block.len()), 0);
        let n = encoder
            .compress(block, &mut out[start + 4..])
            .map_err(std::io::Error::other)?;
        out.truncate(start + 4 + n);
        out[start..start + 4].copy_from_slice(&(n as i32).to_be_bytes());
    }
    Ok(())
}

fn decompress_snappy(data: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), WireError> {
    if let Some(mut rest) = data.strip_prefix(SNAPPY_JAVA_MAGIC) {
        if rest.len() < 8 {
            return Err(WireError::Truncated("snappy-java header"));
        }
        rest = &rest[8..];
        while !rest.is_empty() {
            if rest.len() < 4 {
                return Err(WireError::Truncated("snappy-java block length"));
            }
            let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
            let len = usize::try_from(len)
                .ok()
                .filter(|&n| n <= rest.len() - 4)
                .ok_or(WireError::Truncated("snappy-java block"))?;
            snappy_block_into(&rest[4..4 + len], out, limit)?;
            rest = &rest[4 + len..];
        }
    } else {
        snappy_block_into(data, out, limit)?;
    }
    Ok(())
}

fn snappy_block_into(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), WireError> {
    let failed = |e: snap::Error| WireError::Decompression {
        codec: "snappy",
        reason: e.to_string(),
    };
    let len = snap::raw::decompress_len(block).map_err(failed)?;
    if out.len() + len > limit {
        return Err(WireError::DecompressedTooLarge { limit });
    }
    let start = out.len();
    out.resize(start + len, 0);
    let n = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(failed)?;
    out.truncate(start + n);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    #[test]
    fn ids_round_trip_and_unknown_ids_are_errors() {
        for codec in ALL {
            assert_eq!(Compression::from_attributes(codec.id() | 0x18), Ok(codec));
        }
        assert_eq!(
            Compression::from_attributes(5),
            Err(WireError::UnknownCompression(5))
        );
    }

    #[test]
    fn a_bomb_is_stopped_at_the_limit() {
        let zeros = vec![0u8; 1 << 20];
        for codec in ALL {
            let mut packed = Vec::new();
            codec.compress(&zeros, &mut packed).unwrap();
            assert_eq!(
                codec.decompress(&packed, 1000),
                Err(WireError::DecompressedTooLarge { limit: 1000 }),
                "{codec:?}"
            );
            assert_eq!(codec.decompress(&packed, 1 << 20).unwrap(), zeros);
        }
    }

    #[test]
    fn raw_snappy_is_read_too() {
        let data = b"librdkafka writes raw snappy blocks".repeat(10);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(Compression::Snappy.decompress(&raw, 1 << 20).unwrap(), data);
    }

    proptest! {
        #[test]
        fn every_codec_round_trips(data: Vec<u8>, codec in proptest::sample::select(ALL.to_vec())) {
            let mut packed = Vec::new();
            codec.compress(&data, &mut packed)?;
            prop_assert_eq!(codec.decompress(&packed, data.len())?, data);
        }

        #[test]
        fn garbage_never_panics(data: Vec<u8>, codec in proptest::sample::select(ALL.to_vec())) {
            let _ = codec.decompress(&data, 1 << 16);
        }
    }
}
