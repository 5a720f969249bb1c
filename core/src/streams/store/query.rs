//! [`StoreDecoder`]: a store's keys and values as its serdes read them, from outside the task
//! that writes it — what interactive queries and the `TestDriver`'s store views decode with.
//! The values of the DSL's stores carry their timestamps; the reader strips them.

use std::sync::Arc;

use crate::serde::{Serde, SerdeError};
use crate::streams::store::{KeyValueSerdes, StoreBuilder, ValueAndTimestamp};

enum Values<V> {
    Plain(Arc<dyn Serde<Value = V>>),
    Timestamped(Arc<dyn Serde<Value = ValueAndTimestamp<V>>>),
}

/// Reads the keys and values of one store.
pub struct StoreDecoder<K, V> {
    name: String,
    keys: Arc<dyn Serde<Value = K>>,
    values: Values<V>,
}

impl<K: 'static, V: 'static> StoreDecoder<K, V> {
    /// The reader of `definition`'s store, or `None` when its keys or values are not `K`
    /// and `V`.
    pub fn new(definition: &StoreBuilder) -> Option<Self> {
        let serdes = definition.serdes().clone();
        let (keys, values) = if definition.is_timestamped() {
            let serdes = serdes
                .downcast::<KeyValueSerdes<K, ValueAndTimestamp<V>>>()
                .ok()?;
            (
                serdes.keys.clone(),
                Values::Timestamped(serdes.values.clone()),
            )
        } else {
            let serdes = serdes.downcast::<KeyValueSerdes<K, V>>().ok()?;
            (serdes.keys.clone(), Values::Plain(serdes.values.clone()))
        };
        Some(Self {
            name: definition.name().to_string(),
            keys,
            values,
        })
    }

    /// The bytes the store keeps `key` under.
    pub fn key_bytes(&self, key: &K) -> Result<Vec<u8>, SerdeError> {
        let mut out = Vec::new();
        self.keys.serialize_into(&self.name, key, &mut out)?;
        Ok(out)
    }

    /// A key the store holds.
    pub fn key(&self, bytes: &[u8]) -> Result<K, SerdeError> {
        self.keys.deserialize(&self.name, bytes)
    }

    /// A value the store holds, without its timestamp.
    pub fn value(&self, bytes: &[u8]) -> Result<V, SerdeError> {
        match &self.values {
            Values::Plain(serde) => serde.deserialize(&self.name, bytes),
            Values::Timestamped(serde) => Ok(serde.deserialize(&self.name, bytes)?.value),
        }
    }
}
