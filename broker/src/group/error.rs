//! Why the group coordinator refuses an operation, in the domain's words. Handlers answer each
//! with Kafka's error code (`handler::errors::group_code`), as they do storage's errors.

use crate::storage::StorageError;

/// A refusal of the group coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GroupError {
    /// The group id is empty.
    #[error("the group id is empty")]
    InvalidGroupId,
    /// The session timeout asked for is outside the broker's bounds.
    #[error("the session timeout is outside the broker's bounds")]
    InvalidSessionTimeout,
    /// The member is not (or no longer) in the group.
    #[error("the member is not in the group")]
    UnknownMemberId,
    /// The generation named is not the group's.
    #[error("the generation is not the group's")]
    IllegalGeneration,
    /// Another member holds the group instance id: this one was fenced.
    #[error("another member holds the group instance id")]
    FencedInstanceId,
    /// The group is rebalancing: the member must join again.
    #[error("the group is rebalancing")]
    RebalanceInProgress,
    /// The member's protocols have nothing in common with the group's.
    #[error("the member's protocols are not the group's")]
    InconsistentGroupProtocol,
    /// A new member must join again with the member id it was given.
    #[error("a new member must join again with the member id it was given")]
    MemberIdRequired,
    /// The broker knows no such group.
    #[error("no such group")]
    GroupIdNotFound,
    /// The group has members, so it cannot be deleted.
    #[error("the group has members")]
    NonEmptyGroup,
    /// A member of the group consumes the topic, so its offsets stay.
    #[error("a member of the group consumes the topic")]
    GroupSubscribedToTopic,
    /// The metadata committed with an offset is over `offset.metadata.max.bytes`.
    #[error("the offset's metadata is too large")]
    OffsetMetadataTooLarge,
    /// The producer has not added the group to its transaction.
    #[error("the producer's transaction does not include the group")]
    InvalidTxnState,
    /// A newer producer of the transactional id fenced this one.
    #[error("a newer producer fenced this one")]
    ProducerFenced,
    /// The group's records could not be stored.
    #[error("the group's records could not be stored ({0:?})")]
    NotStored(NotStored),
}

/// Why records could not be stored, as far as a client is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotStored {
    /// The disk failed: the broker cannot coordinate from this partition until it restarts.
    DiskFailed,
    /// The records were too large, or could not be written as records at all.
    Unwritable,
    /// Anything else; the client may retry.
    Unavailable,
}

impl From<&StorageError> for NotStored {
    /// As Kafka's coordinators map a failed append (`appendGroupMetadataErrorToResponseError`,
    /// and the transaction coordinator's own): a failed disk means the broker no longer
    /// coordinates from the partition, a batch refused for its size is a server error,
    /// anything else is retried.
    fn from(error: &StorageError) -> Self {
        match error {
            StorageError::Io(_) | StorageError::FsyncFailed(_) | StorageError::Offline => {
                NotStored::DiskFailed
            }
            StorageError::BatchTooLarge { .. } | StorageError::InvalidBatch(_) => {
                NotStored::Unwritable
            }
            _ => NotStored::Unavailable,
        }
    }
}

impl From<&StorageError> for GroupError {
    fn from(error: &StorageError) -> Self {
        GroupError::NotStored(NotStored::from(error))
    }
}
