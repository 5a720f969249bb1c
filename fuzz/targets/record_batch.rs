//! Record batches as a producer sends them and a consumer reads them: the header and CRC
//! check, the broker's record-by-record check (decompressing within a budget) and the
//! consumer's decoding. The CRC is recomputed first, so the fuzzer reaches past it.

use bytes::Bytes;
use eddy_core::wire::batch::{check_records, decode_records, validate, Batches};

const LIMIT: usize = 1 << 20;

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let mut bytes = data.to_vec();
        if bytes.len() >= 61 {
            let crc = crc32c::crc32c(&bytes[21..]);
            bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        let whole = Bytes::from(bytes);
        for batch in Batches::new(&whole) {
            let Ok((_, batch)) = batch else { break };
            let Ok(header) = validate(batch) else {
                continue;
            };
            let mut scratch = Vec::new();
            let mut checked = 0usize;
            let check = check_records(batch, &header, LIMIT, &mut scratch, |_| checked += 1);
            let decoded = decode_records(&whole.slice_ref(batch), LIMIT);
            if check.is_ok() {
                // What the broker takes, a consumer reads, record for record.
                let (_, records) = decoded.expect("a checked batch decodes");
                assert_eq!(records.len(), checked);
            }
        }
    });
}
