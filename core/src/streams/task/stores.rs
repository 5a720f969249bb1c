//! A task's stores as the runtime drives them through a commit: flush (forwarding what the
//! caches send down), the changelog taken, commit, checkpoint, or abort.

use super::StreamTask;
use crate::streams::graph::StoreInstance;
use crate::streams::store::{ChangelogBatch, Checkpoint, StoreBuilder};
use crate::streams::StreamsError;

impl StreamTask {
    /// The store writes since the changelog was last cleared, by changelog topic (full name),
    /// borrowed from the stores: nothing is copied until the producer copies it.
    pub fn changelog(&self) -> Vec<(&str, ChangelogBatch<'_>)> {
        self.graph
            .state
            .stores
            .iter()
            .map(|s| (&*s.changelog_topic, s.store.changelog()))
            .filter(|(_, batch)| !batch.is_empty())
            .collect()
    }

    /// Roughly how many bytes what the task wrote and has not given away yet takes: its
    /// output and its stores' changelog records.
    pub fn written_bytes(&self) -> usize {
        let changelog: usize = self
            .graph
            .state
            .stores
            .iter()
            .map(|s| s.store.changelog().bytes())
            .sum();
        self.output().bytes() + changelog
    }

    /// Forgets the store writes once the caller has taken them (the buffers are kept).
    pub fn clear_changelog(&mut self) {
        for slot in &mut self.graph.state.stores {
            slot.store.clear_changelog();
        }
    }

    /// Sends what the stores' record caches hold down to their changelogs and inner stores,
    /// forwarding it from the processors that forward at flush: the first step of a commit,
    /// before the output and the changelog are taken. What a forwarded update writes to a
    /// cached store further down is flushed in the same call.
    pub fn flush_stores(&mut self) -> Result<(), StreamsError> {
        // Each pass can only dirty stores further down the sub-topology: as many passes as
        // stores settle everything.
        for _ in 0..=self.graph.state.stores.len() {
            for slot in &mut self.graph.state.stores {
                slot.store.flush();
            }
            let forwarded = self.graph.forward_flushed();
            if let Some(e) = self.graph.state.error.take() {
                self.graph.state.failed_node = None;
                return Err(e);
            }
            if !forwarded {
                break;
            }
        }
        Ok(())
    }

    /// The stores' writes are committed: `changelog_offset` gives, by changelog topic (full
    /// name), the offset the committed changelog reaches. Stores without a write buffer
    /// record it in their inner stores; write buffers keep the committed writes until
    /// [`checkpoint_stores`](Self::checkpoint_stores).
    pub fn commit_stores(&mut self, changelog_offset: impl Fn(&str) -> Option<i64>) {
        for slot in &mut self.graph.state.stores {
            let offset = changelog_offset(&slot.changelog_topic);
            slot.store.commit(offset);
        }
    }

    /// The stores' writes so far belong to a transaction whose commit is in flight: the
    /// next [`commit_stores`](Self::commit_stores) commits them and nothing written after
    /// this, and no checkpoint applies them before it. What lets the runtime process the
    /// next interval's records while the last interval's transaction commits.
    pub fn seal_stores(&mut self) {
        for slot in &mut self.graph.state.stores {
            slot.store.seal();
        }
    }

    /// Applies the committed writes the stores' write buffers hold to their inner stores,
    /// each store in one batch with the changelog offset it reaches (see [`Checkpoint`] for
    /// `when`).
    pub fn checkpoint_stores(&mut self, when: Checkpoint) {
        for slot in &mut self.graph.state.stores {
            slot.store.checkpoint(when);
        }
    }

    /// Roughly how many bytes the stores' write buffers hold.
    pub fn held_bytes(&mut self) -> usize {
        self.graph
            .state
            .stores
            .iter_mut()
            .map(|s| s.store.held_bytes())
            .sum()
    }

