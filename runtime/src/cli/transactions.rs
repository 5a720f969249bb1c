//! `eddy transactions list | describe`: transactional producers and their open transactions.

use clap::Subcommand;

use super::{connect, BrokerAddress};
use crate::internals::tools::transactions;

#[derive(Subcommand)]
pub(super) enum TransactionsCommand {
    /// Every transactional id, with its producer id and state.
    List {
        #[command(flatten)]
        broker: BrokerAddress,
    },
    /// One transactional id: producer, state, timeout, and the open transaction's start and
    /// partitions.
    Describe {
        #[command(flatten)]
        broker: BrokerAddress,
        /// The transactional id.
        #[arg(long)]
        transactional_id: String,
    },
}

pub(super) async fn run(command: TransactionsCommand) -> std::io::Result<()> {
    let text = match command {
        TransactionsCommand::List { broker } => {
            transactions::list(&connect(&broker.bootstrap).await?).await
        }
        TransactionsCommand::Describe {
            broker,
            transactional_id,
        } => transactions::describe(&connect(&broker.bootstrap).await?, &transactional_id).await,
    }
    .map_err(std::io::Error::other)?;
    print!("{text}");
    Ok(())
}
