//! Kafka Streams' `TopologyTestDriver` as a process: `tests/reference/kafka-streams serve`,
//! one JVM answering one request a line (see `Serve.java`), so thousands of inputs cost one
//! JVM start.

use std::io::{self, BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

use super::Outcome;

/// A running Kafka Streams reference.
pub struct KafkaStreamsReference {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl KafkaStreamsReference {
    /// Starts the reference (Maven builds it first if its sources changed).
    pub fn start() -> io::Result<Self> {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("reference/kafka-streams");
        let mut child = Command::new(script)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("a piped stdout"));
        Ok(Self {
            child,
            stdin,
            stdout,
        })
    }

    /// Runs scenario `name` over each input, in order: one outcome per input.
    pub fn run_many(&mut self, name: &str, inputs: &[Vec<Value>]) -> io::Result<Vec<Outcome>> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| io::Error::other("the reference's input is closed"))?;
        let stdout = &mut self.stdout;
        // Requests are written while answers are read, so neither pipe fills up.
        std::thread::scope(|scope| {
            let writer = scope.spawn(move || -> io::Result<()> {
                let mut out = io::BufWriter::new(stdin);
                for input in inputs {
                    serde_json::to_writer(&mut out, &json!({"scenario": name, "input": input}))?;
                    out.write_all(b"\n")?;
                }
                out.flush()
            });
            let mut outcomes = Vec::with_capacity(inputs.len());
            let mut line = String::new();
            for _ in inputs {
                line.clear();
                if stdout.read_line(&mut line)? == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the reference stopped answering",
                    ));
                }
                let answer: Value = serde_json::from_str(&line).map_err(io::Error::other)?;
                outcomes.push(match (answer.get("output"), answer.get("error")) {
                    (Some(Value::Array(lines)), _) => Ok(lines.clone()),
                    (_, Some(error)) => Err(error.as_str().unwrap_or_default().to_string()),
                    _ => return Err(io::Error::other(format!("not an answer: {line}"))),
                });
            }
            writer.join().expect("the writer does not panic")?;
            Ok(outcomes)
        })
    }

    /// Runs scenario `name` over one input.
    pub fn run(&mut self, name: &str, input: &[Value]) -> io::Result<Outcome> {
        let mut outcomes = self.run_many(name, &[input.to_vec()])?;
        Ok(outcomes.pop().expect("one outcome"))
    }
}

impl Drop for KafkaStreamsReference {
    fn drop(&mut self) {
        // The end of its input ends the process.
        self.stdin.take();
        if self.child.wait().is_err() {
            let _ = self.child.kill();
        }
    }
}