    /// The task's stores that are logged to a changelog topic, with its full name: what
    /// restoration fills from the changelog's partition numbered as the task.
    pub fn logged_stores(&mut self) -> impl Iterator<Item = (&str, &mut StoreInstance)> + '_ {
        self.graph
            .state
            .stores
            .iter_mut()
            .filter(|s| s.definition.logging() && !s.definition.is_global())
            .map(|s| (&*s.changelog_topic, &mut s.store))
    }

    /// An error for the first store whose inner store failed: what the runtime checks before
    /// it takes the output of the records processed, so that nothing a failed read or write
    /// may have changed leaves the task.
    pub fn check_stores(&mut self) -> Result<(), StreamsError> {
        for slot in &mut self.graph.state.stores {
            if let Some(reason) = slot.store.failure() {
                return Err(StreamsError::Store {
                    store: slot.definition.name().to_string(),
                    reason,
                });
            }
        }
        Ok(())
    }

    /// The stores' writes since the last commit are abandoned (the transaction aborted): the
    /// write buffers and caches forget them, the inner stores keep the committed state.
    pub fn abort_stores(&mut self) {
        for slot in &mut self.graph.state.stores {
            slot.store.abort();
        }
    }

    /// The store called `name`, with its definition.
    pub fn store(&mut self, name: &str) -> Option<(&StoreBuilder, &mut StoreInstance)> {
        let slot = self
            .graph
            .state
            .stores
            .iter_mut()
            .find(|s| s.definition.name() == name)?;
        Some((&slot.definition, &mut slot.store))
    }
}

#[cfg(test)]
mod tests {
    use crate::log::Record as RawRecord;
    use crate::serde::{I64Serde, Nullable, Serde, StringSerde};
    use crate::streams::internals::{StreamTask, TaskConfig};
    use crate::streams::store::LayerConfig;
    use crate::streams::{Consumed, Grouped, Materialized, Produced, StreamsBuilder, TaskId};

    /// A count by key, with a record cache of `cache_max_bytes`.
    fn counting_task(cache_max_bytes: usize) -> StreamTask {
        let builder = StreamsBuilder::new();
        builder
            .stream("in", Consumed::with(StringSerde, StringSerde))
            .group_by_key(Grouped::with(StringSerde, StringSerde))
            .count(Materialized::named("counts"))
            .to_stream()
            .to("out", Produced::with(StringSerde, Nullable(I64Serde)));
        task_of(builder, cache_max_bytes)
    }

    /// The first task of what `builder` built, initialized, with a record cache of
    /// `cache_max_bytes`.
    fn task_of(builder: StreamsBuilder, cache_max_bytes: usize) -> StreamTask {
        let topology = builder.build().unwrap();
        let mut config = TaskConfig::new("app");
        config.cache = LayerConfig::own_cache(cache_max_bytes);
        let id = TaskId {
            subtopology: 0,
            partition: 0,
        };
        let mut task = StreamTask::new(&topology, id, &config).unwrap();
        task.init().unwrap();
        task
    }

    fn feed(task: &mut StreamTask, from: i64, keys: &[(&str, i64)]) {
        for (i, (key, timestamp)) in keys.iter().enumerate() {
            let record = RawRecord::new(key.as_bytes().to_vec(), &b"v"[..], *timestamp);
            task.add_record("in", from + i as i64, record).unwrap();
        }
        while task.process().unwrap() {}
    }

    /// The output so far as (key, count, timestamp), taken.
    fn taken(task: &mut StreamTask) -> Vec<(String, i64, i64)> {
        let out = task
            .output()
            .to_records()
            .into_iter()
            .map(|r| {
                let key = StringSerde.deserialize("out", &r.key.unwrap()).unwrap();
                let count = I64Serde.deserialize("out", &r.value.unwrap()).unwrap();
                (key, count, r.timestamp)
            })
            .collect();
        task.clear_output();
        out
    }

    #[test]
    fn a_cached_count_forwards_each_key_once_at_the_flush_with_its_last_value() {
        let mut task = counting_task(1 << 20);
        feed(&mut task, 0, &[("a", 1), ("a", 2), ("b", 3), ("a", 4)]);
        assert_eq!(taken(&mut task), [], "nothing leaves before the flush");
        task.flush_stores().unwrap();
        // In the order of last write, as Kafka's cache flushes its dirty keys, each with the
        // stored timestamp.
        assert_eq!(taken(&mut task), [("b".into(), 1, 3), ("a".into(), 3, 4)]);
        task.flush_stores().unwrap();
        assert_eq!(taken(&mut task), [], "a clean cache forwards nothing");
        feed(&mut task, 4, &[("a", 5)]);
        task.flush_stores().unwrap();
        assert_eq!(taken(&mut task), [("a".into(), 4, 5)]);
    }

