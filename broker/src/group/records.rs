//! The records of `__consumer_offsets`, in Kafka's own layout, so that the topic reads the
//! same as Kafka's:
//!
//! - key version 1 (`OffsetCommitKey`: group, topic, partition) with an `OffsetCommitValue`
//!   version 3 (offset, leader epoch, metadata, commit time); a null value deletes the offset;
//! - key version 2 (`GroupMetadataKey`: group) with a `GroupMetadataValue` version 3 (protocol
//!   type, generation, protocol, leader, state time, members); a null value deletes the group.
//!
//! Strings are i16-length-prefixed UTF-8 and byte arrays i32-length-prefixed, big-endian.
//! Encoding refuses a value its length field cannot hold. Decoding checks every length against
//! what remains, takes only the versions it knows, requires every byte to be read, and never
//! panics.

use bytes::{BufMut, Bytes, BytesMut};

use crate::internal_records::{
    i32_len, put_bytes, put_nullable_string, put_string, Reader, TooLong,
};

/// A committed offset, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OffsetValue {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: String,
    pub(crate) commit_timestamp: i64,
}

/// A member as stored with its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredMember {
    pub(crate) member_id: String,
    pub(crate) group_instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) session_timeout_ms: i32,
    pub(crate) subscription: Bytes,
    pub(crate) assignment: Bytes,
}

/// A group as stored after each rebalance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupValue {
    pub(crate) protocol_type: String,
    pub(crate) generation: i32,
    pub(crate) protocol: Option<String>,
    pub(crate) leader: Option<String>,
    pub(crate) state_timestamp: i64,
    pub(crate) members: Vec<StoredMember>,
}

/// What a key of `__consumer_offsets` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OffsetsKey {
    /// A group's committed offset for one partition.
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    /// A group's metadata.
    Group { group: String },
}

impl OffsetsKey {
    pub(crate) fn encode(&self) -> Result<Bytes, TooLong> {
        let mut buf = BytesMut::new();
        match self {
            OffsetsKey::Offset {
                group,
                topic,
                partition,
            } => {
                buf.put_i16(1);
                put_string(&mut buf, "group id", group)?;
                put_string(&mut buf, "topic", topic)?;
                buf.put_i32(*partition);
            }
            OffsetsKey::Group { group } => {
                buf.put_i16(2);
                put_string(&mut buf, "group id", group)?;
            }
        }
        Ok(buf.freeze())
    }

    /// The key `bytes` hold, all of them: a key with bytes left over is not one.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        let mut r = Reader(bytes);
        let key = match r.i16()? {
            0 | 1 => OffsetsKey::Offset {
                group: r.string()?,
                topic: r.string()?,
                partition: r.i32()?,
            },
            2 => OffsetsKey::Group { group: r.string()? },
            _ => return None,
        };
        r.is_empty().then_some(key)
    }

    /// The group the key belongs to.
    pub(crate) fn group(&self) -> &str {
        match self {
            OffsetsKey::Offset { group, .. } | OffsetsKey::Group { group } => group,
        }
    }
}

impl OffsetValue {
    pub(crate) fn encode(&self) -> Result<Bytes, TooLong> {
        let mut buf = BytesMut::new();
        buf.put_i16(3);
        buf.put_i64(self.offset);
        buf.put_i32(self.leader_epoch);
        put_string(&mut buf, "offset metadata", &self.metadata)?;
        buf.put_i64(self.commit_timestamp);
        Ok(buf.freeze())
    }

    /// An `OffsetCommitValue` of versions 0 to 3, every byte of it.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        let mut r = Reader(bytes);
        let version = r.i16()?;
        if !(0..=3).contains(&version) {
            return None;
        }
        let offset = r.i64()?;
        let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
        let metadata = r.string()?;
        let commit_timestamp = r.i64()?;
        if version == 1 {
            r.i64()?; // the expire timestamp of Kafka 1.x, not kept
        }
        r.is_empty().then_some(Self {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp,
        })
    }
}

impl GroupValue {
    pub(crate) fn encode(&self) -> Result<Bytes, TooLong> {
        let mut buf = BytesMut::new();
        buf.put_i16(3);
        put_string(&mut buf, "protocol type", &self.protocol_type)?;
        buf.put_i32(self.generation);
        put_nullable_string(&mut buf, "protocol", self.protocol.as_deref())?;
        put_nullable_string(&mut buf, "leader", self.leader.as_deref())?;
        buf.put_i64(self.state_timestamp);
        buf.put_i32(i32_len("members", self.members.len())?);
        for m in &self.members {
            put_string(&mut buf, "member id", &m.member_id)?;
            put_nullable_string(
                &mut buf,
                "group instance id",
                m.group_instance_id.as_deref(),
            )?;
            put_string(&mut buf, "client id", &m.client_id)?;
            put_string(&mut buf, "client host", &m.client_host)?;
            buf.put_i32(m.rebalance_timeout_ms);
            buf.put_i32(m.session_timeout_ms);
            put_bytes(&mut buf, "subscription", &m.subscription)?;
            put_bytes(&mut buf, "assignment", &m.assignment)?;
        }
        Ok(buf.freeze())
    }

