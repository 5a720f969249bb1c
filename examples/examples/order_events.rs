//! The seed story of BoxOffice's log on the embedded broker: a keyed producer, two consumer
//! groups reading the same topic at their own pace, an idle seventh consumer, a replay from
//! offset 0, a re-read of two hours by offsets reset by time, and the lag tables as
//! `eddy groups describe` prints them (the story is in `examples/src/order_events.rs`).
//!
//! ```sh
//! cargo run --example order_events
//! ```

use eddy::embedded::EmbeddedBroker;
use eddy_examples::order_events;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let broker = EmbeddedBroker::start().await?;
    let start = 1_767_222_000_000;
    order_events::story(&broker.bootstrap(), 2_000, start, &mut |line| {
        println!("{line}")
    })
    .await?;
    broker.shutdown().await?;
    Ok(())
}
