//! The consumer protocol's subscription and assignment bytes (`ConsumerProtocolSubscription`,
//! `ConsumerProtocolAssignment`, versions 0–3): what members send in JoinGroup and the leader
//! hands out in SyncGroup, each prefixed with its version as the Java client writes them.

use bytes::{BufMut, Bytes, BytesMut};
use eddy_core::log::TopicPartition;
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::assignor::{Assignment, MemberSubscription};
use crate::client::ClientError;

/// The subscription version eddy writes: owned partitions, generation and rack (KIP-429,
/// KIP-792, KIP-881).
const SUBSCRIPTION_VERSION: i16 = 3;
/// The assignment version eddy writes.
const ASSIGNMENT_VERSION: i16 = 3;

fn group_by_topic(partitions: &[TopicPartition]) -> Vec<(String, Vec<i32>)> {
    let mut grouped: Vec<(String, Vec<i32>)> = Vec::new();
    let mut sorted: Vec<&TopicPartition> = partitions.iter().collect();
    sorted.sort();
    for tp in sorted {
        match grouped.last_mut() {
            Some((topic, ps)) if *topic == tp.topic => ps.push(tp.partition),
            _ => grouped.push((tp.topic.clone(), vec![tp.partition])),
        }
    }
    grouped
}

fn malformed(what: &str, e: impl std::fmt::Display) -> ClientError {
    ClientError::Protocol {
        addr: String::new(),
        reason: format!("a malformed consumer protocol {what}: {e}"),
    }
}

fn encode(version: i16, message: &impl Encodable) -> Result<Bytes, ClientError> {
    let mut out = BytesMut::new();
    out.put_i16(version);
    message
        .encode(&mut out, version)
        .map_err(|e| malformed("message", e))?;
    Ok(out.freeze())
}

/// The bytes of this member's subscription.
pub(crate) fn encode_subscription(
    topics: &[String],
    owned: &[TopicPartition],
    generation_id: i32,
    user_data: Option<Bytes>,
) -> Result<Bytes, ClientError> {
    let message = ConsumerProtocolSubscription::default()
        .with_topics(
            topics
                .iter()
                .map(|t| StrBytes::from_string(t.clone()))
                .collect(),
        )
        .with_user_data(user_data)
        .with_owned_partitions(
            group_by_topic(owned)
                .into_iter()
                .map(|(t, ps)| {
                    OwnedTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(t)))
                        .with_partitions(ps)
                })
                .collect(),
        )
        .with_generation_id(generation_id);
    encode(SUBSCRIPTION_VERSION, &message)
}

/// Reads a member's subscription, of any version (newer ones as the newest eddy knows).
pub(crate) fn decode_subscription(
    member_id: &str,
    group_instance_id: Option<String>,
    mut bytes: &[u8],
) -> Result<MemberSubscription, ClientError> {
    if bytes.len() < 2 {
        return Err(malformed("subscription", "shorter than its version"));
    }
    let version = i16::from_be_bytes([bytes[0], bytes[1]]).clamp(0, SUBSCRIPTION_VERSION);
    bytes = &bytes[2..];
    let mut buf = Bytes::copy_from_slice(bytes);
    let message = ConsumerProtocolSubscription::decode(&mut buf, version)
        .map_err(|e| malformed("subscription", e))?;
    Ok(MemberSubscription {
        member_id: member_id.to_string(),
        group_instance_id,
        topics: message.topics.iter().map(|t| t.to_string()).collect(),
        owned_partitions: message
            .owned_partitions
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|&p| TopicPartition::new(t.topic.0.as_str(), p))
            })
            .collect(),
        generation_id: if version >= 2 {
            message.generation_id
        } else {
            -1
        },
        user_data: message.user_data,
    })
}

/// The bytes of an assignment.
pub(crate) fn encode_assignment(assignment: &Assignment) -> Result<Bytes, ClientError> {
    let message = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(
            group_by_topic(&assignment.partitions)
                .into_iter()
                .map(|(t, ps)| {
                    AssignedTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(t)))
                        .with_partitions(ps)
                })
                .collect(),
        )
        .with_user_data(assignment.user_data.clone());
    encode(ASSIGNMENT_VERSION, &message)
}

/// Reads an assignment; empty bytes are an empty assignment (what the coordinator hands a
/// member the leader left out).
pub(crate) fn decode_assignment(bytes: &[u8]) -> Result<Assignment, ClientError> {
    if bytes.is_empty() {
        return Ok(Assignment::default());
    }
    if bytes.len() < 2 {
        return Err(malformed("assignment", "shorter than its version"));
    }
    let version = i16::from_be_bytes([bytes[0], bytes[1]]).clamp(0, ASSIGNMENT_VERSION);
    let mut buf = Bytes::copy_from_slice(&bytes[2..]);
    let message = ConsumerProtocolAssignment::decode(&mut buf, version)
        .map_err(|e| malformed("assignment", e))?;
    Ok(Assignment {
        partitions: message
            .assigned_partitions
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|&p| TopicPartition::new(t.topic.0.as_str(), p))
            })
            .collect(),
        user_data: message.user_data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_and_assignments_round_trip() {
        let owned = vec![TopicPartition::new("b", 1), TopicPartition::new("a", 0)];
        let bytes =
            encode_subscription(&["a".into(), "b".into()], &owned, 7, Some(Bytes::from("x")))
                .unwrap();
        let read = decode_subscription("m", Some("i".into()), &bytes).unwrap();
        assert_eq!(read.topics, ["a", "b"]);
        assert_eq!(
            read.owned_partitions,
            [TopicPartition::new("a", 0), TopicPartition::new("b", 1)]
        );
        assert_eq!(read.generation_id, 7);
        assert_eq!(read.user_data.as_deref(), Some(&b"x"[..]));
        let assignment = Assignment {
            partitions: owned,
            user_data: None,
        };
        let bytes = encode_assignment(&assignment).unwrap();
        let read = decode_assignment(&bytes).unwrap();
        assert_eq!(read.partitions.len(), 2);
        // The tools' decoder (version 0 layout) reads what the client writes.
        let tools = eddy_core::wire::consumer_protocol::decode_assignment(&bytes).unwrap();
        assert_eq!(
            tools,
            [("a".to_string(), vec![0]), ("b".to_string(), vec![1])]
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bytes in [
            &b"\x00"[..],
            b"\x00\x03\xff\xff\xff\xff",
            b"\x00\x00\x00\x00\x00\x09ab",
        ] {
            assert!(decode_subscription("m", None, bytes).is_err());
            assert!(decode_assignment(bytes).is_err());
        }
        assert!(decode_assignment(b"").unwrap().partitions.is_empty());
    }
}
