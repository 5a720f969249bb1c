//! `eddy topics create | list | describe | delete`: topics managed as `kafka-topics.sh` does.

use clap::Subcommand;

use super::{connect, BrokerAddress};
use crate::internals::tools::topics;

#[derive(Subcommand)]
pub(super) enum TopicsCommand {
    /// Create a topic.
    Create {
        #[command(flatten)]
        broker: BrokerAddress,
        /// The topic.
        topic: String,
        /// Partitions.
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Replicas of each partition.
        #[arg(long, default_value_t = 1)]
        replication_factor: i16,
        /// A topic config, as key=value (repeatable).
        #[arg(long = "config")]
        configs: Vec<String>,
    },
    /// The names of every topic.
    List {
        #[command(flatten)]
        broker: BrokerAddress,
        /// Include the broker's internal topics.
        #[arg(long)]
        internal: bool,
    },
    /// A topic's partitions, leaders and replicas.
    Describe {
        #[command(flatten)]
        broker: BrokerAddress,
        /// The topic.
        topic: String,
    },
    /// Delete a topic.
    Delete {
        #[command(flatten)]
        broker: BrokerAddress,
        /// The topic.
        topic: String,
    },
}

pub(super) async fn run(command: TopicsCommand) -> std::io::Result<()> {
    let text = match command {
        TopicsCommand::Create {
            broker,
            topic,
            partitions,
            replication_factor,
            configs,
        } => {
            let admin = connect(&broker.bootstrap).await?;
            topics::create(&admin, &topic, partitions, replication_factor, &configs).await
        }
        TopicsCommand::List { broker, internal } => {
            topics::list(&connect(&broker.bootstrap).await?, internal).await
        }
        TopicsCommand::Describe { broker, topic } => {
            topics::describe(&connect(&broker.bootstrap).await?, &topic).await
        }
        TopicsCommand::Delete { broker, topic } => {
            topics::delete(&connect(&broker.bootstrap).await?, &topic).await
        }
    }
    .map_err(std::io::Error::other)?;
    print!("{text}");
    Ok(())
}
