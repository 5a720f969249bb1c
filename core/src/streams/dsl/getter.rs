//! Value getters: how a join or a table operation looks up the current value of a key in a
//! table. A table with a store reads it; a table derived from one (filtered, mapped) applies
//! its operation to what the table it derives from gives, as Kafka's `KTableValueGetter`s do.

use std::sync::Arc;

use crate::streams::processor::StoreReader;
use crate::streams::store::ValueAndTimestamp;
use crate::streams::StreamsError;

/// Looks up a key.
pub(crate) type GetFn<K, V> = Arc<
    dyn Fn(&mut StoreReader<'_>, &K) -> Result<Option<ValueAndTimestamp<V>>, StreamsError>
        + Send
        + Sync,
>;

/// A table's value getter: the stores it reads (the processor using it must be connected to
/// them) and the lookup.
pub(crate) struct ValueGetter<K, V> {
    pub(crate) stores: Vec<String>,
    pub(crate) get: GetFn<K, V>,
}

impl<K, V> Clone for ValueGetter<K, V> {
    fn clone(&self) -> Self {
        Self {
            stores: self.stores.clone(),
            get: self.get.clone(),
        }
    }
}

impl<K: 'static, V: 'static> ValueGetter<K, V> {
    /// Reads the timestamped store `store`.
    pub(crate) fn of_store(store: &str) -> Self {
        let name = store.to_string();
        Self {
            stores: vec![store.to_string()],
            get: Arc::new(move |reader, key| reader.get::<K, ValueAndTimestamp<V>>(&name, key)),
        }
    }

    /// This getter's values passed through `f` (`None` hides the key).
    pub(crate) fn map<V2: 'static>(
        self,
        f: impl Fn(&K, ValueAndTimestamp<V>) -> Option<ValueAndTimestamp<V2>> + Send + Sync + 'static,
    ) -> ValueGetter<K, V2> {
        let get = self.get;
        ValueGetter {
            stores: self.stores,
            get: Arc::new(move |reader, key| Ok(get(reader, key)?.and_then(|v| f(key, v)))),
        }
    }
}
