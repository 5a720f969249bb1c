//! [`KStream::match_pattern`]: finds a [`Pattern`] among each key's events. The stream is
//! repartitioned first when its key changed upstream, as for an aggregation; the pattern's
//! per-key state goes to a key-value store (with a changelog unless disabled).

use std::sync::Arc;
use std::time::Duration;

use super::kstream::KStream;
use super::ops::PassThrough;
use super::options::Materialized;
use crate::serde::BytesSerde;
use crate::streams::pattern::{compile, Matcher, Outputs, Pattern, PatternMatch};
use crate::streams::processor::Data;
use crate::streams::store::StoreBuilder;
use crate::streams::TopologyError;

/// How a stream is matched against a pattern: its store, how late a record may be, and
/// whether timed-out partial matches come out too.
pub struct Matching<K, V> {
    materialized: Materialized<K, V>,
    lateness_ms: i64,
    timeouts: bool,
}

impl<K: 'static, V: 'static> Matching<K, V> {
    /// Matching with this store (its name, serdes, logging), no lateness and no timeouts.
    pub fn with(materialized: Materialized<K, V>) -> Self {
        Matching {
            materialized,
            lateness_ms: 0,
            timeouts: false,
        }
    }

    /// Records up to `lateness` older than stream time are still matched, in timestamp
    /// order; older ones are dropped (and counted). The default is none.
    pub fn allowed_lateness(mut self, lateness: Duration) -> Self {
        self.lateness_ms = i64::try_from(lateness.as_millis()).unwrap_or(i64::MAX);
        self
    }

    /// Partial matches that time out (their pattern's `within` passed) come out as a stream
    /// of their own.
    pub fn with_timeouts(mut self) -> Self {
        self.timeouts = true;
        self
    }
}

/// The streams a pattern yields: its matches and, when asked for, its timed-out partial
/// matches.
pub struct PatternStreams<K, V> {
    /// The matches, each with the key it was found under, at the timestamp of the event that
    /// completed it.
    pub matches: KStream<K, PatternMatch<V>>,
    /// The timed-out partial matches, at the time they timed out.
    pub timeouts: Option<KStream<K, PatternMatch<V>>>,
}

impl<K: Data, V: Data> KStream<K, V> {
    /// The matches of `pattern` among each key's events, in event time, with the state kept
    /// in the store `materialized` describes.
    ///
    /// ```
    /// use eddy_core::serde::StringSerde;
    /// use eddy_core::streams::pattern::Pattern;
    /// use eddy_core::streams::{Consumed, Materialized, StreamsBuilder};
    ///
    /// let builder = StreamsBuilder::new();
    /// let pattern = Pattern::<String>::begin("hold")
    ///     .where_(|e| e == "held")
    ///     .next("release")
    ///     .where_(|e| e == "released");
    /// builder
    ///     .stream("order-events", Consumed::with(StringSerde, StringSerde))
    ///     .match_pattern(pattern, Materialized::named("holds"))
    ///     .foreach(|order, found| println!("{order}: {found:?}"));
    /// let topology = builder.build().unwrap();
    /// assert!(topology.describe().to_string().contains("stores: [holds]"));
    /// ```
    pub fn match_pattern(
        self,
        pattern: Pattern<V>,
        materialized: Materialized<K, V>,
    ) -> KStream<K, PatternMatch<V>> {
        self.match_pattern_with(pattern, Matching::with(materialized))
            .matches
    }

    /// [`match_pattern`](Self::match_pattern) with the lateness and timeouts `matching` says.
    pub fn match_pattern_with(
        mut self,
        pattern: Pattern<V>,
        matching: Matching<K, V>,
    ) -> PatternStreams<K, V> {
        let builder = self.builder.clone();
        let prefix = "KSTREAM-PATTERN-";
        let materialized = matching.materialized;
        let store = match &materialized.name {
            Some(n) => n.clone(),
            None => builder.new_store_name(prefix),
        };
        let name = builder.name(self.next_name.take(), prefix);
        let failed = |builder: &crate::streams::StreamsBuilder, name: &str| PatternStreams {
            matches: KStream::new(builder.clone(), name.to_string(), None, None),
            timeouts: None,
        };
        let nfa = match compile(&pattern) {
            Ok(nfa) => Arc::new(nfa),
            Err(e) => {
                builder.fail(TopologyError::Invalid(format!("pattern of {name}: {e}")));
                return failed(&builder, &name);
            }
        };
        let keys = materialized.keys.clone().or(self.keys.clone());
        let values = materialized.values.clone().or(self.values.clone());
        let (Some(keys), Some(values)) = (keys, values) else {
            builder.fail(TopologyError::MissingSerde {
                node: name.clone(),
                which: "key or value (give them with Materialized)",
            });
            return failed(&builder, &name);
        };
        let parent = if self.repartition_required {
            self.repartition_through(&store, Some(keys.clone()), Some(values.clone()))
        } else {
            self.node.clone()
        };
        let outputs = if matching.timeouts {
            Outputs::Split {
                matches: format!("{name}-matches"),
                timeouts: format!("{name}-timeouts"),
            }
        } else {
            Outputs::Matches
        };
        let lateness = matching.lateness_ms;
        let (k, v, s, o) = (keys.clone(), values.clone(), store.clone(), outputs.clone());
        let mut definition = StoreBuilder::key_value(&store, BytesSerde, BytesSerde);
        if !materialized.logging {
            definition = definition.with_logging_disabled();
        }
        builder.with_topology(|t| {
            let p = t.index_of(&parent).into_iter().collect();
            t.add_processor_node(&name, p, move || {
                Matcher::new(
                    nfa.clone(),
                    s.clone(),
                    k.clone(),
                    v.clone(),
                    lateness,
                    o.clone(),
                )
            })?;
            t.add_state_store(definition, &[&name])?;
            if let Outputs::Split { matches, timeouts } = &outputs {
                for child in [matches, timeouts] {
                    let p = t.index_of(&name).into_iter().collect();
                    t.add_processor_node::<PassThrough, K, PatternMatch<V>, K, PatternMatch<V>>(
                        child,
                        p,
                        || PassThrough,
                    )?;
                }
            }
            Ok(())
        });
        let stream = |node: String| KStream::new(builder.clone(), node, Some(keys.clone()), None);
        match outputs {
            Outputs::Matches => PatternStreams {
                matches: stream(name),
                timeouts: None,
            },
            Outputs::Split { matches, timeouts } => PatternStreams {
                matches: stream(matches),
                timeouts: Some(stream(timeouts)),
            },
        }
    }
}
