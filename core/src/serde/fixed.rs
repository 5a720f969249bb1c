//! Kafka's fixed-width number serdes: big-endian two's complement integers and IEEE 754
//! floats, exactly as `ShortSerializer`, `IntegerSerializer`, `LongSerializer`,
//! `FloatSerializer` and `DoubleSerializer` write them; any other length is an error.

use super::{Serde, SerdeError};

macro_rules! fixed_width_serde {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $label:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl Serde for $name {
            type Value = $ty;

            fn name(&self) -> &'static str {
                $label
            }

            fn serialize_into(
                &self,
                _: &str,
                value: &$ty,
                out: &mut Vec<u8>,
            ) -> Result<(), SerdeError> {
                out.extend_from_slice(&value.to_be_bytes());
                Ok(())
            }

            fn deserialize(&self, topic: &str, bytes: &[u8]) -> Result<$ty, SerdeError> {
                let array = bytes.try_into().map_err(|_| {
                    SerdeError::new(
                        $label,
                        topic,
                        format!(
                            "{} bytes where {} were expected",
                            bytes.len(),
                            std::mem::size_of::<$ty>()
                        ),
                    )
                })?;
                Ok(<$ty>::from_be_bytes(array))
            }
        }
    };
}

fixed_width_serde!(
    /// A 16-bit integer (Kafka's `Serdes.Short()`).
    I16Serde, i16, "i16"
);
fixed_width_serde!(
    /// A 32-bit integer (Kafka's `Serdes.Integer()`).
    I32Serde, i32, "i32"
);
fixed_width_serde!(
    /// A 64-bit integer (Kafka's `Serdes.Long()`), what counts are kept as.
    I64Serde, i64, "i64"
);
fixed_width_serde!(
    /// A 32-bit float (Kafka's `Serdes.Float()`).
    F32Serde, f32, "f32"
);
fixed_width_serde!(
    /// A 64-bit float (Kafka's `Serdes.Double()`).
    F64Serde, f64, "f64"
);
