//! eddy's streams engine beside Kafka Streams on seeded random inputs (see
//! `eddy_tests::streams_differential`):
//!
//! ```text
//! streams-differential [--seeds N] [--first-seed S] [--scenario NAME]... [--out DIR]
//! ```
//!
//! Runs seeds `S..S+N` (default `0..20`) of every catalog scenario (or of those named) through
//! Kafka Streams' `TopologyTestDriver` and eddy's `TestDriver`, prints what was compared, and
//! for each scenario that disagrees prints a shrunk input and writes it to
//! `DIR/NAME@SEED.jsonl` (default `target/streams-differential`). Exits 1 on a disagreement,
//! 2 on bad arguments.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use eddy_tests::streams_catalog::scenarios;
use eddy_tests::streams_differential::reference::KafkaStreamsReference;
use eddy_tests::streams_differential::run;

const USAGE: &str =
    "usage: streams-differential [--seeds N] [--first-seed S] [--scenario NAME]... [--out DIR]";

fn main() -> ExitCode {
    let mut seeds: u64 = 20;
    let mut first: u64 = 0;
    let mut chosen = Vec::new();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let mut out = workspace.join("target/streams-differential");
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let Some(value) = args.next() else {
            eprintln!("{flag} needs a value\n{USAGE}");
            return ExitCode::from(2);
        };
        let number = |v: &str| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        let parsed = match flag.as_str() {
            "--seeds" => number(&value).map(|n| seeds = n),
            "--first-seed" => number(&value).map(|n| first = n),
            "--scenario" => {
                chosen.push(value);
                Ok(())
            }
            "--out" => {
                out = PathBuf::from(value);
                Ok(())
            }
            _ => Err(format!("unknown flag {flag}")),
        };
        if let Err(e) = parsed {
            eprintln!("{e}\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    let all = scenarios();
    if let Some(unknown) = chosen.iter().find(|c| !all.contains(c)) {
        eprintln!("no scenario {unknown}; known: {}", all.join(", "));
        return ExitCode::from(2);
    }
    let names = if chosen.is_empty() { all } else { chosen };
    let Some(end) = first.checked_add(seeds) else {
        eprintln!("--first-seed plus --seeds overflows\n{USAGE}");
        return ExitCode::from(2);
    };
    let report = KafkaStreamsReference::start()
        .and_then(|mut reference| run(&mut reference, &names, first..end));
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            eprintln!("the Kafka Streams reference failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("seeds {first}..{end}: {report}");
    if report.disagreements.is_empty() {
        return ExitCode::SUCCESS;
    }
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("{}: {e}", out.display());
    }
    for d in &report.disagreements {
        println!("\n{d}");
        let file = out.join(format!("{}@{}.jsonl", d.scenario, d.seed));
        let text: String = d.input.iter().map(|l| format!("{l}\n")).collect();
        match std::fs::write(&file, text) {
            Ok(()) => println!("shrunk input written to {}", file.display()),
            Err(e) => eprintln!("{}: {e}", file.display()),
        }
    }
    ExitCode::FAILURE
}
