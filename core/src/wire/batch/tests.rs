//! RecordBatch v2 against the Java client's bytes, round trips for every codec, and damage.

use super::*;
use proptest::prelude::*;

/// `MemoryRecords.withIdempotentRecords(Compression.NONE, 77, 3, 5, ...)` of the Java client
/// 4.4.0, for the three records of [`java_records`].
const JAVA_BATCH: &str = "000000000000000000000058ffffffff0292b3ea2b00000000000200000000000003e8\
00000000000004b0000000000000004d000300000005000000031e000000026b02760402680278026e0118001302\
010c7365636f6e64001200900304046b320100";

fn java_records() -> Vec<Record> {
    vec![
        Record {
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::from_static(b"v")),
            headers: vec![
                Header::new("h", "x"),
                Header {
                    key: "n".into(),
                    value: None,
                },
            ],
            timestamp: 1000,
        },
        Record {
            key: None,
            value: Some(Bytes::from_static(b"second")),
            headers: vec![],
            timestamp: 990,
        },
        Record {
            key: Some(Bytes::from_static(b"k2")),
            value: None,
            headers: vec![],
            timestamp: 1200,
        },
    ]
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn build(records: &[Record], compression: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(compression);
    for r in records {
        builder.append(r);
    }
    builder.build(0).unwrap()
}

#[test]
fn builds_the_same_bytes_as_the_java_client() {
    let mut builder = BatchBuilder::new(Compression::None).producer(77, 3, 5);
    for r in &java_records() {
        builder.append(r);
    }
    assert_eq!(builder.build(0).unwrap(), unhex(JAVA_BATCH));
}

#[test]
fn decodes_the_java_clients_batch() {
    let bytes = Bytes::from(unhex(JAVA_BATCH));
    let (header, records) = decode_records(&bytes, 1 << 20).unwrap();
    assert_eq!(header.producer_id, 77);
    assert_eq!(header.producer_epoch, 3);
    assert_eq!(header.base_sequence, 5);
    assert_eq!(header.last_sequence(), 7);
    assert_eq!(header.max_timestamp, 1200);
    assert_eq!(header.record_count, 3);
    let expected: Vec<BatchRecord> = java_records()
        .into_iter()
        .enumerate()
        .map(|(i, record)| BatchRecord {
            offset: i as i64,
            record,
        })
        .collect();
    assert_eq!(records, expected);
}

#[test]
fn a_new_base_offset_keeps_the_crc_valid() {
    let mut batch = build(&java_records(), Compression::None);
    set_base_offset(&mut batch, 1_000_000);
    let header = validate(&batch).unwrap();
    assert_eq!(header.base_offset, 1_000_000);
    assert_eq!(header.last_offset(), 1_000_002);
    let (_, records) = decode_records(&Bytes::from(batch), 1 << 20).unwrap();
    assert_eq!(records[2].offset, 1_000_002);
}

#[test]
fn a_new_producer_stamp_gives_the_same_bytes_as_building_with_it() {
    let records = java_records();
    let mut stamped = build(&records, Compression::Lz4);
    set_producer(&mut stamped, 4711, 3, 250);
    let mut builder = BatchBuilder::new(Compression::Lz4).producer(4711, 3, 250);
    for r in &records {
        builder.append(r);
    }
    assert_eq!(stamped, builder.build(0).unwrap());
    let header = validate(&stamped).unwrap();
    assert_eq!(
        (
            header.producer_id,
            header.producer_epoch,
            header.base_sequence
        ),
        (4711, 3, 250)
    );
}

