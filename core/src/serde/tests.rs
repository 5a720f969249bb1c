use bytes::Bytes;
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::*;

/// The layouts of Kafka's serializers: big-endian two's complement (`ShortSerializer`,
/// `IntegerSerializer`, `LongSerializer`), IEEE 754 bits (`FloatSerializer`,
/// `DoubleSerializer`), UTF-8 (`StringSerializer`).
#[test]
fn fixed_width_numbers_are_written_as_kafkas_serializers_write_them() {
    assert_eq!(&I16Serde.serialize("t", &-2).unwrap()[..], [0xff, 0xfe]);
    assert_eq!(&I32Serde.serialize("t", &258).unwrap()[..], [0, 0, 1, 2]);
    assert_eq!(&I64Serde.serialize("t", &-1).unwrap()[..], [0xff; 8]);
    assert_eq!(
        &I64Serde.serialize("t", &1_700_000_000_000).unwrap()[..],
        [0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00]
    );
    assert_eq!(
        &F32Serde.serialize("t", &1.5).unwrap()[..],
        [0x3f, 0xc0, 0, 0]
    );
    assert_eq!(
        &F64Serde.serialize("t", &1.5).unwrap()[..],
        [0x3f, 0xf8, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(
        &StringSerde.serialize("t", &"é".to_string()).unwrap()[..],
        [0xc3, 0xa9]
    );
}

#[test]
fn wrong_lengths_and_bad_text_are_errors_naming_the_topic() {
    let e = I64Serde.deserialize("counts", &[1, 2, 3]).unwrap_err();
    assert_eq!(e.topic(), "counts");
    assert!(
        e.to_string().contains("3 bytes where 8 were expected"),
        "{e}"
    );
    assert!(I32Serde.deserialize("t", &[]).is_err());
    assert!(StringSerde.deserialize("t", &[0xff, 0xfe]).is_err());
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Seat {
    order: String,
    row: u16,
    held: bool,
    price: Option<f64>,
}

#[test]
fn structured_values_round_trip_in_json_and_bincode() {
    let seat = Seat {
        order: "o-17".into(),
        row: 12,
        held: true,
        price: Some(42.5),
    };
    let json = JsonSerde::<Seat>::new();
    let bytes = json.serialize("seats", &seat).unwrap();
    assert_eq!(
        std::str::from_utf8(&bytes).unwrap(),
        r#"{"order":"o-17","row":12,"held":true,"price":42.5}"#
    );
    assert_eq!(json.deserialize("seats", &bytes).unwrap(), seat);
    assert!(json.deserialize("seats", b"{\"order\":1}").is_err());

    let bincode = BincodeSerde::<Seat>::new();
    let bytes = bincode.serialize("seats", &seat).unwrap();
    assert!(
        bytes.len() < 20,
        "bincode is compact: {} bytes",
        bytes.len()
    );
    assert_eq!(bincode.deserialize("seats", &bytes).unwrap(), seat);
    // Trailing bytes, truncations and huge lengths are errors.
    let mut longer = bytes.to_vec();
    longer.push(0);
    assert!(bincode.deserialize("seats", &longer).is_err());
    assert!(bincode
        .deserialize("seats", &bytes[..bytes.len() - 1])
        .is_err());
    assert!(BincodeSerde::<Vec<u8>>::new()
        .deserialize("t", &[0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f])
        .is_err());
}

proptest! {
    #[test]
    fn every_serde_round_trips(
        text in ".*",
        bytes in proptest::collection::vec(any::<u8>(), 0..64),
        a in any::<i16>(), b in any::<i32>(), c in any::<i64>(), d in any::<f64>(),
    ) {
        prop_assert_eq!(StringSerde.deserialize("t", &StringSerde.serialize("t", &text).unwrap()).unwrap(), text);
        let raw = Bytes::from(bytes);
        prop_assert_eq!(BytesSerde.deserialize("t", &BytesSerde.serialize("t", &raw).unwrap()).unwrap(), raw);
        prop_assert_eq!(I16Serde.deserialize("t", &I16Serde.serialize("t", &a).unwrap()).unwrap(), a);
        prop_assert_eq!(I32Serde.deserialize("t", &I32Serde.serialize("t", &b).unwrap()).unwrap(), b);
        prop_assert_eq!(I64Serde.deserialize("t", &I64Serde.serialize("t", &c).unwrap()).unwrap(), c);
        let back = F64Serde.deserialize("t", &F64Serde.serialize("t", &d).unwrap()).unwrap();
        prop_assert_eq!(back.to_bits(), d.to_bits());
        let pair = (b, c);
        let serde = BincodeSerde::<(i32, i64)>::new();
        prop_assert_eq!(serde.deserialize("t", &serde.serialize("t", &pair).unwrap()).unwrap(), pair);
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = JsonSerde::<Vec<String>>::new().deserialize("t", &bytes);
        let _ = BincodeSerde::<Vec<String>>::new().deserialize("t", &bytes);
        let _ = I64Serde.deserialize("t", &bytes);
        let _ = StringSerde.deserialize("t", &bytes);
    }
}
