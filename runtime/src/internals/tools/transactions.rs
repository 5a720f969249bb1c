//! `eddy transactions list | describe`: what Kafka's `kafka-transactions.sh` shows, with its
//! columns.

use crate::client::{Admin, ClientError, ListedTransaction, TransactionDescription};

use super::groups::table;

/// Every transactional id with its producer id and state.
pub async fn list(admin: &Admin) -> Result<String, ClientError> {
    Ok(list_table(&admin.list_transactions().await?))
}

/// The table of `list`.
pub fn list_table(transactions: &[ListedTransaction]) -> String {
    let header = ["TransactionalId", "ProducerId", "TransactionState"].map(String::from);
    let rows: Vec<[String; 3]> = transactions
        .iter()
        .map(|t| {
            [
                t.transactional_id.clone(),
                t.producer_id.to_string(),
                t.state.clone(),
            ]
        })
        .collect();
    table(&header, &rows)
}

/// One transactional id: its producer, state, timeout, the start and age of its open
/// transaction and that transaction's partitions.
pub async fn describe(admin: &Admin, transactional_id: &str) -> Result<String, ClientError> {
    Ok(describe_table(
        &admin.describe_transaction(transactional_id).await?,
        crate::time::now_ms(),
    ))
}

/// The table of `describe`, as of `now_ms`.
pub fn describe_table(t: &TransactionDescription, now_ms: i64) -> String {
    let header = [
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
        "TransactionTimeoutMs",
        "CurrentTransactionStartTimeMs",
        "TransactionDurationMs",
        "TopicPartitions",
    ]
    .map(String::from);
    let open = t.start_time_ms >= 0 && !t.partitions.is_empty();
    let (start, duration) = if open {
        (
            t.start_time_ms.to_string(),
            (now_ms - t.start_time_ms).max(0).to_string(),
        )
    } else {
        ("None".to_string(), "None".to_string())
    };
    let partitions: Vec<String> = t.partitions.iter().map(|p| p.to_string()).collect();
    let row = [
        t.transactional_id.clone(),
        t.producer.0.to_string(),
        t.producer.1.to_string(),
        t.state.clone(),
        t.timeout_ms.to_string(),
        start,
        duration,
        partitions.join(","),
    ];
    table(&header, &[row])
}
