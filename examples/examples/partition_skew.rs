//! Keys decide the partition: one minute of an on-sale (six in ten orders for one stadium
//! show) written to twelve partitions of the embedded broker, keyed by order id and then by
//! show, drawn as a bar per partition from the offsets the broker reports.
//!
//! ```sh
//! cargo run --example partition_skew
//! ```

use std::collections::BTreeMap;

use eddy::embedded::EmbeddedBroker;
use eddy_examples::partition_skew::{self, chart, on_sale_minute, shows_by_partition};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let broker = EmbeddedBroker::start().await?;
    let sales = on_sale_minute(6_000, 1_767_222_000_000, 1);
    let skew = partition_skew::run(&broker.bootstrap(), &sales).await?;
    println!(
        "{}",
        chart("keyed by order id", &skew.by_order, &BTreeMap::new())
    );
    println!(
        "{}",
        chart("keyed by show", &skew.by_show, &shows_by_partition())
    );
    println!(
        "Keyed by show, every event of a show is in one partition, in order — and the \
         stadium's partition has most of the minute: one consumer of twelve does most of the work."
    );
    broker.shutdown().await?;
    Ok(())
}
