//! Values stored with the time of the record that last wrote them, as Kafka Streams' timestamped
//! stores keep them (KIP-258): the bytes are the timestamp as 8 bytes big-endian followed by the
//! value's bytes, so a changelog eddy writes reads as Kafka's.

use crate::log::Timestamp;
use crate::serde::{Serde, SerdeError};

/// A value and the timestamp of the record that wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueAndTimestamp<V> {
    /// The value.
    pub value: V,
    /// When it was written, in event time.
    pub timestamp: Timestamp,
}

/// The serde of [`ValueAndTimestamp`] over the serde of the values.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimestampedSerde<S>(pub S);

impl<S: Serde> Serde for TimestampedSerde<S> {
    type Value = ValueAndTimestamp<S::Value>;

    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn serialize_into(
        &self,
        topic: &str,
        value: &Self::Value,
        out: &mut Vec<u8>,
    ) -> Result<(), SerdeError> {
        out.extend_from_slice(&value.timestamp.to_be_bytes());
        self.0.serialize_into(topic, &value.value, out)
    }

    fn deserialize(&self, topic: &str, bytes: &[u8]) -> Result<Self::Value, SerdeError> {
        let Some((timestamp, value)) = bytes.split_first_chunk::<8>() else {
            return Err(SerdeError::new(
                self.name(),
                topic,
                format!("{} bytes cannot hold a timestamp", bytes.len()),
            ));
        };
        Ok(ValueAndTimestamp {
            value: self.0.deserialize(topic, value)?,
            timestamp: i64::from_be_bytes(*timestamp),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serde::I64Serde;

    #[test]
    fn the_layout_is_kafkas_timestamp_then_value() {
        let serde = TimestampedSerde(I64Serde);
        let v = ValueAndTimestamp {
            value: 7,
            timestamp: 1_000,
        };
        let bytes = serde.serialize("s", &v).unwrap();
        assert_eq!(&bytes[..8], &1_000i64.to_be_bytes());
        assert_eq!(&bytes[8..], &7i64.to_be_bytes());
        assert_eq!(serde.deserialize("s", &bytes).unwrap(), v);
        assert!(serde.deserialize("s", &bytes[..5]).is_err());
    }
}
