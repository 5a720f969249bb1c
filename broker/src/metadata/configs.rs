//! Topic configurations: the names Kafka uses, their defaults, validation, and the typed
//! [`LogConfig`] they produce.

use std::collections::BTreeMap;

use crate::storage::LogConfig;

/// A topic configuration that eddy acts on or keeps: its name and default value.
struct Known {
    name: &'static str,
    default: &'static str,
    check: fn(&str) -> Result<(), String>,
}

fn long(v: &str) -> Result<(), String> {
    v.parse::<i64>()
        .map(|_| ())
        .map_err(|_| format!("{v:?} is not a number"))
}

fn long_at_least(min: i64) -> impl Fn(&str) -> Result<(), String> {
    move |v| match v.parse::<i64>() {
        Ok(n) if n >= min => Ok(()),
        Ok(n) => Err(format!("{n} is below the minimum {min}")),
        Err(_) => Err(format!("{v:?} is not a number")),
    }
}

fn positive(v: &str) -> Result<(), String> {
    long_at_least(1)(v)
}

fn at_least_minus_one(v: &str) -> Result<(), String> {
    long_at_least(-1)(v)
}

fn non_negative(v: &str) -> Result<(), String> {
    long_at_least(0)(v)
}

fn segment_bytes(v: &str) -> Result<(), String> {
    long_at_least(1024)(v)
}

fn cleanup_policy(v: &str) -> Result<(), String> {
    let parts: Vec<&str> = v.split(',').map(str::trim).collect();
    if !parts.is_empty() && parts.iter().all(|p| matches!(*p, "delete" | "compact")) {
        Ok(())
    } else {
        Err(format!("{v:?} is not a list of delete and compact"))
    }
}

fn timestamp_type(v: &str) -> Result<(), String> {
    match v {
        "CreateTime" | "LogAppendTime" => Ok(()),
        _ => Err(format!("{v:?} is neither CreateTime nor LogAppendTime")),
    }
}

fn compression_type(v: &str) -> Result<(), String> {
    match v {
        "producer" | "uncompressed" | "none" | "gzip" | "snappy" | "lz4" | "zstd" => Ok(()),
        _ => Err(format!("{v:?} is not a compression type")),
    }
}

fn ratio(v: &str) -> Result<(), String> {
    match v.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(()),
        _ => Err(format!("{v:?} is not a ratio between 0 and 1")),
    }
}

fn boolean(v: &str) -> Result<(), String> {
    match v {
        "true" | "false" => Ok(()),
        _ => Err(format!("{v:?} is neither true nor false")),
    }
}

fn any(_: &str) -> Result<(), String> {
    Ok(())
}

/// Every topic configuration eddy accepts, in the order `DescribeConfigs` lists them. Some are
/// kept only so that clients which set them (Kafka Streams sets several) are not refused; the
/// book lists which ones eddy acts on.
const KNOWN: &[Known] = &[
    Known {
        name: "cleanup.policy",
        default: "delete",
        check: cleanup_policy,
    },
    Known {
        name: "compression.type",
        default: "producer",
        check: compression_type,
    },
    Known {
        name: "delete.retention.ms",
        default: "86400000",
        check: non_negative,
    },
    Known {
        name: "file.delete.delay.ms",
        default: "60000",
        check: non_negative,
    },
    Known {
        name: "flush.messages",
        default: "1",
        check: positive,
    },
    Known {
        name: "flush.ms",
        default: "1000",
        check: non_negative,
    },
    Known {
        name: "index.interval.bytes",
        default: "4096",
        check: non_negative,
    },
    Known {
        name: "max.compaction.lag.ms",
        default: "9223372036854775807",
        check: positive,
    },
    Known {
        name: "max.message.bytes",
        default: "1048588",
        check: non_negative,
    },
    Known {
        name: "message.timestamp.after.max.ms",
        default: "3600000",
        check: non_negative,
    },
    Known {
        name: "message.timestamp.before.max.ms",
        default: "9223372036854775807",
        check: non_negative,
    },
    Known {
        name: "message.timestamp.type",
        default: "CreateTime",
        check: timestamp_type,
    },
    Known {
        name: "min.cleanable.dirty.ratio",
        default: "0.5",
        check: ratio,
    },
    Known {
        name: "min.compaction.lag.ms",
        default: "0",
        check: non_negative,
    },
    Known {
        name: "min.insync.replicas",
        default: "1",
        check: positive,
    },
    Known {
        name: "preallocate",
        default: "false",
        check: boolean,
    },
    Known {
        name: "retention.bytes",
        default: "-1",
        check: at_least_minus_one,
    },
    Known {
        name: "retention.ms",
        default: "604800000",
        check: at_least_minus_one,
    },
    Known {
        name: "segment.bytes",
        default: "1073741824",
        check: segment_bytes,
    },
    Known {
        name: "segment.index.bytes",
        default: "10485760",
        check: positive,
    },
    Known {
        name: "segment.jitter.ms",
        default: "0",
        check: non_negative,
    },
    Known {
        name: "segment.ms",
        default: "604800000",
        check: positive,
    },
    Known {
        name: "unclean.leader.election.enable",
        default: "false",
        check: boolean,
    },
    Known {
        name: "message.downconversion.enable",
        default: "true",
        check: boolean,
    },
    Known {
        name: "local.retention.bytes",
        default: "-2",
        check: long,
    },
    Known {
        name: "local.retention.ms",
        default: "-2",
        check: long,
    },
    Known {
        name: "remote.storage.enable",
        default: "false",
        check: boolean,
    },
    Known {
        name: "follower.replication.throttled.replicas",
        default: "",
        check: any,
    },
    Known {
        name: "leader.replication.throttled.replicas",
        default: "",
        check: any,
    },
];

