//! `eddy groups list | describe | reset-offsets`: what Kafka's `kafka-consumer-groups.sh`
//! does, with its table layout.

use std::collections::{BTreeMap, BTreeSet};

use eddy_core::log::TopicPartition;

use crate::client::{Admin, ClientError, GroupState, OffsetSpec};

/// Why a groups command could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum GroupsError {
    /// The broker could not be reached or refused a request.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Offsets are reset only while nobody consumes (as Kafka's tool insists).
    #[error("Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}.")]
    GroupActive {
        /// The group.
        group: String,
        /// Its state.
        state: GroupState,
    },
}

/// One partition of a group, as `describe` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRow {
    /// The partition.
    pub partition: TopicPartition,
    /// The group's committed offset.
    pub current_offset: Option<i64>,
    /// The partition's end (its high watermark).
    pub log_end_offset: Option<i64>,
    /// The member consuming it, with its host and client id.
    pub consumer: Option<(String, String, String)>,
}

/// Where `reset-offsets` moves a group's offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTarget {
    /// The first offset of each partition.
    Earliest,
    /// The end of each partition.
    Latest,
    /// The first record at or after this time (ms since the epoch).
    Datetime(i64),
    /// The committed offset plus this many (minus, if negative), kept within the partition.
    ShiftBy(i64),
}

/// The ids of every group, one a line.
pub async fn list(admin: &Admin) -> Result<String, GroupsError> {
    let groups = admin.list_groups().await?;
    Ok(groups.iter().map(|g| format!("{}\n", g.group_id)).collect())
}

/// The table Kafka's `kafka-consumer-groups.sh --describe` prints.
pub async fn describe(admin: &Admin, group: &str) -> Result<String, GroupsError> {
    let description = admin.describe_group(group).await?;
    let committed = admin.committed_offsets(group).await?;
    if description.state == GroupState::Dead && committed.is_empty() {
        return Ok(format!("\nConsumer group '{group}' does not exist.\n"));
    }
    let mut owners = BTreeMap::new();
    for m in &description.members {
        for tp in &m.assignment {
            owners.insert(
                tp.clone(),
                (
                    m.member_id.clone(),
                    m.client_host.clone(),
                    m.client_id.clone(),
                ),
            );
        }
    }
    let partitions: BTreeSet<TopicPartition> =
        committed.keys().chain(owners.keys()).cloned().collect();
    let partitions: Vec<TopicPartition> = partitions.into_iter().collect();
    let ends = if partitions.is_empty() {
        BTreeMap::new()
    } else {
        admin.list_offsets(&partitions, OffsetSpec::Latest).await?
    };
    let rows: Vec<PartitionRow> = partitions
        .into_iter()
        .map(|tp| PartitionRow {
            current_offset: committed.get(&tp).copied(),
            log_end_offset: ends.get(&tp).copied(),
            consumer: owners.get(&tp).cloned(),
            partition: tp,
        })
        .collect();
    Ok(describe_table(group, description.members.is_empty(), &rows))
}

/// Lays out `describe`'s rows as Kafka's tool does.
pub fn describe_table(group: &str, no_active_members: bool, rows: &[PartitionRow]) -> String {
    let dash = || "-".to_string();
    let cells: Vec<[String; 9]> = rows
        .iter()
        .map(|r| {
            let lag = match (r.current_offset, r.log_end_offset) {
                (Some(c), Some(e)) => (e - c).max(0).to_string(),
                _ => dash(),
            };
            let (consumer, host, client) = r
                .consumer
                .clone()
                .unwrap_or_else(|| (dash(), dash(), dash()));
            [
                group.to_string(),
                r.partition.topic.clone(),
                r.partition.partition.to_string(),
                r.current_offset.map_or_else(dash, |o| o.to_string()),
                r.log_end_offset.map_or_else(dash, |o| o.to_string()),
                lag,
                consumer,
                host,
                client,
            ]
        })
        .collect();
    let header = [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    .map(String::from);
    let mut out = String::new();
    if no_active_members {
        out.push_str(&format!(
            "\nConsumer group '{group}' has no active members.\n"
        ));
    }
    out.push('\n');
    out.push_str(&table(&header, &cells));
    out
}

/// Columns padded to their widest cell, one space apart; the last column unpadded.
/// Columns padded to their widest cell and one space apart, as Kafka's tools print them.
pub(crate) fn table<const N: usize>(header: &[String; N], rows: &[[String; N]]) -> String {
    let mut widths = header.clone().map(|h| h.len());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: &[String; N]| {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == N {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<width$} ", width = widths[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header);
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// Computes the group's new offsets in every partition of `topic`; with `execute`, commits
/// them. Refused while the group has members. Returns the table of new offsets.
pub async fn reset_offsets(
    admin: &Admin,
    group: &str,
    topic: &str,
    target: ResetTarget,
    execute: bool,
) -> Result<String, GroupsError> {
    let description = admin.describe_group(group).await?;
    if !description.state.is_inactive() {
        return Err(GroupsError::GroupActive {
            group: group.to_string(),
            state: description.state,
        });
    }
    let count = admin.partition_count(topic).await?;
    let partitions: Vec<TopicPartition> =
        (0..count).map(|p| TopicPartition::new(topic, p)).collect();
    let new_offsets = match target {
        ResetTarget::Earliest => {
            admin
                .list_offsets(&partitions, OffsetSpec::Earliest)
                .await?
        }
        ResetTarget::Latest => admin.list_offsets(&partitions, OffsetSpec::Latest).await?,
        ResetTarget::Datetime(ms) => {
            admin
                .list_offsets(&partitions, OffsetSpec::Timestamp(ms))
                .await?
        }
        ResetTarget::ShiftBy(n) => {
            let committed = admin.committed_offsets(group).await?;
            let earliest = admin
                .list_offsets(&partitions, OffsetSpec::Earliest)
                .await?;
            let latest = admin.list_offsets(&partitions, OffsetSpec::Latest).await?;
            partitions
                .iter()
                .map(|tp| {
                    let low = earliest.get(tp).copied().unwrap_or(0);
                    let high = latest.get(tp).copied().unwrap_or(low);
                    let from = committed.get(tp).copied().unwrap_or(low);
                    (tp.clone(), from.saturating_add(n).clamp(low, high))
                })
                .collect()
        }
    };
    if execute {
        admin.alter_group_offsets(group, &new_offsets).await?;
    }
    let header = ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"].map(String::from);
    let rows: Vec<[String; 4]> = new_offsets
        .iter()
        .map(|(tp, o)| {
            [
                group.to_string(),
                tp.topic.clone(),
                tp.partition.to_string(),
                o.to_string(),
            ]
        })
        .collect();
    Ok(format!("\n{}", table(&header, &rows)))
}
