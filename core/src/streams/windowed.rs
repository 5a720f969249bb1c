//! Keys of windowed results: a key with the window it was aggregated in ([`Windowed`]), and
//! their serdes in Kafka's layouts: a time window is the key's bytes then the window start (8
//! bytes big-endian; the end is start plus the window size), a session the key's bytes, then
//! its end, then its start.

use crate::serde::{Serde, SerdeError};
use crate::streams::windows::Window;

/// A key and the window of its aggregate.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Windowed<K> {
    /// The key.
    pub key: K,
    /// The window.
    pub window: Window,
}

impl<K> Windowed<K> {
    /// `key` in `window`.
    pub fn new(key: K, window: Window) -> Self {
        Self { key, window }
    }
}

fn split_tail<'a>(
    serde: &'static str,
    topic: &str,
    bytes: &'a [u8],
    tail: usize,
) -> Result<(&'a [u8], &'a [u8]), SerdeError> {
    if bytes.len() < tail {
        return Err(SerdeError::new(
            serde,
            topic,
            format!("{} bytes cannot hold a window", bytes.len()),
        ));
    }
    Ok(bytes.split_at(bytes.len() - tail))
}

fn be_i64(bytes: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[..8]);
    i64::from_be_bytes(b)
}

/// Keys of time windows of `size` ms (Kafka's `WindowedSerdes.timeWindowedSerdeFrom`).
#[derive(Debug, Clone, Copy)]
pub struct TimeWindowedSerde<S> {
    inner: S,
    size: i64,
}

impl<S> TimeWindowedSerde<S> {
    /// Keys through `inner` in windows of `size_ms`.
    pub fn new(inner: S, size_ms: i64) -> Self {
        Self {
            inner,
            size: size_ms,
        }
    }
}

impl<S: Serde> Serde for TimeWindowedSerde<S> {
    type Value = Windowed<S::Value>;

    fn name(&self) -> &'static str {
        "time-windowed"
    }

    fn serialize_into(
        &self,
        topic: &str,
        value: &Self::Value,
        out: &mut Vec<u8>,
    ) -> Result<(), SerdeError> {
        self.inner.serialize_into(topic, &value.key, out)?;
        out.extend_from_slice(&value.window.start.to_be_bytes());
        Ok(())
    }

    fn deserialize(&self, topic: &str, bytes: &[u8]) -> Result<Self::Value, SerdeError> {
        let (key, start) = split_tail(self.name(), topic, bytes, 8)?;
        let start = be_i64(start);
        Ok(Windowed {
            key: self.inner.deserialize(topic, key)?,
            window: Window {
                start,
                end: start.saturating_add(self.size),
            },
        })
    }
}

/// Keys of session windows (Kafka's `WindowedSerdes.sessionWindowedSerdeFrom`).
#[derive(Debug, Clone, Copy)]
pub struct SessionWindowedSerde<S>(pub S);

impl<S: Serde> Serde for SessionWindowedSerde<S> {
    type Value = Windowed<S::Value>;

    fn name(&self) -> &'static str {
        "session-windowed"
    }

    fn serialize_into(
        &self,
        topic: &str,
        value: &Self::Value,
        out: &mut Vec<u8>,
    ) -> Result<(), SerdeError> {
        self.0.serialize_into(topic, &value.key, out)?;
        out.extend_from_slice(&value.window.end.to_be_bytes());
        out.extend_from_slice(&value.window.start.to_be_bytes());
        Ok(())
    }

    fn deserialize(&self, topic: &str, bytes: &[u8]) -> Result<Self::Value, SerdeError> {
        let (key, times) = split_tail(self.name(), topic, bytes, 16)?;
        Ok(Windowed {
            key: self.0.deserialize(topic, key)?,
            window: Window {
                start: be_i64(&times[8..]),
                end: be_i64(times),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serde::StringSerde;

    #[test]
    fn windowed_keys_have_kafkas_layouts() {
        let key = Windowed::new("alice".to_string(), Window { start: 10, end: 20 });
        let time = TimeWindowedSerde::new(StringSerde, 10);
        let bytes = time.serialize("t", &key).unwrap();
        assert_eq!(&bytes[..5], b"alice");
        assert_eq!(&bytes[5..], &10i64.to_be_bytes());
        assert_eq!(time.deserialize("t", &bytes).unwrap(), key);
        let session = SessionWindowedSerde(StringSerde);
        let bytes = session.serialize("t", &key).unwrap();
        assert_eq!(&bytes[5..13], &20i64.to_be_bytes());
        assert_eq!(&bytes[13..], &10i64.to_be_bytes());
        assert_eq!(session.deserialize("t", &bytes).unwrap(), key);
        assert!(time.deserialize("t", b"short").is_err());
        assert!(session.deserialize("t", b"still too short").is_err());
    }
}
