//! Version negotiation: the versions of each API this client speaks, and the choice, per
//! broker, of the highest version both sides know (from the broker's ApiVersions answer).

use std::collections::HashMap;

use kafka_protocol::messages::ApiKey;

use super::ClientError;

/// The versions of `api` this client can speak. Minimums are what Apache Kafka 3.x and 4.x
/// brokers still accept; maximums are the newest versions whose fields the client fills.
pub(crate) fn ours(api: ApiKey) -> Option<(i16, i16)> {
    use ApiKey::*;
    Some(match api {
        Produce => (3, 9),
        Fetch => (4, 12),
        ListOffsets => (1, 6),
        Metadata => (1, 12),
        OffsetCommit => (2, 8),
        OffsetFetch => (1, 8),
        FindCoordinator => (0, 4),
        JoinGroup => (2, 9),
        Heartbeat => (0, 4),
        LeaveGroup => (0, 5),
        SyncGroup => (0, 5),
        DescribeGroups => (0, 5),
        ListGroups => (0, 4),
        ApiVersions => (0, 3),
        CreateTopics => (2, 7),
        DeleteTopics => (1, 6),
        DeleteRecords => (0, 2),
        InitProducerId => (0, 4),
        AddPartitionsToTxn => (0, 3),
        AddOffsetsToTxn => (0, 4),
        EndTxn => (0, 4),
        TxnOffsetCommit => (0, 4),
        DescribeConfigs => (1, 4),
        CreatePartitions => (0, 3),
        DeleteGroups => (0, 2),
        OffsetDelete => (0, 0),
        DescribeTransactions => (0, 0),
        ListTransactions => (0, 1),
        _ => return None,
    })
}

/// What one broker serves: API key → (min, max) version.
#[derive(Debug, Clone, Default)]
pub(crate) struct BrokerVersions {
    served: HashMap<i16, (i16, i16)>,
}

impl BrokerVersions {
    /// The versions of an ApiVersions answer.
    pub(crate) fn new(served: impl IntoIterator<Item = (i16, i16, i16)>) -> Self {
        Self {
            served: served
                .into_iter()
                .map(|(key, min, max)| (key, (min, max)))
                .collect(),
        }
    }

    /// The highest version of API `key` both sides speak.
    pub(crate) fn pick(&self, key: i16, addr: &str) -> Result<i16, ClientError> {
        let unsupported = |detail: String| ClientError::Protocol {
            addr: addr.to_string(),
            reason: detail,
        };
        let api = ApiKey::try_from(key).map_err(|_| unsupported(format!("API key {key}")))?;
        let (our_min, our_max) =
            ours(api).ok_or_else(|| unsupported(format!("{api:?} is not spoken by eddy")))?;
        let &(min, max) = self
            .served
            .get(&key)
            .ok_or_else(|| unsupported(format!("the broker does not serve {api:?}")))?;
        let version = max.min(our_max);
        if version < min.max(our_min) {
            return Err(unsupported(format!(
                "no common version of {api:?}: the broker serves {min}-{max}, eddy speaks \
                 {our_min}-{our_max}"
            )));
        }
        Ok(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_common_version_is_picked() {
        let broker = BrokerVersions::new([(0, 3, 12), (1, 4, 11), (10, 0, 2)]);
        assert_eq!(broker.pick(0, "b").unwrap(), 9);
        assert_eq!(broker.pick(1, "b").unwrap(), 11);
        assert_eq!(broker.pick(10, "b").unwrap(), 2);
        // Not served by the broker, or only below eddy's minimum.
        assert!(broker.pick(3, "b").is_err());
        let old = BrokerVersions::new([(0, 0, 2)]);
        assert!(old.pick(0, "b").is_err());
        // A broker older than eddy's newest version is spoken to at its own newest.
        assert_eq!(BrokerVersions::new([(1, 0, 11)]).pick(1, "b").unwrap(), 11);
    }
}
