//! The Kafka Streams reference catalog (`tests/reference/streams/catalog`) on eddy's side:
//! every scenario declared with eddy's DSL, and a runner that pipes a scenario's
//! `input.jsonl` through eddy's `TestDriver` and writes what comes out as the catalog's JSON
//! lines. The catalog tests compare that with Kafka Streams' results; the snapshot tests keep
//! eddy's own results with several partitions.

mod scenarios;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use eddy::log::Header;
use eddy::serde::{BytesSerde, Nullable};
use eddy::streams::Topology;
use eddy::testing::{TestDriver, TestRecord};
use serde_json::{json, Value};

pub use scenarios::scenario;

/// How a key or value is written in the catalog's JSON lines.
#[derive(Clone, Copy)]
pub enum Codec {
    /// UTF-8, a JSON string.
    String,
    /// Kafka's 8-byte big-endian long, a JSON number.
    Long,
    /// A string key of a time window of this size, `{"key", "start", "end"}`.
    TimeWindowed(i64),
    /// A string key of a session window, `{"key", "start", "end"}`.
    SessionWindowed,
}

impl Codec {
    fn encode(self, json: &Value) -> Option<Bytes> {
        match (self, json) {
            (_, Value::Null) => None,
            (Codec::String, Value::String(s)) => Some(Bytes::from(s.clone())),
            (Codec::Long, Value::Number(n)) => Some(Bytes::copy_from_slice(
                &n.as_i64().expect("a long").to_be_bytes(),
            )),
            (_, other) => panic!("cannot encode {other}"),
        }
    }

    fn decode(self, bytes: Option<&Bytes>) -> Value {
        let Some(bytes) = bytes else {
            return Value::Null;
        };
        let long = |b: &[u8]| i64::from_be_bytes(b.try_into().expect("8 bytes"));
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).expect("UTF-8");
        match self {
            Codec::String => Value::String(text(bytes)),
            Codec::Long => json!(long(bytes)),
            Codec::TimeWindowed(size) => {
                let (key, start) = bytes.split_at(bytes.len() - 8);
                let start = long(start);
                json!({"key": text(key), "start": start, "end": start + size})
            }
            Codec::SessionWindowed => {
                let (key, times) = bytes.split_at(bytes.len() - 16);
                json!({"key": text(key), "start": long(&times[8..]), "end": long(&times[..8])})
            }
        }
    }
}

/// A scenario as eddy declares it.
pub struct Scenario {
    /// The topology.
    pub topology: Topology,
    /// The topics it reads, with the codecs of their keys and values.
    pub inputs: Vec<(&'static str, Codec, Codec)>,
    /// The topics it writes, in the order the runner drains them.
    pub outputs: Vec<(&'static str, Codec, Codec)>,
}

/// The catalog's folder.
pub fn catalog() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("reference/streams/catalog")
}

/// JSON lines as text, one a line, for a failure's message.
pub fn show_lines(lines: &[Value]) -> String {
    lines
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The JSON lines of a file.
pub fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Runs `name` through eddy's driver as Kafka's reference driver runs it: each input line
/// piped in, then every output topic drained in the scenario's order. With more than one
/// partition per topic, each output line also says its partition.
pub fn run(name: &str, partitions: i32) -> Vec<Value> {
    run_input(name, &catalog().join(name).join("input.jsonl"), partitions)
}

/// Runs scenario `name` over the input lines of `input` (the catalog's format), as [`run`]
/// does over the scenario's own.
pub fn run_input(name: &str, input: &Path, partitions: i32) -> Vec<Value> {
    try_run_lines(name, &read_lines(input), partitions).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs scenario `name` over input lines in the catalog's format, as [`run`] does: the
/// output lines, or the error the driver gave for an input line. Panics on a line that is not
/// in the catalog's format or names a topic the scenario does not read.
pub fn try_run_lines(name: &str, input: &[Value], partitions: i32) -> Result<Vec<Value>, String> {
    let s = scenario(name);
    let driver = TestDriver::builder(s.topology)
        .application_id(format!("reference-{name}"))
        .partitions(partitions)
        .build()
        .map_err(|e| format!("the driver does not start: {e}"))?;
    let outputs: Vec<_> = s
        .outputs
        .iter()
        .map(|&(topic, k, v)| {
            let out = driver.create_output_topic(topic, Nullable(BytesSerde), Nullable(BytesSerde));
            (topic, k, v, out)
        })
        .collect();
    let mut lines = Vec::new();
    for (n, line) in input.iter().enumerate() {
        if let Some(ms) = line.get("advance_wall_clock_ms") {
            driver
                .advance_wall_clock_time(ms.as_i64().expect("ms"))
                .map_err(|e| format!("input line {}: {e}", n + 1))?;
        } else {
            let topic = line["topic"].as_str().expect("a topic");
            let &(_, kc, vc) = s
                .inputs
                .iter()
                .find(|(t, _, _)| *t == topic)
                .unwrap_or_else(|| panic!("{name} reads no topic {topic}"));
            let headers = line
                .get("headers")
                .and_then(Value::as_object)
                .map(|h| {
                    h.iter()
                        .map(|(k, v)| Header {
                            key: k.clone(),
                            value: v.as_str().map(|s| Bytes::from(s.to_string())),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let input =
                driver.create_input_topic(topic, Nullable(BytesSerde), Nullable(BytesSerde));
            input
                .pipe_record(
                    TestRecord::new(
                        kc.encode(&line["key"]),
                        vc.encode(&line["value"]),
                        line["timestamp"].as_i64().expect("a timestamp"),
                    )
                    .with_headers(headers),
                )
                .map_err(|e| format!("input line {}: {e}", n + 1))?;
        }
        for (topic, kc, vc, out) in &outputs {
            for r in out.read_records_to_list() {
                let mut line = json!({
                    "topic": topic,
                    "key": kc.decode(r.key.as_ref()),
                    "value": vc.decode(r.value.as_ref()),
                    "timestamp": r.timestamp,
                });
                if partitions > 1 {
                    line["partition"] = json!(r.partition);
                }
                if !r.headers.is_empty() {
                    let headers: BTreeMap<String, Value> = r
                        .headers
                        .iter()
                        .map(|h| {
                            let v = h.value.as_ref().map_or(Value::Null, |v| {
                                Value::String(String::from_utf8_lossy(v).into_owned())
                            });
                            (h.key.clone(), v)
                        })
                        .collect();
                    line["headers"] = json!(headers);
                }
                lines.push(line);
            }
        }
    }
    Ok(lines)
}

/// The names of the catalog's scenarios.
pub fn scenarios() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(catalog())
        .expect("the catalog")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}
