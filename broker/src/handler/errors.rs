//! Domain errors as Kafka error codes.

use kafka_protocol::error::ResponseError;

use crate::metadata::MetadataError;
use crate::storage::{RecordsRefusal, StorageError};

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