    #[test]
    fn a_cached_table_source_forwards_each_key_once_at_the_flush() {
        let builder = StreamsBuilder::new();
        builder
            .table(
                "in",
                Consumed::with(StringSerde, StringSerde),
                Materialized::named("table"),
            )
            .to_stream()
            .to("out", Produced::with(StringSerde, Nullable(StringSerde)));
        let mut task = task_of(builder, 1 << 20);
        feed(&mut task, 0, &[("a", 1), ("b", 2), ("a", 3)]);
        assert!(task.output().to_records().is_empty());
        task.flush_stores().unwrap();
        let out: Vec<(String, i64)> = task
            .output()
            .to_records()
            .into_iter()
            .map(|r| {
                let key = StringSerde.deserialize("out", &r.key.unwrap()).unwrap();
                (key, r.timestamp)
            })
            .collect();
        // In the order of last write, each with the timestamp of its last update.
        assert_eq!(out, [("b".to_string(), 2), ("a".to_string(), 3)]);
    }

    #[test]
    fn a_cached_sliding_count_forwards_the_last_update_of_each_window_at_the_flush() {
        use crate::streams::windows::SlidingWindows;
        use crate::streams::TimeWindowedSerde;
        let diff = std::time::Duration::from_secs(10);
        let keys = TimeWindowedSerde::new(StringSerde, 10_000);
        let sliding_task = |cache_max_bytes| {
            let builder = StreamsBuilder::new();
            builder
                .stream("in", Consumed::with(StringSerde, StringSerde))
                .group_by_key(Grouped::with(StringSerde, StringSerde))
                .windowed_by_sliding(
                    SlidingWindows::of_time_difference_and_grace(diff, diff * 100).unwrap(),
                )
                .count(Materialized::named("counts"))
                .to_stream()
                .to("out", Produced::with(keys, Nullable(I64Serde)));
            task_of(builder, cache_max_bytes)
        };
        let input = [
            ("a", 1_000),
            ("a", 2_000),
            ("b", 5_000),
            ("a", 14_000),
            ("a", 9_000),
            ("b", 30_000),
        ];
        let out = |task: &mut StreamTask| -> Vec<((String, i64), (i64, i64))> {
            let records = task.output().to_records();
            task.clear_output();
            records
                .into_iter()
                .map(|r| {
                    let key = keys.deserialize("out", &r.key.unwrap()).unwrap();
                    let count = I64Serde.deserialize("out", &r.value.unwrap()).unwrap();
                    ((key.key, key.window.start), (count, r.timestamp))
                })
                .collect()
        };
        let mut uncached = sliding_task(0);
        feed(&mut uncached, 0, &input);
        let every_update = out(&mut uncached);
        let last_of_each: std::collections::BTreeMap<_, _> = every_update.iter().cloned().collect();
        assert!(every_update.len() > last_of_each.len(), "{every_update:?}");
        let mut cached = sliding_task(1 << 20);
        feed(&mut cached, 0, &input);
        assert!(
            out(&mut cached).is_empty(),
            "nothing leaves before the flush"
        );
        cached.flush_stores().unwrap();
        let flushed = out(&mut cached);
        assert_eq!(
            flushed.len(),
            last_of_each.len(),
            "each window once: {flushed:?}"
        );
        assert_eq!(
            flushed
                .into_iter()
                .collect::<std::collections::BTreeMap<_, _>>(),
            last_of_each
        );
    }

