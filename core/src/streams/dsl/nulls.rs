//! Kafka's null keys and values in eddy's types. A key or value is null when its serde writes
//! it as no bytes: a `Nullable` type's `None` (a type without a null never holds one; a null
//! on the wire fails to deserialize). Kafka Streams gives nulls a meaning at some operations,
//! and eddy's processors ask here to give them the same one: aggregations and table sources
//! skip records with a null key (stream aggregations also those with a null value), a stream
//! join's side skips them, and a left join forwards a record with a null key at once, without
//! a partner (KIP-962).

use super::options::SerdeOf;

/// Tells the nulls of one type, by its serde; where the serde is not known no value is null.
pub(crate) struct Nulls<T>(Option<SerdeOf<T>>);

impl<T> Clone for Nulls<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T: 'static> Nulls<T> {
    /// The nulls of the type `serde` writes.
    pub(crate) fn of(serde: Option<SerdeOf<T>>) -> Self {
        Self(serde)
    }

    /// Whether `value` is written as a null.
    pub(crate) fn is_null(&self, value: &T) -> bool {
        self.0.as_ref().is_some_and(|s| s.writes_null(value))
    }
}
