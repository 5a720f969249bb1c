//! The configuration reference (`src/configuration.md`) against the code: every table lists
//! exactly the settings the matching config prints, with the defaults it has.

use std::collections::BTreeMap;

use eddy::app::StreamsConfig;
use eddy::client::{ConsumerConfig, ProducerConfig};

const CHAPTER: &str = include_str!("../src/configuration.md");

/// The rows of the table under `## {section}`: setting to default, "(none)" read as empty.
fn table(section: &str) -> BTreeMap<String, String> {
    let heading = format!("## {section}\n");
    let start = CHAPTER.find(&heading).expect("the section") + heading.len();
    let rest = &CHAPTER[start..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    rest[..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            let key = cells[0].trim_start_matches("| ").trim_matches('`');
            let default = match cells[1] {
                "(none)" => String::new(),
                d => d.trim_matches('`').to_string(),
            };
            (key.to_string(), default)
        })
        .collect()
}

fn printed(properties: Vec<(impl ToString, String)>) -> BTreeMap<String, String> {
    properties
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

#[test]
fn the_streams_table_is_every_streams_setting_with_its_default() {
    let mut documented = table("Streams");
    let mut defaults = printed(StreamsConfig::new("").properties());
    // What depends on the application and the machine.
    assert_eq!(
        documented.remove("application.id").as_deref(),
        Some("(required)")
    );
    assert_eq!(
        documented.remove("state.dir").as_deref(),
        Some("(temp dir)/kafka-streams")
    );
    defaults.remove("application.id");
    let state_dir = defaults.remove("state.dir").unwrap();
    assert!(state_dir.ends_with("kafka-streams"), "{state_dir}");
    assert_eq!(documented, defaults);
}

#[test]
fn the_client_tables_are_every_client_setting_with_its_default() {
    assert_eq!(
        table("Producer"),
        printed(ProducerConfig::new("").properties())
    );
    assert_eq!(
        table("Consumer"),
        printed(ConsumerConfig::new("").properties())
    );
}

#[test]
fn a_table_row_that_differs_from_the_code_is_seen() {
    // The reader of the tables sees what the comparison needs to see.
    let consumer = table("Consumer");
    assert_eq!(
        consumer.get("max.poll.records").map(String::as_str),
        Some("500")
    );
    assert_eq!(consumer.get("group.id").map(String::as_str), Some(""));
    assert_eq!(consumer.len(), 23);
}
