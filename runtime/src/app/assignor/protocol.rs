//! What the streams assignor carries in the classic consumer protocol's user data: each
//! member's [`Subscription`] (its instance, the tasks it ran, the state its instance holds)
//! and the leader's [`TaskAssignment`] for each member. Both are versioned and read with a
//! size limit: user data comes from other members over the wire, and a malformed one is an
//! error, never a panic.

use bytes::Bytes;
use eddy_core::log::TopicPartition;
use eddy_core::streams::TaskId;
use serde::{Deserialize, Serialize};

/// The version of the user data this build writes and reads.
pub(crate) const VERSION: u16 = 1;

/// The most bytes of user data read.
const LIMIT: usize = 4 * 1024 * 1024;

/// A task as the user data carries it: sub-topology and partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct WireTask(pub(crate) u32, pub(crate) i32);

impl From<TaskId> for WireTask {
    fn from(t: TaskId) -> Self {
        Self(t.subtopology, t.partition)
    }
}

impl From<WireTask> for TaskId {
    fn from(t: WireTask) -> Self {
        TaskId {
            subtopology: t.0,
            partition: t.1,
        }
    }
}

/// A partition as the user data carries it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct WirePartition(pub(crate) String, pub(crate) i32);

impl From<&TopicPartition> for WirePartition {
    fn from(tp: &TopicPartition) -> Self {
        Self(tp.topic.to_string(), tp.partition)
    }
}

/// What a member tells the leader when it joins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Subscription {
    /// The version it was written in.
    pub(crate) version: u16,
    /// Its instance (every stream thread of an instance shares it).
    pub(crate) process: String,
    /// The tasks this member (one stream thread) ran as active.
    pub(crate) owned_tasks: Vec<WireTask>,
    /// For each task whose state the instance holds, the sum of its changelog offsets
    /// ([`super::placement::RUNNING`] for a task it runs).
    pub(crate) offset_sums: Vec<(WireTask, i64)>,
    /// For each task it holds, the sum of the ends of its changelogs as this member last
    /// saw them: what the leader measures the other instances' lags against.
    pub(crate) end_offset_sums: Vec<(WireTask, i64)>,
    /// Its `application.server`, for interactive queries.
    pub(crate) endpoint: Option<String>,
    /// Whether its instance asks every instance of the application to shut down (an
    /// uncaught error's `ShutdownApplication` response).
    pub(crate) shutdown_requested: bool,
}

/// What the leader tells each member.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TaskAssignment {
    /// The version it was written in.
    pub(crate) version: u16,
    /// The tasks the member runs.
    pub(crate) active: Vec<WireTask>,
    /// The tasks it keeps warm copies of (warmups included).
    pub(crate) standby: Vec<WireTask>,
    /// Of the standbys, those warming up to take a task over: once they are caught up the
    /// member asks for the probing rebalance that moves them.
    pub(crate) warmup: Vec<WireTask>,
    /// Every instance's active partitions, by `application.server`.
    pub(crate) partitions_by_host: Vec<(String, Vec<WirePartition>)>,
    /// Every instance's standby partitions, by `application.server`.
    pub(crate) standby_partitions_by_host: Vec<(String, Vec<WirePartition>)>,
    /// Whether warmups are waiting: the members should rebalance again after
    /// `probing.rebalance.interval.ms`.
    pub(crate) probing_rebalance: bool,
    /// Why the application cannot run, when it cannot (a missing source topic, …).
    pub(crate) error: Option<String>,
    /// An instance asked the whole application to shut down: every member stops.
    pub(crate) shutdown_application: bool,
}

/// User data that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("streams assignor user data: {0}")]
pub(crate) struct ProtocolError(pub(crate) String);

fn encode<T: Serialize>(value: &T) -> Bytes {
    let bytes = bincode::serde::encode_to_vec(value, bincode::config::standard())
        .expect("user data is plain data");
    Bytes::from(bytes)
}

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ProtocolError> {
    if bytes.len() > LIMIT {
        return Err(ProtocolError(format!(
            "{} bytes, more than {LIMIT}",
            bytes.len()
        )));
    }
    let config = bincode::config::standard().with_limit::<LIMIT>();
    let (value, read) = bincode::serde::decode_from_slice(bytes, config)
        .map_err(|e| ProtocolError(e.to_string()))?;
    if read != bytes.len() {
        return Err(ProtocolError(format!(
            "{} bytes left over",
            bytes.len() - read
        )));
    }
    Ok(value)
}

/// Refuses user data of another version (the first two bytes of both kinds).
fn check_version(version: u16) -> Result<(), ProtocolError> {
    if version != VERSION {
        return Err(ProtocolError(format!(
            "version {version}; this member reads version {VERSION}"
        )));
    }
    Ok(())
}

impl Subscription {
    /// The user data.
    pub(crate) fn encode(&self) -> Bytes {
        encode(self)
    }

    /// Reads user data.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, ProtocolError> {
        let s: Self = decode(bytes)?;
        check_version(s.version)?;
        Ok(s)
    }
}

impl TaskAssignment {
    /// The user data.
    pub(crate) fn encode(&self) -> Bytes {
        encode(self)
    }

    /// Reads user data.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, ProtocolError> {
        let a: Self = decode(bytes)?;
        check_version(a.version)?;
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn subscription() -> Subscription {
        Subscription {
            version: VERSION,
            process: "p-1".into(),
            owned_tasks: vec![WireTask(0, 1), WireTask(1, 0)],
            offset_sums: vec![(WireTask(0, 1), -2), (WireTask(0, 2), 1_234)],
            end_offset_sums: vec![(WireTask(0, 1), 77), (WireTask(0, 2), 2_000)],
            endpoint: Some("node-1:8080".into()),
            shutdown_requested: true,
        }
    }

    #[test]
    fn user_data_reads_back_as_written() {
        let s = subscription();
        assert_eq!(Subscription::decode(&s.encode()).unwrap(), s);
        let a = TaskAssignment {
            version: VERSION,
            active: vec![WireTask(0, 1)],
            standby: vec![WireTask(0, 2)],
            warmup: vec![WireTask(0, 2)],
            partitions_by_host: vec![("node-1:8080".into(), vec![WirePartition("t".into(), 1)])],
            standby_partitions_by_host: vec![],
            probing_rebalance: true,
            error: None,
            shutdown_application: false,
        };
        assert_eq!(TaskAssignment::decode(&a.encode()).unwrap(), a);
    }

    #[test]
    fn another_version_and_trailing_bytes_are_refused() {
        let mut s = subscription();
        s.version = 9;
        let error = Subscription::decode(&s.encode()).unwrap_err();
        assert!(error.to_string().contains("version 9"), "{error}");
        let mut bytes = subscription().encode().to_vec();
        bytes.push(0);
        assert!(Subscription::decode(&bytes)
            .unwrap_err()
            .to_string()
            .contains("left over"));
    }

    proptest! {
        /// Whatever the bytes, reading them is an answer, not a panic or a huge allocation.
        #[test]
        fn garbage_is_an_error_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Subscription::decode(&bytes);
            let _ = TaskAssignment::decode(&bytes);
        }

        /// A cut or damaged subscription is refused or read as some subscription, never more.
        #[test]
        fn damaged_subscriptions_do_not_panic(cut in 0usize..60, flip in 0usize..60, bit in 0u8..8) {
            let mut bytes = subscription().encode().to_vec();
            if flip < bytes.len() {
                bytes[flip] ^= 1 << bit;
            }
            bytes.truncate(cut.min(bytes.len()));
            let _ = Subscription::decode(&bytes);
        }
    }
}
