//! Orders joined with their payments within five minutes, exactly once on the embedded
//! broker: paid orders as their payments arrive, unpaid ones once their windows close (the
//! topology is in `examples/src/windowed_join.rs`).
//!
//! ```sh
//! cargo run --example windowed_join
//! ```

use eddy::embedded::EmbeddedBroker;
use eddy_examples::windowed_join::{self, evening};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let broker = EmbeddedBroker::start().await?;
    let state = tempfile::tempdir()?;
    let (orders, payments) = evening(40, 1_767_222_000_000);
    let (paid, unpaid) =
        windowed_join::run(&broker.bootstrap(), &orders, &payments, state.path()).await?;
    for p in &paid {
        let (minutes, seconds) = (p.paid_after_ms / 60_000, p.paid_after_ms / 1_000 % 60);
        println!("paid    {} after {minutes}m{seconds:02}s", p.order_id);
    }
    for o in &unpaid {
        println!("unpaid  {} ({} cents)", o.order_id, o.total_cents);
    }
    println!(
        "{} orders: {} paid within five minutes, {} unpaid, {} still open",
        orders.len(),
        paid.len(),
        unpaid.len(),
        orders.len() - paid.len() - unpaid.len()
    );
    broker.shutdown().await?;
    Ok(())
}
