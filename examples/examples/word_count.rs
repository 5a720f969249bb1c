//! The classic word count, exactly once on the embedded broker: lines written to
//! `text-lines`, each word's running count in `word-counts` (the topology is in
//! `examples/src/word_count.rs`).
//!
//! ```sh
//! cargo run --example word_count
//! ```

use eddy::embedded::EmbeddedBroker;
use eddy_examples::word_count;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let broker = EmbeddedBroker::start().await?;
    let state = tempfile::tempdir()?;
    let lines = [
        "all the seats for the stadium show",
        "held the seats, released the seats",
        "the show goes on",
    ];
    let counts = word_count::run(&broker.bootstrap(), &lines, state.path()).await?;
    for (word, count) in counts {
        println!("{word:>10} {count}");
    }
    broker.shutdown().await?;
    Ok(())
}