    /// A `GroupMetadataValue` of versions 0 to 3, every byte of it.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        let mut r = Reader(bytes);
        let version = r.i16()?;
        if !(0..=3).contains(&version) {
            return None;
        }
        let protocol_type = r.string()?;
        let generation = r.i32()?;
        let protocol = r.nullable_string()?;
        let leader = r.nullable_string()?;
        let state_timestamp = if version >= 2 { r.i64()? } else { -1 };
        // A member takes at least 20 bytes: refuse counts the input cannot hold.
        let count = usize::try_from(r.i32()?)
            .ok()
            .filter(|&n| n <= r.0.len() / 20)?;
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            let member_id = r.string()?;
            let group_instance_id = if version >= 3 {
                r.nullable_string()?
            } else {
                None
            };
            let client_id = r.string()?;
            let client_host = r.string()?;
            let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { 0 };
            let session_timeout_ms = r.i32()?;
            let subscription = Bytes::copy_from_slice(r.bytes()?);
            let assignment = Bytes::copy_from_slice(r.bytes()?);
            members.push(StoredMember {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                subscription,
                assignment,
            });
        }
        r.is_empty().then_some(Self {
            protocol_type,
            generation,
            protocol,
            leader,
            state_timestamp,
            members,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn records_round_trip() {
        let key = OffsetsKey::Offset {
            group: "billing".into(),
            topic: "orders".into(),
            partition: 4,
        };
        assert_eq!(OffsetsKey::decode(&key.encode().unwrap()), Some(key));
        let value = OffsetValue {
            offset: 42,
            leader_epoch: 0,
            metadata: "m".into(),
            commit_timestamp: 7,
        };
        assert_eq!(OffsetValue::decode(&value.encode().unwrap()), Some(value));
        let group = GroupValue {
            protocol_type: "consumer".into(),
            generation: 3,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            state_timestamp: 9,
            members: vec![StoredMember {
                member_id: "m-1".into(),
                group_instance_id: Some("host-a".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        assert_eq!(GroupValue::decode(&group.encode().unwrap()), Some(group));
        let key = OffsetsKey::Group { group: "g".into() };
        assert_eq!(OffsetsKey::decode(&key.encode().unwrap()), Some(key));
    }

    #[test]
    fn a_string_longer_than_its_length_field_is_refused_not_wrapped() {
        // 65,536 + 6 bytes would be written with length 6 by a narrowing cast: the key would
        // then decode as the group "victim".
        let forged = format!("{}victim", "x".repeat(65_536));
        let key = OffsetsKey::Offset {
            group: forged.clone(),
            topic: "orders".into(),
            partition: 0,
        };
        let error = key.encode().unwrap_err();
        assert_eq!((error.field, error.len), ("group id", forged.len()));
        assert!(OffsetsKey::Group { group: forged }.encode().is_err());
        let longest = "x".repeat(i16::MAX as usize);
        let key = OffsetsKey::Group {
            group: longest.clone(),
        };
        assert_eq!(OffsetsKey::decode(&key.encode().unwrap()), Some(key));
    }

    #[test]
    fn records_with_bytes_left_over_or_unknown_versions_are_not_decoded() {
        let key = OffsetsKey::Offset {
            group: "victim".into(),
            topic: "orders".into(),
            partition: 0,
        };
        let mut longer = key.encode().unwrap().to_vec();
        longer.extend_from_slice(b"tail");
        assert_eq!(OffsetsKey::decode(&longer), None);
        let value = OffsetValue {
            offset: 1,
            leader_epoch: 0,
            metadata: String::new(),
            commit_timestamp: 2,
        };
        let mut longer = value.encode().unwrap().to_vec();
        longer.push(0);
        assert_eq!(OffsetValue::decode(&longer), None);
        let mut unknown = value.encode().unwrap().to_vec();
        unknown[1] = 9;
        assert_eq!(OffsetValue::decode(&unknown), None);
        // Version 1 carries an expire timestamp after the commit timestamp.
        let mut v1 = vec![0, 1];
        v1.extend_from_slice(&5i64.to_be_bytes());
        v1.extend_from_slice(&[0, 0]);
        v1.extend_from_slice(&6i64.to_be_bytes());
        v1.extend_from_slice(&7i64.to_be_bytes());
        let decoded = OffsetValue::decode(&v1).unwrap();
        assert_eq!((decoded.offset, decoded.commit_timestamp), (5, 6));
        let group = GroupValue {
            protocol_type: "consumer".into(),
            generation: 1,
            protocol: None,
            leader: None,
            state_timestamp: 0,
            members: Vec::new(),
        };
        let mut longer = group.encode().unwrap().to_vec();
        longer.push(1);
        assert_eq!(GroupValue::decode(&longer), None);
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes: Vec<u8>) {
            let _ = OffsetsKey::decode(&bytes);
            let _ = OffsetValue::decode(&bytes);
            let _ = GroupValue::decode(&bytes);
        }
    }
}