    #[test]
    fn a_cached_session_count_forwards_each_live_session_once_at_the_flush() {
        use crate::streams::windows::SessionWindows;
        use crate::streams::SessionWindowedSerde;
        type Out = Vec<((String, i64, i64), (Option<i64>, i64))>;
        let gap = std::time::Duration::from_secs(5);
        let keys = SessionWindowedSerde(StringSerde);
        let session_task = |cache_max_bytes| {
            let builder = StreamsBuilder::new();
            builder
                .stream("in", Consumed::with(StringSerde, StringSerde))
                .group_by_key(Grouped::with(StringSerde, StringSerde))
                .windowed_by_session(
                    SessionWindows::of_inactivity_gap_and_grace(gap, gap * 100).unwrap(),
                )
                .count(Materialized::named("sessions"))
                .to_stream()
                .to("out", Produced::with(keys, Nullable(I64Serde)));
            task_of(builder, cache_max_bytes)
        };
        // Sessions that merge (a at 1 s and 9 s, joined by 5 s) and one that stays apart.
        let input = [
            ("a", 1_000),
            ("a", 9_000),
            ("b", 2_000),
            ("a", 5_000),
            ("b", 30_000),
        ];
        let out = |task: &mut StreamTask| -> Out {
            let records = task.output().to_records();
            task.clear_output();
            records
                .into_iter()
                .map(|r| {
                    let key = keys.deserialize("out", &r.key.unwrap()).unwrap();
                    let count = r.value.map(|v| I64Serde.deserialize("out", &v).unwrap());
                    let window = (key.key, key.window.start, key.window.end);
                    (window, (count, r.timestamp))
                })
                .collect()
        };
        let mut uncached = session_task(0);
        feed(&mut uncached, 0, &input);
        let every_update = out(&mut uncached);
        // What the store holds at the end: each session's last update that is not a
        // tombstone (a session merged away before anything went below is never forwarded).
        let live: std::collections::BTreeMap<_, _> = every_update
            .iter()
            .cloned()
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .filter(|(_, (count, _))| count.is_some())
            .collect();
        assert!(every_update.iter().any(|(_, (count, _))| count.is_none()));
        let mut cached = session_task(1 << 20);
        feed(&mut cached, 0, &input);
        assert!(
            out(&mut cached).is_empty(),
            "nothing leaves before the flush"
        );
        cached.flush_stores().unwrap();
        let flushed = out(&mut cached);
        assert_eq!(flushed.len(), live.len(), "{flushed:?}");
        assert_eq!(
            flushed
                .into_iter()
                .collect::<std::collections::BTreeMap<_, _>>(),
            live
        );
        // Merging a flushed session away forwards its tombstone at the next flush.
        feed(&mut cached, 5, &[("b", 27_000)]);
        cached.flush_stores().unwrap();
        let next = out(&mut cached);
        assert!(
            next.contains(&(("b".into(), 30_000, 30_000), (None, 30_000))),
            "{next:?}"
        );
        assert!(
            next.contains(&(("b".into(), 27_000, 30_000), (Some(2), 30_000))),
            "{next:?}"
        );
    }

    #[test]
    fn a_cache_too_small_for_an_entry_forwards_every_update_as_it_evicts() {
        let mut task = counting_task(1);
        feed(&mut task, 0, &[("a", 1), ("a", 2), ("b", 3)]);
        assert_eq!(
            taken(&mut task),
            [("a".into(), 1, 1), ("a".into(), 2, 2), ("b".into(), 1, 3)]
        );
        task.flush_stores().unwrap();
        assert_eq!(taken(&mut task), []);
    }

    #[test]
    fn without_a_cache_every_update_is_forwarded_at_once() {
        let mut task = counting_task(0);
        feed(&mut task, 0, &[("a", 1), ("a", 2)]);
        assert_eq!(taken(&mut task), [("a".into(), 1, 1), ("a".into(), 2, 2)]);
    }

    #[test]
    fn a_cached_windowed_count_forwards_each_window_once_at_the_flush() {
        use crate::streams::windows::TimeWindows;
        use crate::streams::TimeWindowedSerde;
        let builder = StreamsBuilder::new();
        let minute =
            TimeWindows::of_size_with_no_grace(std::time::Duration::from_secs(60)).unwrap();
        let keys = TimeWindowedSerde::new(StringSerde, 60_000);
        builder
            .stream("in", Consumed::with(StringSerde, StringSerde))
            .group_by_key(Grouped::with(StringSerde, StringSerde))
            .windowed_by(minute)
            .count(Materialized::named("counts"))
            .to_stream()
            .to("out", Produced::with(keys, Nullable(I64Serde)));
        let mut task = task_of(builder, 1 << 20);
        feed(
            &mut task,
            0,
            &[("a", 1_000), ("a", 2_000), ("a", 70_000), ("b", 65_000)],
        );
        assert!(task.output().to_records().is_empty());
        task.flush_stores().unwrap();
        let out: Vec<(String, i64, i64, i64)> = task
            .output()
            .to_records()
            .into_iter()
            .map(|r| {
                let key = keys.deserialize("out", &r.key.unwrap()).unwrap();
                let count = I64Serde.deserialize("out", &r.value.unwrap()).unwrap();
                (key.key, key.window.start, count, r.timestamp)
            })
            .collect();
        assert_eq!(
            out,
            [
                ("a".into(), 0, 2, 2_000),
                ("a".into(), 60_000, 1, 70_000),
                ("b".into(), 60_000, 1, 65_000),
            ]
        );
    }

    #[test]
    fn an_aborted_interval_forwards_nothing_of_it() {
        let mut task = counting_task(1 << 20);
        feed(&mut task, 0, &[("a", 1)]);
        task.abort_stores();
        task.clear_output();
        task.flush_stores().unwrap();
        assert_eq!(taken(&mut task), []);
    }
}
