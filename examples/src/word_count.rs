//! The classic: lines of text in, a running count of each word out, exactly once, on the
//! embedded broker (`cargo run --example word_count`).

use std::collections::BTreeMap;
use std::path::Path;

use eddy::serde::{I64Serde, Nullable, Serde, StringSerde};
use eddy::streams::{
    Consumed, Grouped, Materialized, Produced, StreamsBuilder, Topology, TopologyError,
};

use crate::on_broker::{self, ExampleError};

/// Lines of text, unkeyed.
pub const TEXT_LINES: &str = "text-lines";
/// Each word's count as it changes, keyed by the word.
pub const WORD_COUNTS: &str = "word-counts";

/// Lines split into lowercase words, grouped by word, counted.
pub fn topology() -> Result<Topology, TopologyError> {
    let builder = StreamsBuilder::new();
    builder
        .stream(TEXT_LINES, Consumed::with(StringSerde, StringSerde))
        .flat_map_values(|line: String| {
            let line = line.to_lowercase();
            line.split(|c: char| !c.is_alphanumeric())
                .filter(|word| !word.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .group_by(
            |_, word| word.clone(),
            Grouped::with(StringSerde, StringSerde),
        )
        .count(Materialized::named("counts"))
        .to_stream()
        .to(WORD_COUNTS, Produced::with(StringSerde, Nullable(I64Serde)));
    builder.build()
}

/// Writes `lines` to `text-lines`, counts their words and reads back each word's last count.
pub async fn run(
    bootstrap: &str,
    lines: &[&str],
    state_dir: &Path,
) -> Result<BTreeMap<String, i64>, ExampleError> {
    on_broker::create_topics(bootstrap, &[(TEXT_LINES, 2), (WORD_COUNTS, 2)]).await?;
    let records = lines
        .iter()
        .enumerate()
        .map(|(i, line)| (i.to_string(), *line, 0));
    on_broker::write(bootstrap, TEXT_LINES, records).await?;
    on_broker::run_until_idle(
        topology()?,
        "word-count",
        bootstrap,
        &[TEXT_LINES],
        state_dir,
        &[],
    )
    .await?;
    let mut counts = BTreeMap::new();
    for record in on_broker::read_committed(bootstrap, WORD_COUNTS).await? {
        let word = String::from_utf8_lossy(&record.key.unwrap_or_default()).into_owned();
        let value = record.value.unwrap_or_default();
        let count = I64Serde
            .deserialize(WORD_COUNTS, &value)
            .map_err(|e| ExampleError::Serde(e.to_string()))?;
        counts.insert(word, count);
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use eddy::testing::TestDriver;

    use super::*;

    #[test]
    fn the_topology_and_its_counts_are_as_their_snapshots() {
        let topology = topology().unwrap();
        insta::assert_snapshot!("word_count_topology", topology.describe().to_string());
        let driver = TestDriver::new(topology).unwrap();
        let lines = driver.create_input_topic(TEXT_LINES, StringSerde, StringSerde);
        let counts = driver.create_output_topic(WORD_COUNTS, StringSerde, Nullable(I64Serde));
        for line in [
            "The seats are held",
            "the seats are released",
            "HELD again!",
        ] {
            lines.pipe_input(String::new(), line.to_string()).unwrap();
        }
        let output: Vec<String> = counts
            .read_key_values_to_list()
            .into_iter()
            .map(|(word, count)| format!("{word} {count:?}"))
            .collect();
        insta::assert_snapshot!("word_count_output", output.join("\n"));
    }
}
