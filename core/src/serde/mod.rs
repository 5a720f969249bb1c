//! Serdes: how keys and values become bytes where they leave a topology (sinks, repartition
//! topics, stores and their changelogs) and come back. Kafka Streams' `Serde<T>`, with the
//! same byte layouts as Kafka's built-in serdes, so that eddy and Java applications read each
//! other's topics:
//!
//! - [`StringSerde`]: UTF-8 (Kafka's `Serdes.String()`);
//! - [`BytesSerde`]: the bytes as they are (`Serdes.ByteArray()`, `Serdes.Bytes()`);
//! - [`I16Serde`], [`I32Serde`], [`I64Serde`], [`F32Serde`], [`F64Serde`]: big-endian fixed
//!   width (`Serdes.Short()`, `Integer()`, `Long()`, `Float()`, `Double()`);
//! - [`JsonSerde`] and [`BincodeSerde`]: any type with `serde`'s derives.
//!
//! A null key or value (a tombstone) is not a value of most types: a serde reads and writes
//! only what is there, and a type that has a null says so through [`Serde::read_null`] and
//! [`Serde::writes_null`]. [`Nullable`] gives any serde's type a null (`Option<T>`), which is
//! how a stream whose records may lack a key or a value declares it.

mod fixed;
mod structured;

use bytes::Bytes;

pub use fixed::{F32Serde, F64Serde, I16Serde, I32Serde, I64Serde};
pub use structured::{BincodeSerde, JsonSerde};

/// Why bytes could not become a value, or a value bytes. Boxed, so that the results serdes
/// return on every record stay small.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} on topic {}: {}", .0.serde, .0.topic, .0.reason)]
pub struct SerdeError(Box<SerdeErrorDetail>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct SerdeErrorDetail {
    serde: &'static str,
    topic: String,
    reason: String,
}

impl SerdeError {
    /// An error of `serde` on `topic`.
    #[cold]
    pub fn new(serde: &'static str, topic: &str, reason: impl Into<String>) -> Self {
        Self(Box::new(SerdeErrorDetail {
            serde,
            topic: topic.to_string(),
            reason: reason.into(),
        }))
    }

    /// Which serde failed.
    pub fn serde(&self) -> &'static str {
        self.0.serde
    }

    /// The topic (or store changelog) of the record.
    pub fn topic(&self) -> &str {
        &self.0.topic
    }

    /// What went wrong.
    pub fn reason(&self) -> &str {
        &self.0.reason
    }

    /// The same error, of a record of `topic` (or store changelog) instead.
    #[cold]
    pub(crate) fn of_topic(mut self, topic: &str) -> Self {
        self.0.topic = topic.to_string();
        self
    }
}

/// Turns values of one type into bytes and back. Implementations are cheap to share: the
/// engine holds each in an `Arc` and calls it from any task.
pub trait Serde: Send + Sync + 'static {
    /// The type of the values.
    type Value;

    /// The name errors give (`"string"`, `"json"`, …).
    fn name(&self) -> &'static str;

    /// Appends the bytes of `value`, a key or value of a record of `topic`, to `out`.
    fn serialize_into(
        &self,
        topic: &str,
        value: &Self::Value,
        out: &mut Vec<u8>,
    ) -> Result<(), SerdeError>;

    /// The value `bytes` hold, a key or value of a record of `topic`.
    fn deserialize(&self, topic: &str, bytes: &[u8]) -> Result<Self::Value, SerdeError>;

    /// The bytes of `value`.
    fn serialize(&self, topic: &str, value: &Self::Value) -> Result<Bytes, SerdeError> {
        let mut out = Vec::new();
        self.serialize_into(topic, value, &mut out)?;
        Ok(Bytes::from(out))
    }

    /// The value a null (an absent key or value) reads as, for a type that has one. By default
    /// a type has none and a null is an error where a value of it is expected.
    fn read_null(&self) -> Option<Self::Value> {
        None
    }

    /// Whether `value` is written as a null rather than as bytes. By default never.
    fn writes_null(&self, _value: &Self::Value) -> bool {
        false
    }
}