#[test]
fn a_retaining_batch_keeps_offsets_span_and_producer() {
    let mut original = BatchBuilder::new(Compression::None).producer(5, 1, 100);
    for r in &java_records() {
        original.append(r);
    }
    let mut bytes = original.build(0).unwrap();
    set_base_offset(&mut bytes, 40);
    let original = BatchHeader::parse(&bytes).unwrap();
    let records = java_records();
    let mut kept = BatchBuilder::retaining(&original, Compression::Zstd);
    kept.append_at(1, &records[1]);
    let kept = Bytes::from(kept.build(40).unwrap());
    let (header, decoded) = decode_records(&kept, 1 << 20).unwrap();
    assert_eq!(
        (header.base_offset, header.last_offset()),
        (40, 42),
        "the span stays"
    );
    assert_eq!((header.producer_id, header.base_sequence), (5, 100));
    assert_eq!(header.record_count, 1);
    assert_eq!(
        decoded,
        vec![BatchRecord {
            offset: 41,
            record: records[1].clone()
        }]
    );
}

#[test]
fn log_append_time_overrides_record_timestamps() {
    let mut batch = build(&java_records(), Compression::Gzip);
    set_log_append_time(&mut batch, 777);
    let (header, records) = decode_records(&Bytes::from(batch), 1 << 20).unwrap();
    assert!(header.is_log_append_time());
    assert!(records.iter().all(|r| r.record.timestamp == 777));
}

#[test]
fn every_flipped_bit_after_the_length_is_caught() {
    let batch = build(&java_records(), Compression::Lz4);
    for byte in 16..batch.len() {
        for bit in 0..8 {
            let mut damaged = batch.clone();
            damaged[byte] ^= 1 << bit;
            assert!(
                validate(&damaged).is_err(),
                "flip of bit {bit} in byte {byte} passed"
            );
        }
    }
}

#[test]
fn truncated_batches_are_errors_and_batches_stops_before_them() {
    let batch = build(&java_records(), Compression::None);
    for len in 0..batch.len() {
        assert!(
            validate(&batch[..len]).is_err(),
            "a batch cut at {len} passed"
        );
        let mut two = batch.clone();
        two.extend_from_slice(&batch[..len]);
        let mut batches = Batches::new(&two);
        assert_eq!(batches.next().unwrap().unwrap().1, &batch[..]);
        assert!(
            batches.next().is_none(),
            "a partial batch of {len} bytes was yielded"
        );
        assert_eq!(batches.remainder(), &batch[..len]);
    }
}

#[test]
fn control_batches_carry_their_marker() {
    for marker in [ControlType::Commit, ControlType::Abort] {
        let batch = Bytes::from(control_batch(9, 2, marker, 7, 555));
        let (header, records) = decode_records(&batch, 1024).unwrap();
        assert!(header.is_control() && header.is_transactional());
        assert_eq!((header.producer_id, header.producer_epoch), (9, 2));
        assert_eq!(records.len(), 1);
        assert_eq!(control_type(&records[0].record), Some(marker));
        assert_eq!(
            records[0].record.value.as_deref(),
            Some(&[0, 0, 0, 0, 0, 7][..])
        );
    }
}

#[test]
fn a_record_count_larger_than_the_bytes_is_refused_before_allocating() {
    let mut batch = build(&java_records(), Compression::None);
    batch[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(
        decode_records(&Bytes::from(batch), 1 << 20),
        Err(WireError::Corrupt(_))
    ));
}

#[test]
fn sequence_numbers_wrap_like_kafka() {
    let mut header = BatchHeader::parse(&build(&java_records(), Compression::None)).unwrap();
    header.base_sequence = i32::MAX - 1;
    header.last_offset_delta = 3;
    assert_eq!(header.last_sequence(), 1);
}

fn arb_record() -> impl Strategy<Value = Record> {
    let bytes = || proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40));
    let header = ("[a-z]{0,8}", bytes()).prop_map(|(key, value)| Header {
        key,
        value: value.map(Bytes::from),
    });
    (
        bytes(),
        bytes(),
        proptest::collection::vec(header, 0..4),
        -1i64..2_000_000_000_000,
    )
        .prop_map(|(key, value, headers, timestamp)| Record {
            key: key.map(Bytes::from),
            value: value.map(Bytes::from),
            headers,
            timestamp,
        })
}

