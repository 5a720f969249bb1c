//! What a task knows of a record it failed to process, for the runtime's error handlers
//! (Kafka's `ErrorHandlerContext`): where the failure happened — reading the record
//! (deserialization), in a processor, or writing an output (serialization) — which
//! processor, and the input record as it was read, its raw key and value included (what a
//! dead-letter record carries).

use std::sync::Arc;

use bytes::Bytes;

use crate::log::{Offset, Timestamp};

/// Where processing a record failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorOrigin {
    /// The source could not read the record's key or value.
    Deserialization,
    /// A processor failed (a store, a user processor, …).
    Processing,
    /// A sink could not write an output's key or value.
    Serialization,
}

/// The record a task failed on, and where it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedRecord {
    /// Where the failure happened.
    pub origin: ErrorOrigin,
    /// The processor that failed.
    pub processor: String,
    /// The input topic (full name).
    pub topic: Arc<str>,
    /// The input partition.
    pub partition: i32,
    /// The record's offset.
    pub offset: Offset,
    /// The record's timestamp.
    pub timestamp: Timestamp,
    /// The key as read, before deserialization.
    pub key: Option<Bytes>,
    /// The value as read, before deserialization.
    pub value: Option<Bytes>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::Record as RawRecord;
    use crate::serde::{I64Serde, Serde, SerdeError, StringSerde};
    use crate::streams::internals::{StreamTask, TaskConfig};
    use crate::streams::{
        Consumed, Processor, ProcessorContext, Produced, Record, StreamsBuilder, StreamsError,
        TaskId,
    };

    /// Fails on negative values, forwards the others.
    struct NoNegatives;

    impl Processor<String, i64, String, i64> for NoNegatives {
        fn process(
            &mut self,
            record: Record<String, i64>,
            ctx: &mut ProcessorContext<'_, String, i64>,
        ) -> Result<(), StreamsError> {
            if record.value < 0 {
                return Err(StreamsError::processor(
                    "no-negatives",
                    format!("{} is negative", record.value),
                ));
            }
            ctx.forward(record);
            Ok(())
        }
    }

    /// Writes longs, refusing 13.
    struct Superstitious;

    impl Serde for Superstitious {
        type Value = i64;

        fn name(&self) -> &'static str {
            "superstitious"
        }

        fn serialize_into(
            &self,
            topic: &str,
            v: &i64,
            out: &mut Vec<u8>,
        ) -> Result<(), SerdeError> {
            if *v == 13 {
                return Err(SerdeError::new("superstitious", topic, "13"));
            }
            I64Serde.serialize_into(topic, v, out)
        }

        fn deserialize(&self, topic: &str, bytes: &[u8]) -> Result<i64, SerdeError> {
            I64Serde.deserialize(topic, bytes)
        }
    }

    #[test]
    fn a_failed_record_says_where_it_failed_and_the_task_goes_on() {
        let builder = StreamsBuilder::new();
        builder
            .stream("in", Consumed::with(StringSerde, I64Serde))
            .process(|| NoNegatives, &[])
            .to("out", Produced::with(StringSerde, Superstitious));
        let topology = builder.build().unwrap();
        let id = TaskId {
            subtopology: 0,
            partition: 0,
        };
        let mut task = StreamTask::new(&topology, id, &TaskConfig::new("app")).unwrap();
        task.init().unwrap();
        let long = |v: i64| RawRecord::new("k", v.to_be_bytes().to_vec(), 10);
        let inputs = [
            RawRecord::new("k", &b"abc"[..], 10),
            long(-1),
            long(13),
            long(7),
        ];
        for (offset, record) in inputs.into_iter().enumerate() {
            task.add_record("in", offset as i64, record).unwrap();
        }
        let mut failures = Vec::new();
        loop {
            match task.process() {
                Ok(true) => {}
                Ok(false) => break,
                Err(_) => failures.push(task.take_failed_record().expect("a record failed")),
            }
        }
        let origins: Vec<(ErrorOrigin, i64)> =
            failures.iter().map(|f| (f.origin, f.offset)).collect();
        assert_eq!(
            origins,
            [
                (ErrorOrigin::Deserialization, 0),
                (ErrorOrigin::Processing, 1),
                (ErrorOrigin::Serialization, 2),
            ]
        );
        // The raw bytes as read, whatever the serdes made of them.
        assert_eq!(failures[0].value.as_deref(), Some(&b"abc"[..]));
        assert_eq!(failures[2].value.as_deref(), Some(&13i64.to_be_bytes()[..]));
        assert_eq!(&*failures[1].topic, "in");
        assert!(failures[1].processor.starts_with("KSTREAM-PROCESSOR-"));
        // The record after them went through.
        assert_eq!(task.output().to_records().len(), 1);
        assert!(task.take_failed_record().is_none());
    }
}