impl<S: Serde + ?Sized> Serde for std::sync::Arc<S> {
    type Value = S::Value;

    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn serialize_into(
        &self,
        topic: &str,
        value: &Self::Value,
        out: &mut Vec<u8>,
    ) -> Result<(), SerdeError> {
        (**self).serialize_into(topic, value, out)
    }

    fn deserialize(&self, topic: &str, bytes: &[u8]) -> Result<Self::Value, SerdeError> {
        (**self).deserialize(topic, bytes)
    }

    fn read_null(&self) -> Option<Self::Value> {
        (**self).read_null()
    }

    fn writes_null(&self, value: &Self::Value) -> bool {
        (**self).writes_null(value)
    }
}

/// Reads a key or value that may be null: `None` becomes the type's null, or an error when
/// the type has none.
pub fn deserialize_nullable<S: Serde + ?Sized>(
    serde: &S,
    topic: &str,
    bytes: Option<&[u8]>,
) -> Result<S::Value, SerdeError> {
    match bytes {
        Some(bytes) => serde.deserialize(topic, bytes),
        None => serde.read_null().ok_or_else(|| {
            SerdeError::new(
                serde.name(),
                topic,
                "null where the type has none (declare the serde `Nullable` to accept nulls)",
            )
        }),
    }
}

/// Writes a key or value that may be the type's null: `None` for a null, else its bytes
/// appended to `out`.
pub fn serialize_nullable<S: Serde + ?Sized>(
    serde: &S,
    topic: &str,
    value: &S::Value,
    out: &mut Vec<u8>,
) -> Result<bool, SerdeError> {
    if serde.writes_null(value) {
        return Ok(false);
    }
    serde.serialize_into(topic, value, out)?;
    Ok(true)
}

/// Gives `S`'s type a null: the values are `Option<T>`, `None` reads from and writes as a null
/// key or value (a tombstone), `Some` goes through `S`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Nullable<S>(pub S);

impl<S: Serde> Serde for Nullable<S> {
    type Value = Option<S::Value>;

    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn serialize_into(
        &self,
        topic: &str,
        value: &Option<S::Value>,
        out: &mut Vec<u8>,
    ) -> Result<(), SerdeError> {
        match value {
            Some(v) => self.0.serialize_into(topic, v, out),
            None => Ok(()),
        }
    }

    fn deserialize(&self, topic: &str, bytes: &[u8]) -> Result<Option<S::Value>, SerdeError> {
        self.0.deserialize(topic, bytes).map(Some)
    }

    fn read_null(&self) -> Option<Option<S::Value>> {
        Some(None)
    }

    fn writes_null(&self, value: &Option<S::Value>) -> bool {
        value.is_none()
    }
}

/// UTF-8 text, as Kafka's `StringSerializer` writes it.
#[derive(Debug, Clone, Copy, Default)]
pub struct StringSerde;

impl Serde for StringSerde {
    type Value = String;

    fn name(&self) -> &'static str {
        "string"
    }

    fn serialize_into(&self, _: &str, value: &String, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.extend_from_slice(value.as_bytes());
        Ok(())
    }

    fn deserialize(&self, topic: &str, bytes: &[u8]) -> Result<String, SerdeError> {
        String::from_utf8(bytes.to_vec())
            .map_err(|e| SerdeError::new(self.name(), topic, format!("not UTF-8: {e}")))
    }
}

/// The bytes as they are.
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesSerde;

impl Serde for BytesSerde {
    type Value = Bytes;

    fn name(&self) -> &'static str {
        "bytes"
    }

    fn serialize_into(&self, _: &str, value: &Bytes, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        out.extend_from_slice(value);
        Ok(())
    }

    fn deserialize(&self, _: &str, bytes: &[u8]) -> Result<Bytes, SerdeError> {
        Ok(Bytes::copy_from_slice(bytes))
    }
}

#[cfg(test)]
mod tests;