fn arb_compression() -> impl Strategy<Value = Compression> {
    proptest::sample::select(vec![
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ])
}

proptest! {
    #[test]
    fn batches_round_trip(
        records in proptest::collection::vec(arb_record(), 1..20),
        compression in arb_compression(),
        base_offset in 0i64..1 << 40,
    ) {
        let mut batch = build(&records, compression);
        set_base_offset(&mut batch, base_offset);
        let (header, decoded) = decode_records(&Bytes::from(batch), 1 << 20)?;
        prop_assert_eq!(header.compression()?, compression);
        prop_assert_eq!(header.record_count as usize, records.len());
        prop_assert_eq!(header.max_timestamp, records.iter().map(|r| r.timestamp).max().unwrap());
        prop_assert_eq!(decoded.len(), records.len());
        for (i, (d, r)) in decoded.iter().zip(&records).enumerate() {
            prop_assert_eq!(d.offset, base_offset + i as i64);
            prop_assert_eq!(&d.record, r);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode_records(&Bytes::from(bytes.clone()), 1 << 16);
        for batch in Batches::new(&bytes) {
            let _ = batch.map(|(_, b)| validate(b));
        }
    }

    #[test]
    fn damaged_records_with_a_fixed_crc_never_panic(
        records in proptest::collection::vec(arb_record(), 1..5),
        at in any::<prop::sample::Index>(),
        byte: u8,
    ) {
        let mut batch = build(&records, Compression::None);
        let i = HEADER_LEN + at.index(batch.len() - HEADER_LEN);
        batch[i] = byte;
        let crc = crc32c::crc32c(&batch[CRC_START..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
        let _ = decode_records(&Bytes::from(batch), 1 << 16);
    }
}

/// Found by the `record_batch` fuzz target: a base offset near `i64::MAX` made the offsets of
/// a batch's records overflow (a panic with overflow checks, a wrapped offset without).
#[test]
fn offsets_past_the_largest_are_refused_not_wrapped() {
    let mut builder = BatchBuilder::new(Compression::None);
    builder.append_at(0, &Record::new("k", "v", 1));
    builder.append_at(5, &Record::new("k", "v", 1));
    let mut batch = builder.build(i64::MAX - 3).unwrap();
    // The header claims one record after the first: the batch itself ends in range.
    batch[23..27].copy_from_slice(&1i32.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    let error = decode_records(&Bytes::from(batch.clone()), 1 << 20).unwrap_err();
    assert!(error.to_string().contains("overflows"), "{error}");

    let mut at_the_end = BatchBuilder::new(Compression::None);
    at_the_end.append(&Record::new("k", "v", 1));
    at_the_end.append(&Record::new("k", "v", 1));
    let at_the_end = at_the_end.build(i64::MAX - 1).unwrap();
    assert!(BatchHeader::parse(&at_the_end).is_err());
    assert!(validate(&at_the_end).is_err());
}

/// Found by the `record_batch` fuzz target: a header key that is not UTF-8, which brokers
/// store (Kafka's too), made the batch undecodable, so a consumer could never pass it. Java
/// reads such keys with U+FFFD in place of the bad bytes, and so does eddy.
#[test]
fn a_header_key_that_is_not_utf8_is_read_as_java_reads_it() {
    let mut builder = BatchBuilder::new(Compression::None);
    builder.append(&Record {
        key: None,
        value: None,
        headers: vec![Header::new("h", "x")],
        timestamp: 1,
    });
    let mut batch = builder.build(0).unwrap();
    let at = batch.iter().rposition(|&b| b == b'h').unwrap();
    batch[at] = 0xff;
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    let header = validate(&batch).unwrap();
    check_records(&batch, &header, 1 << 20, &mut Vec::new(), |_| {}).unwrap();
    let (_, records) = decode_records(&Bytes::from(batch), 1 << 20).unwrap();
    assert_eq!(records[0].record.headers[0].key, "\u{fffd}");
}
