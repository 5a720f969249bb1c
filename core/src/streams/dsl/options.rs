//! The small option types every DSL operation takes, named as in Kafka Streams: [`Consumed`]
//! (how a source reads), [`Produced`] (how a sink writes), [`Grouped`] (how a re-keyed stream is
//! repartitioned), [`Materialized`] (the store of an aggregation or table) and [`Named`] (the
//! name of a processor). Serdes left out are inherited from upstream where the types did not
//! change; a serde that is needed and cannot be inherited is an error when the topology is
//! built.

use std::sync::Arc;

use crate::serde::Serde;
use crate::streams::{StreamPartitioner, TimestampExtractor};

/// A shared serde of `T`.
pub(crate) type SerdeOf<T> = Arc<dyn Serde<Value = T>>;

fn arc<S: Serde>(serde: S) -> SerdeOf<S::Value> {
    Arc::new(serde)
}

/// The name of a processor, instead of a generated one (`KSTREAM-FILTER-0000000003`).
/// Names keep stores and internal topics stable when the topology changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named(pub(crate) String);

impl Named {
    /// The name `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }
}

/// How a source reads its topic.
pub struct Consumed<K, V> {
    pub(crate) keys: Option<SerdeOf<K>>,
    pub(crate) values: Option<SerdeOf<V>>,
    pub(crate) name: Option<String>,
    pub(crate) extractor: Option<Arc<dyn TimestampExtractor>>,
}

impl<K: 'static, V: 'static> Consumed<K, V> {
    /// Reads keys and values with these serdes.
    pub fn with(keys: impl Serde<Value = K>, values: impl Serde<Value = V>) -> Self {
        Self {
            keys: Some(arc(keys)),
            values: Some(arc(values)),
            name: None,
            extractor: None,
        }
    }

    /// Names the source node.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Takes event time from `extractor` instead of the record's timestamp.
    pub fn with_timestamp_extractor(
        mut self,
        extractor: impl TimestampExtractor + 'static,
    ) -> Self {
        self.extractor = Some(Arc::new(extractor));
        self
    }
}

/// How a sink writes its topic.
pub struct Produced<K, V> {
    pub(crate) keys: Option<SerdeOf<K>>,
    pub(crate) values: Option<SerdeOf<V>>,
    pub(crate) name: Option<String>,
    pub(crate) partitioner: Option<StreamPartitioner<K, V>>,
}

impl<K, V> Default for Produced<K, V> {
    fn default() -> Self {
        Self {
            keys: None,
            values: None,
            name: None,
            partitioner: None,
        }
    }
}

impl<K: 'static, V: 'static> Produced<K, V> {
    /// Writes keys and values with these serdes.
    pub fn with(keys: impl Serde<Value = K>, values: impl Serde<Value = V>) -> Self {
        Self {
            keys: Some(arc(keys)),
            values: Some(arc(values)),
            ..Self::default()
        }
    }

    /// Names the sink node.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Chooses partitions with `partitioner` (`(topic, key, value, partitions)`; `None` for the
    /// default) instead of murmur2 of the serialized key.
    pub fn with_partitioner(
        mut self,
        partitioner: impl Fn(&str, &K, &V, i32) -> Option<i32> + Send + Sync + 'static,
    ) -> Self {
        self.partitioner = Some(Arc::new(partitioner));
        self
    }
}

/// How a stream is grouped: the serdes and name of its repartition topic, when it needs one.
pub struct Grouped<K, V> {
    pub(crate) keys: Option<SerdeOf<K>>,
    pub(crate) values: Option<SerdeOf<V>>,
    pub(crate) name: Option<String>,
}

impl<K, V> Default for Grouped<K, V> {
    fn default() -> Self {
        Self {
            keys: None,
            values: None,
            name: None,
        }
    }
}

impl<K: 'static, V: 'static> Grouped<K, V> {
    /// Repartitions with these serdes.
    pub fn with(keys: impl Serde<Value = K>, values: impl Serde<Value = V>) -> Self {
        Self {
            keys: Some(arc(keys)),
            values: Some(arc(values)),
            name: None,
        }
    }

    /// Names the repartition topic (`<name>-repartition`) and its nodes (Kafka's
    /// `Grouped.as`).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// The store of a table or an aggregation.
pub struct Materialized<K, V> {
    pub(crate) name: Option<String>,
    pub(crate) keys: Option<SerdeOf<K>>,
    pub(crate) values: Option<SerdeOf<V>>,
    pub(crate) logging: bool,
    pub(crate) retention_ms: Option<i64>,
}

impl<K, V> Default for Materialized<K, V> {
    fn default() -> Self {
        Self {
            name: None,
            keys: None,
            values: None,
            logging: true,
            retention_ms: None,
        }
    }
}

impl<K: 'static, V: 'static> Materialized<K, V> {
    /// A store called `name` (Kafka's `Materialized.as`): queryable, and the prefix of its
    /// changelog topic.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// A store with these serdes and a generated name.
    pub fn with(keys: impl Serde<Value = K>, values: impl Serde<Value = V>) -> Self {
        Self {
            keys: Some(arc(keys)),
            values: Some(arc(values)),
            ..Self::default()
        }
    }

    /// The same store with this key serde.
    pub fn with_key_serde(mut self, keys: impl Serde<Value = K>) -> Self {
        self.keys = Some(arc(keys));
        self
    }

    /// The same store with this value serde.
    pub fn with_value_serde(mut self, values: impl Serde<Value = V>) -> Self {
        self.values = Some(arc(values));
        self
    }

    /// The same store without a changelog topic.
    pub fn with_logging_disabled(mut self) -> Self {
        self.logging = false;
        self
    }

    /// How long a window store keeps windows, in milliseconds (at least window size plus
    /// grace; that is the default).
    pub fn with_retention(mut self, retention_ms: i64) -> Self {
        self.retention_ms = Some(retention_ms);
        self
    }
}
