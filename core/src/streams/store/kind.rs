//! Kinds of store. What a kind decides — how its writes are keyed in its changelog topic,
//! how that topic is configured, and the store it is built as over its layers, which is
//! what processors and interactive queries reach — is one implementation of [`KindRules`],
//! beside the kind's store ([`super::LayeredKeyValueStore`], [`super::LayeredWindowStore`],
//! [`super::LayeredSessionStore`]). [`StoreKind`] names the kinds a topology declares and
//! finds each one's rules: a new kind is its store, its rules and one name here.

use super::layers::LayerConfig;
use super::{BytesStore, StoreInstance, StoreKind};

/// `windowstore.changelog.additional.retention.ms`, Kafka Streams' default: how much longer
/// than its store a window or session store's changelog keeps records, so that clocks that
/// drift between the application and the brokers lose nothing still live.
pub(crate) const WINDOWED_CHANGELOG_ADDITIONAL_RETENTION_MS: i64 = 86_400_000;

/// What the layers under a store and the runtime over it ask of its kind.
pub trait KindRules: Send + Sync {
    /// The kind's name in messages: `key-value`, `window`, `session`.
    fn name(&self) -> &'static str;

    /// How long the store keeps what it holds, in ms of event time (0: until it is deleted).
    fn retention_ms(&self) -> i64;

    /// The configs of the store's changelog topic, as Kafka Streams creates it.
    fn changelog_configs(&self) -> Vec<(&'static str, String)>;

    /// The store called `name` over `inner`, with the layers `config` asks for; its layer of
    /// change-logging keys the writes as this kind's changelog does.
    fn build(&self, name: &str, inner: Box<dyn BytesStore>, config: LayerConfig) -> StoreInstance;
}

/// The changelog topic configs of a kind that keeps data for `retention_ms`: compacted and
/// deleted after the retention and Kafka Streams' margin.
pub(crate) fn windowed_changelog_configs(retention_ms: i64) -> Vec<(&'static str, String)> {
    vec![
        ("cleanup.policy", "compact,delete".to_string()),
        ("message.timestamp.type", "CreateTime".to_string()),
        (
            "retention.ms",
            retention_ms
                .saturating_add(WINDOWED_CHANGELOG_ADDITIONAL_RETENTION_MS)
                .to_string(),
        ),
    ]
}

impl StoreKind {
    /// The rules of this kind.
    pub fn rules(self) -> Box<dyn KindRules> {
        match self {
            Self::KeyValue => Box::new(super::layered::KeyValueRules),
            Self::Window { retention_ms } => Box::new(super::window::WindowRules { retention_ms }),
            Self::Session { retention_ms } => {
                Box::new(super::session::SessionRules { retention_ms })
            }
        }
    }
}
