//! Rebuilding the groups and their offsets from `__consumer_offsets` at start.

use std::collections::HashMap;

use eddy_core::log::Record;
use eddy_core::wire::batch::{control_type, ControlType};

use super::membership::Group;
use super::records::{GroupValue, OffsetValue, OffsetsKey};
use super::{GroupCoordinator, GroupEntry, OFFSETS_TOPIC};
use crate::storage::StorageError;

impl GroupCoordinator {
    /// Reads every record of `__consumer_offsets` in order and rebuilds groups and offsets. A
    /// record that does not decode is skipped and counted, never a reason to refuse to start.
    pub(super) fn replay(&self) -> Result<(), StorageError> {
        let mut groups = self.lock();
        let mut records = 0usize;
        let mut skipped = 0usize;
        for (index, partition) in self.offsets_log.iter().enumerate() {
            skipped += partition.replay(|header, decoded| {
                if header.is_control() {
                    if let Some(marker) = decoded.first().and_then(|r| control_type(&r.record)) {
                        let commit = marker == ControlType::Commit;
                        for entry in groups.values_mut() {
                            if self.partition_for(&entry.group.id) == index {
                                entry.end_transaction(header.producer_id, commit, None);
                            }
                        }
                    }
                    return;
                }
                let transaction = header.is_transactional().then_some(header.producer_id);
                for r in decoded {
                    records += 1;
                    if !apply_record(&mut groups, &r.record, r.offset, transaction) {
                        skipped += 1;
                    }
                }
            })?;
        }
        if records > 0 {
            tracing::info!(groups = groups.len(), records, "replayed {OFFSETS_TOPIC}");
        }
        if skipped > 0 {
            tracing::warn!(skipped, "skipped undecodable records of {OFFSETS_TOPIC}");
        }
        Ok(())
    }
}

/// Applies one record of `__consumer_offsets` during replay; `transaction` is the producer id
/// of a transactional batch's records, whose offsets stay pending until its marker. Whether
/// the record decoded (one that does not is logged and changes nothing).
fn apply_record(
    groups: &mut HashMap<String, GroupEntry>,
    record: &Record,
    log_offset: i64,
    transaction: Option<i64>,
) -> bool {
    let Some(key) = record.key.as_deref().and_then(OffsetsKey::decode) else {
        tracing::warn!(
            offset = log_offset,
            "skipping a record of {OFFSETS_TOPIC} with an unknown key"
        );
        return false;
    };
    let group_id = key.group().to_string();
    match (key, record.value.as_deref()) {
        (
            OffsetsKey::Offset {
                topic, partition, ..
            },
            Some(value),
        ) => match OffsetValue::decode(value) {
            Some(v) => {
                let entry = groups
                    .entry(group_id.clone())
                    .or_insert_with(|| GroupEntry::new(&group_id));
                match transaction {
                    Some(producer_id) => {
                        entry
                            .pending
                            .entry(producer_id)
                            .or_default()
                            .insert((topic, partition), (v, log_offset));
                    }
                    None => entry.apply_offset((topic, partition), v, log_offset),
                }
            }
            None => {
                tracing::warn!(group = %group_id, offset = log_offset, "skipping a malformed offset record");
                return false;
            }
        },
        (
            OffsetsKey::Offset {
                topic, partition, ..
            },
            None,
        ) => {
            if let Some(e) = groups.get_mut(&group_id) {
                e.applied_at.remove(&(topic.clone(), partition));
                e.offsets.remove(&(topic, partition));
            }
        }
        (OffsetsKey::Group { .. }, Some(value)) => match GroupValue::decode(value) {
            Some(stored) => {
                let entry = groups
                    .entry(group_id.clone())
                    .or_insert_with(|| GroupEntry::new(&group_id));
                entry.group = Group::restored(&group_id, &stored);
            }
            None => {
                tracing::warn!(group = %group_id, offset = log_offset, "skipping a malformed group record");
                return false;
            }
        },
        (OffsetsKey::Group { .. }, None) => {
            groups.remove(&group_id);
        }
    }
    true
}
