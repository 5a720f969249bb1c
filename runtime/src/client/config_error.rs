//! Why a setting of a client or an application cannot be used, in Kafka's terms: the
//! property, and the value or the rule it breaks (Kafka's `ConfigException`).

/// A setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A property this client or application does not know.
    #[error("unknown property {0}")]
    Unknown(String),
    /// A property's value is not one it takes.
    #[error("{property}={value} is not a valid value")]
    Invalid {
        /// The property.
        property: String,
        /// The value given.
        value: String,
    },
    /// A setting that is missing, out of range, or not to be used with another.
    #[error("{property} {rule}")]
    Rejected {
        /// The property.
        property: &'static str,
        /// The rule it breaks, said after the property's name ("requires acks=all").
        rule: String,
    },
}

impl ConfigError {
    /// `property`'s `value` is not one it takes.
    pub(crate) fn invalid(property: &str, value: &str) -> Self {
        Self::Invalid {
            property: property.to_string(),
            value: value.to_string(),
        }
    }

    /// `property` breaks `rule`.
    pub(crate) fn rejected(property: &'static str, rule: impl Into<String>) -> Self {
        Self::Rejected {
            property,
            rule: rule.into(),
        }
    }
}
