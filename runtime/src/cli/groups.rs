//! `eddy groups list | describe | reset-offsets`: consumer groups shown and moved as
//! `kafka-consumer-groups.sh` does.

use clap::Subcommand;

use super::{connect, BrokerAddress};
use crate::internals::tools::groups::{self, ResetTarget};
use crate::internals::tools::parse_datetime;

#[derive(Subcommand)]
pub(super) enum GroupsCommand {
    /// The ids of every group.
    List {
        #[command(flatten)]
        broker: BrokerAddress,
    },
    /// A group's partitions: committed offset, end, lag and consumer.
    Describe {
        #[command(flatten)]
        broker: BrokerAddress,
        /// The group.
        #[arg(long)]
        group: String,
    },
    /// Move a group's offsets in a topic (a dry run unless --execute); the group must have no
    /// active members.
    ResetOffsets {
        #[command(flatten)]
        broker: BrokerAddress,
        /// The group.
        #[arg(long)]
        group: String,
        /// The topic whose partitions move.
        #[arg(long)]
        topic: String,
        /// To the first offset of each partition.
        #[arg(long, group = "target")]
        to_earliest: bool,
        /// To the end of each partition.
        #[arg(long, group = "target")]
        to_latest: bool,
        /// To the first record at or after a time, like 2026-11-29T10:00:00Z.
        #[arg(long, group = "target")]
        to_datetime: Option<String>,
        /// By this many records from the committed offsets (negative to go back).
        #[arg(long, group = "target", allow_negative_numbers = true)]
        shift_by: Option<i64>,
        /// Commit the new offsets (without it, only print them).
        #[arg(long)]
        execute: bool,
    },
}

pub(super) async fn run(command: GroupsCommand) -> std::io::Result<()> {
    let text = match command {
        GroupsCommand::List { broker } => groups::list(&connect(&broker.bootstrap).await?).await,
        GroupsCommand::Describe { broker, group } => {
            groups::describe(&connect(&broker.bootstrap).await?, &group).await
        }
        GroupsCommand::ResetOffsets {
            broker,
            group,
            topic,
            to_earliest,
            to_latest,
            to_datetime,
            shift_by,
            execute,
        } => {
            let target = if to_earliest {
                ResetTarget::Earliest
            } else if to_latest {
                ResetTarget::Latest
            } else if let Some(at) = to_datetime {
                ResetTarget::Datetime(parse_datetime(&at).map_err(std::io::Error::other)?)
            } else if let Some(n) = shift_by {
                ResetTarget::ShiftBy(n)
            } else {
                return Err(std::io::Error::other(
                    "say where to: --to-earliest, --to-latest, --to-datetime or --shift-by",
                ));
            };
            groups::reset_offsets(
                &connect(&broker.bootstrap).await?,
                &group,
                &topic,
                target,
                execute,
            )
            .await
        }
    }
    .map_err(std::io::Error::other)?;
    print!("{text}");
    Ok(())
}