fn known(name: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|k| k.name == name)
}

/// Checks one configuration: a name Kafka knows for topics and a value of the right shape.
pub(crate) fn validate(name: &str, value: &str) -> Result<(), String> {
    let known = known(name).ok_or_else(|| format!("unknown topic config {name:?}"))?;
    (known.check)(value).map_err(|e| format!("invalid value for {name}: {e}"))
}

/// One entry of a topic's full configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigEntry {
    /// The configuration's name.
    pub name: &'static str,
    /// Its value for this topic.
    pub value: String,
    /// Whether the value is the default (not set on the topic).
    pub is_default: bool,
}

/// Every configuration of a topic: its own values where it has them, defaults elsewhere.
pub(crate) fn describe(overrides: &BTreeMap<String, String>) -> Vec<ConfigEntry> {
    KNOWN
        .iter()
        .map(|k| match overrides.get(k.name) {
            Some(v) => ConfigEntry {
                name: k.name,
                value: v.clone(),
                is_default: false,
            },
            None => ConfigEntry {
                name: k.name,
                value: k.default.to_string(),
                is_default: true,
            },
        })
        .collect()
}

/// The typed log settings for a topic's configuration over the broker's defaults.
pub(crate) fn log_config(defaults: &LogConfig, overrides: &BTreeMap<String, String>) -> LogConfig {
    let mut config = defaults.clone();
    let get = |name: &str| overrides.get(name).and_then(|v| v.parse::<i64>().ok());
    if let Some(v) = get("segment.bytes").and_then(|v| u64::try_from(v).ok()) {
        config.segment_bytes = v;
    }
    if let Some(v) = get("segment.ms") {
        config.segment_ms = v;
    }
    if let Some(v) = get("retention.ms") {
        config.retention_ms = v;
    }
    if let Some(v) = get("retention.bytes") {
        config.retention_bytes = v;
    }
    if let Some(v) = get("delete.retention.ms") {
        config.delete_retention_ms = v;
    }
    if let Some(v) = get("max.message.bytes").and_then(|v| usize::try_from(v).ok()) {
        config.max_message_bytes = v;
    }
    if let Some(v) = get("index.interval.bytes").and_then(|v| u64::try_from(v).ok()) {
        config.index_interval_bytes = v;
    }
    if let Some(v) = get("flush.messages") {
        config.fsync_before_ack = v <= 1;
    }
    if let Some(v) = get("flush.ms") {
        config.flush_ms = v;
    }
    if let Some(policy) = overrides.get("cleanup.policy") {
        config.delete = policy.split(',').any(|p| p.trim() == "delete");
        config.compact = policy.split(',').any(|p| p.trim() == "compact");
    }
    if let Some(v) = get("message.timestamp.before.max.ms") {
        config.timestamp_before_max_ms = v;
    }
    if let Some(v) = get("message.timestamp.after.max.ms") {
        config.timestamp_after_max_ms = v;
    }
    if let Some(t) = overrides.get("message.timestamp.type") {
        config.log_append_time = t == "LogAppendTime";
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_by_name() {
        assert!(validate("retention.ms", "-1").is_ok());
        assert!(validate("retention.ms", "-2").is_err());
        assert!(validate("retention.ms", "soon").is_err());
        assert!(validate("cleanup.policy", "compact,delete").is_ok());
        assert!(validate("cleanup.policy", "shred").is_err());
        assert!(validate("segment.bytes", "100").is_err());
        assert!(validate("no.such.config", "1").is_err());
        assert!(validate("message.timestamp.type", "LogAppendTime").is_ok());
    }

    #[test]
    fn overrides_shape_the_log_config() {
        let overrides: BTreeMap<String, String> = [
            ("cleanup.policy", "compact"),
            ("segment.bytes", "4096"),
            ("flush.messages", "10000"),
            ("message.timestamp.type", "LogAppendTime"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let config = log_config(&LogConfig::default(), &overrides);
        assert!(config.compact && !config.delete);
        assert_eq!(config.segment_bytes, 4096);
        assert!(!config.fsync_before_ack);
        assert!(config.log_append_time);
        let described = describe(&overrides);
        let policy = described
            .iter()
            .find(|e| e.name == "cleanup.policy")
            .unwrap();
        assert_eq!(
            (policy.value.as_str(), policy.is_default),
            ("compact", false)
        );
        let retention = described.iter().find(|e| e.name == "retention.ms").unwrap();
        assert_eq!(
            (retention.value.as_str(), retention.is_default),
            ("604800000", true)
        );
    }
}
