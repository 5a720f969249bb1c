//! Whether a task that reads several partitions may process its next record: Kafka Streams'
//! `max.task.idle.ms` (KIP-695). A task takes the queued record with the smallest timestamp
//! among its inputs; while one input's queue is empty that choice can be wrong, as a record
//! with a smaller timestamp may still be on the broker — a join would then see a payment
//! after the stream time had closed its order's window. So the task waits while an empty
//! input has records on the broker (its lag, as the last fetch saw it, above zero) or its end
//! is not yet known, and, once the empty input is caught up, for `max.task.idle.ms` more
//! (none by default). With `max.task.idle.ms` at -1 it never waits.

use std::collections::HashMap;
use std::time::Duration;

use eddy_core::log::TopicPartition;
use eddy_core::streams::internals::StreamTask;

use crate::time::Instant;

/// The waiting rule and the deadlines of the caught-up empty inputs being waited for.
#[derive(Debug)]
pub(super) struct Idling {
    max_idle: Option<Duration>,
    /// When the wait for each caught-up empty input ends (only with a positive idle time).
    deadlines: HashMap<TopicPartition, Instant>,
}

impl Idling {
    /// The rule of `max.task.idle.ms`: `None` never waits.
    pub(super) fn new(max_idle: Option<Duration>) -> Self {
        Self {
            max_idle,
            deadlines: HashMap::new(),
        }
    }

    /// Whether `task` may process its next record now. `lag` is an input partition's lag as
    /// the consumer last saw it; `verdicts` remembers, for the task's inputs by place, what
    /// was decided since the last poll (lags and `now` do not change until the next one).
    pub(super) fn ready(
        &mut self,
        task: &StreamTask,
        lag: &dyn Fn(&TopicPartition) -> Option<i64>,
        now: Instant,
        verdicts: &mut Vec<Option<bool>>,
    ) -> bool {
        let Some(max_idle) = self.max_idle else {
            return true;
        };
        if task.input_count() < 2 {
            return true;
        }
        let partition = task.id().partition;
        if !max_idle.is_zero() {
            // An input with records again waits afresh the next time it runs dry.
            let empty: Vec<&str> = task.empty_inputs().map(|(_, t)| t).collect();
            self.deadlines
                .retain(|tp, _| tp.partition != partition || empty.contains(&tp.topic.as_str()));
        }
        verdicts.resize(task.input_count(), None);
        let mut ready = true;
        for (i, topic) in task.empty_inputs() {
            let verdict = *verdicts[i].get_or_insert_with(|| {
                let tp = TopicPartition::new(topic, partition);
                match lag(&tp) {
                    Some(0) if max_idle.is_zero() => true,
                    Some(0) => now >= *self.deadlines.entry(tp).or_insert(now + max_idle),
                    _ => {
                        self.deadlines.remove(&tp);
                        false
                    }
                }
            });
            ready &= verdict;
        }
        ready
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use eddy_core::log::Record;
    use eddy_core::serde::StringSerde;
    use eddy_core::streams::internals::{StreamTask, TaskConfig};
    use eddy_core::streams::{Consumed, Produced, StreamsBuilder, TaskId};

    use super::*;

    /// A task of a topology merging `left` and `right`, partition 0.
    fn merging_task() -> StreamTask {
        let builder = StreamsBuilder::new();
        let left = builder.stream("left", Consumed::with(StringSerde, StringSerde));
        let right = builder.stream("right", Consumed::with(StringSerde, StringSerde));
        left.merge(right)
            .to("out", Produced::with(StringSerde, StringSerde));
        let topology = builder.build().unwrap();
        let id = TaskId {
            subtopology: 0,
            partition: 0,
        };
        StreamTask::new(&topology, id, &TaskConfig::new("idling")).unwrap()
    }

    fn queue(task: &mut StreamTask, topic: &str) {
        let record = Record::new(b"k".to_vec(), b"v".to_vec(), 1);
        task.add_records(topic, [(0, record)]).unwrap();
    }

    fn lags(pairs: &[(&str, i64)]) -> impl Fn(&TopicPartition) -> Option<i64> {
        let lags: HashMap<TopicPartition, i64> = pairs
            .iter()
            .map(|&(t, l)| (TopicPartition::new(t, 0), l))
            .collect();
        move |tp| lags.get(tp).copied()
    }

    #[test]
    fn an_empty_input_with_records_on_the_broker_or_an_unknown_end_is_waited_for() {
        let mut task = merging_task();
        queue(&mut task, "left");
        let now = Instant::now();
        let mut idling = Idling::new(Some(Duration::ZERO));
        assert!(!idling.ready(&task, &lags(&[]), now, &mut Vec::new()));
        assert!(!idling.ready(&task, &lags(&[("right", 3)]), now, &mut Vec::new()));
        assert!(idling.ready(&task, &lags(&[("right", 0)]), now, &mut Vec::new()));
        queue(&mut task, "right");
        assert!(idling.ready(&task, &lags(&[]), now, &mut Vec::new()));
    }

    #[test]
    fn a_caught_up_empty_input_is_waited_for_max_task_idle_and_minus_one_never_waits() {
        let mut task = merging_task();
        queue(&mut task, "left");
        let caught_up = lags(&[("right", 0)]);
        let now = Instant::now();
        let mut idling = Idling::new(Some(Duration::from_millis(100)));
        assert!(!idling.ready(&task, &caught_up, now, &mut Vec::new()));
        let later = now + Duration::from_millis(99);
        assert!(!idling.ready(&task, &caught_up, later, &mut Vec::new()));
        let due = now + Duration::from_millis(100);
        assert!(idling.ready(&task, &caught_up, due, &mut Vec::new()));
        let mut never = Idling::new(None);
        assert!(never.ready(&task, &lags(&[("right", 5)]), now, &mut Vec::new()));
    }

    #[test]
    fn verdicts_hold_until_the_next_poll() {
        let mut task = merging_task();
        queue(&mut task, "left");
        let mut idling = Idling::new(Some(Duration::ZERO));
        let mut verdicts = Vec::new();
        let now = Instant::now();
        assert!(idling.ready(&task, &lags(&[("right", 0)]), now, &mut verdicts));
        // The lag is not looked at again before the next poll.
        assert!(idling.ready(&task, &lags(&[("right", 7)]), now, &mut verdicts));
        assert!(!idling.ready(&task, &lags(&[("right", 7)]), now, &mut Vec::new()));
    }
}
