//! Domain errors as Kafka error codes.

use kafka_protocol::error::ResponseError;

use crate::group::{GroupError, NotStored};
use crate::metadata::MetadataError;
use crate::storage::{RecordsRefusal, StorageError};
use crate::txn::TxnError;

/// The error code a storage error is answered with.
pub(crate) fn storage_code(error: &StorageError) -> i16 {
    match error {
        StorageError::CorruptBatch(_) => ResponseError::CorruptMessage.code(),
        StorageError::InvalidBatch(_) => ResponseError::InvalidRecord.code(),
        StorageError::RecordsRefused { kind, .. } => match kind {
            RecordsRefusal::Timestamp => ResponseError::InvalidTimestamp.code(),
            RecordsRefusal::Record => ResponseError::InvalidRecord.code(),
        },
        StorageError::BatchTooLarge { .. } => ResponseError::MessageTooLarge.code(),
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange.code(),
        StorageError::Deleted => ResponseError::UnknownTopicOrPartition.code(),
        StorageError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber.code(),
        StorageError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch.code(),
        StorageError::DuplicateSequence { .. } => ResponseError::DuplicateSequenceNumber.code(),
        StorageError::NotInTransaction { .. } => ResponseError::InvalidTxnState.code(),
        StorageError::Io(_) | StorageError::FsyncFailed(_) | StorageError::Offline => {
            ResponseError::KafkaStorageError.code()
        }
    }
}

/// The error code a metadata error is answered with.
pub(crate) fn metadata_code(error: &MetadataError) -> i16 {
    match error {
        MetadataError::InvalidTopicName(..) => ResponseError::InvalidTopicException.code(),
        MetadataError::TopicExists(_) => ResponseError::TopicAlreadyExists.code(),
        MetadataError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition.code(),
        MetadataError::InvalidPartitions(_) => ResponseError::InvalidPartitions.code(),
        MetadataError::InvalidConfig(_) => ResponseError::InvalidConfig.code(),
        MetadataError::Io(_) => ResponseError::KafkaStorageError.code(),
    }
}

/// The error code a group coordinator's refusal is answered with.
pub(crate) fn group_code(error: &GroupError) -> i16 {
    match error {
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId.code(),
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout.code(),
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId.code(),
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration.code(),
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId.code(),
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress.code(),
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol.code(),
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired.code(),
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound.code(),
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup.code(),
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic.code(),
        GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge.code(),
        GroupError::InvalidTxnState => ResponseError::InvalidTxnState.code(),
        GroupError::ProducerFenced => ResponseError::ProducerFenced.code(),
        GroupError::NotStored(why) => not_stored_code(*why),
    }
}

/// The error code of a result that may be a group coordinator's refusal (0 for none).
pub(crate) fn group_result_code(result: &Result<(), GroupError>) -> i16 {
    result.as_ref().err().map_or(0, group_code)
}

/// The error code of a stored-records failure, as both coordinators answer it.
fn not_stored_code(error: NotStored) -> i16 {
    match error {
        NotStored::DiskFailed => ResponseError::NotCoordinator.code(),
        NotStored::Unwritable => ResponseError::UnknownServerError.code(),
        NotStored::Unavailable => ResponseError::CoordinatorNotAvailable.code(),
    }
}

/// The error code a transaction coordinator's refusal is answered with.
pub(crate) fn txn_code(error: &TxnError) -> i16 {
    match error {
        TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions.code(),
        TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping.code(),
        TxnError::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout.code(),
        TxnError::InvalidTxnState => ResponseError::InvalidTxnState.code(),
        TxnError::ProducerFenced => ResponseError::ProducerFenced.code(),
        TxnError::NotStored(why) => not_stored_code(*why),
    }
}

/// The error code of a result that may be a transaction coordinator's refusal (0 for none).
pub(crate) fn txn_result_code(result: &Result<(), TxnError>) -> i16 {
    result.as_ref().err().map_or(0, txn_code)
}
