//! Serdes for any type with `serde`'s derives: JSON (readable, what other languages read) and
//! bincode (compact and fast, for topics and stores only eddy reads).

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Serde, SerdeError};

/// A serde type for any `T`: a marker with no data, cheap to create and copy.
macro_rules! marker {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name<T>(PhantomData<fn() -> T>);

        impl<T> $name<T> {
            /// The serde for `T`.
            pub fn new() -> Self {
                Self(PhantomData)
            }
        }

        impl<T> Default for $name<T> {
            fn default() -> Self {
                Self::new()
            }
        }

        impl<T> Clone for $name<T> {
            fn clone(&self) -> Self {
                Self::new()
            }
        }

        impl<T> std::fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}<{}>", stringify!($name), std::any::type_name::<T>())
            }
        }
    };
}

marker!(
    /// JSON through `serde_json`.
    JsonSerde
);
marker!(
    /// bincode (standard configuration: variable-length integers, little-endian) through its
    /// `serde` support.
    BincodeSerde
);

impl<T: Serialize + DeserializeOwned + 'static> Serde for JsonSerde<T> {
    type Value = T;

    fn name(&self) -> &'static str {
        "json"
    }

    fn serialize_into(&self, topic: &str, value: &T, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        serde_json::to_writer(out, value).map_err(|e| SerdeError::new("json", topic, e.to_string()))
    }

    fn deserialize(&self, topic: &str, bytes: &[u8]) -> Result<T, SerdeError> {
        serde_json::from_slice(bytes).map_err(|e| SerdeError::new("json", topic, e.to_string()))
    }
}

/// The most bytes a bincode value may claim to hold: lengths read from a record are bounded
/// by it before anything is allocated.
const BINCODE_LIMIT: usize = 64 << 20;

impl<T: Serialize + DeserializeOwned + 'static> Serde for BincodeSerde<T> {
    type Value = T;

    fn name(&self) -> &'static str {
        "bincode"
    }

    fn serialize_into(&self, topic: &str, value: &T, out: &mut Vec<u8>) -> Result<(), SerdeError> {
        let config = bincode::config::standard();
        let bytes = bincode::serde::encode_to_vec(value, config)
            .map_err(|e| SerdeError::new("bincode", topic, e.to_string()))?;
        out.extend_from_slice(&bytes);
        Ok(())
    }

    fn deserialize(&self, topic: &str, bytes: &[u8]) -> Result<T, SerdeError> {
        let config = bincode::config::standard().with_limit::<BINCODE_LIMIT>();
        let (value, read) = bincode::serde::decode_from_slice(bytes, config)
            .map_err(|e| SerdeError::new("bincode", topic, e.to_string()))?;
        if read != bytes.len() {
            return Err(SerdeError::new(
                "bincode",
                topic,
                format!("{} bytes after the value", bytes.len() - read),
            ));
        }
        Ok(value)
    }
}
