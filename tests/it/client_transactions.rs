//! eddy's transactional producer against a real broker (embedded, or the one
//! `EDDY_TEST_BOOTSTRAP` names): a read-process-write loop that commits its input offsets in
//! the same transactions as its output (one round aborted and redone), and fencing of a
//! producer whose `transactional.id` another producer took.

use std::collections::BTreeMap;
use std::time::Duration;

use eddy::client::{
    ClientError, Consumer, ConsumerConfig, IsolationLevel, OffsetReset, Producer, ProducerConfig,
    ProducerRecord,
};
use eddy_core::log::TopicPartition;
use eddy_tests::{wait_until, TestBroker};

fn transactional(broker: &TestBroker, id: &str) -> Producer {
    Producer::new(ProducerConfig::new(broker.bootstrap()).transactional_id(id)).unwrap()
}

fn committed_reader(broker: &TestBroker) -> ConsumerConfig {
    ConsumerConfig::new(broker.bootstrap())
        .auto_offset_reset(OffsetReset::Earliest)
        .isolation_level(IsolationLevel::ReadCommitted)
}

#[tokio::test]
async fn a_read_process_write_loop_writes_each_input_once() {
    let broker = TestBroker::start().await;
    let input = broker.create_topic("rpw-in", 3).await;
    let output = broker.create_topic("rpw-out", 3).await;
    let group = broker.unique("rpw");
    let producer = Producer::new(ProducerConfig::new(broker.bootstrap())).unwrap();
    for i in 0..900 {
        producer
            .send(ProducerRecord::new(&input, format!("{i}")).key(format!("k{}", i % 50)))
            .await
            .unwrap();
    }
    producer.close().await.unwrap();

    let copier = transactional(&broker, &broker.unique("rpw-copier"));
    copier.init_transactions().await.unwrap();
    let mut consumer = Consumer::new(
        committed_reader(&broker)
            .group_id(&group)
            .max_poll_records(100),
    )
    .unwrap();
    consumer.subscribe(&[&input]).unwrap();
    let mut copied = 0;
    let mut aborted_once = false;
    wait_until(Duration::from_secs(60), "not all 900 copied", async || {
        let records = consumer.poll(Duration::from_millis(200)).await.unwrap();
        if records.is_empty() {
            return false;
        }
        copier.begin_transaction().unwrap();
        for r in &records {
            let value = format!(
                "copy of {}",
                String::from_utf8_lossy(r.value.as_deref().unwrap())
            );
            let mut out = ProducerRecord::new(&output, value);
            out.key = r.key.clone();
            copier.send(out).await.unwrap();
        }
        if !aborted_once && copied > 300 {
            // Abort this round and go back to the committed offsets: its output is never
            // visible, and the records are copied again by a later transaction.
            aborted_once = true;
            copier.abort_transaction().await.unwrap();
            let assigned = consumer.assignment();
            let committed = consumer.committed(&assigned).await.unwrap();
            for tp in &assigned {
                consumer
                    .seek(tp, committed.get(tp).copied().unwrap_or(0))
                    .unwrap();
            }
            return false;
        }
        let mut offsets = BTreeMap::new();
        for r in &records {
            offsets.insert(TopicPartition::new(&*r.topic, r.partition), r.offset + 1);
        }
        copier
            .send_offsets_to_transaction(&offsets, &consumer.group_metadata().unwrap())
            .await
            .unwrap();
        copier.commit_transaction().await.unwrap();
        copied += records.len();
        copied >= 900
    })
    .await;
    assert!(aborted_once);
    // The output, read committed, is each input record exactly once.
    let mut reader = Consumer::new(committed_reader(&broker)).unwrap();
    let partitions: Vec<_> = (0..3).map(|p| TopicPartition::new(&output, p)).collect();
    reader.assign(&partitions).unwrap();
    let mut seen = Vec::new();
    wait_until(Duration::from_secs(30), "not 900 records", async || {
        seen.extend(reader.poll(Duration::from_millis(200)).await.unwrap());
        seen.len() >= 900
    })
    .await;
    assert!(reader
        .poll(Duration::from_millis(300))
        .await
        .unwrap()
        .is_empty());
    let mut values: Vec<u32> = seen
        .iter()
        .map(|r| {
            String::from_utf8_lossy(r.value.as_deref().unwrap())
                .trim_start_matches("copy of ")
                .parse()
                .unwrap()
        })
        .collect();
    values.sort();
    assert_eq!(values, (0..900).collect::<Vec<u32>>());
    // The group's committed offsets are the ends of the input.
    let inputs: Vec<_> = (0..3).map(|p| TopicPartition::new(&input, p)).collect();
    let committed = consumer.committed(&inputs).await.unwrap();
    assert_eq!(committed.values().sum::<i64>(), 900);
    consumer.close().await.unwrap();
}

#[tokio::test]
async fn a_second_producer_with_the_same_transactional_id_fences_the_first() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("fenced", 1).await;
    let id = broker.unique("fenced-id");
    let first = transactional(&broker, &id);
    first.init_transactions().await.unwrap();
    first.begin_transaction().unwrap();
    first
        .send(ProducerRecord::new(&topic, "from the first"))
        .await
        .unwrap();
    first.flush().await.unwrap();
    let second = transactional(&broker, &id);
    second.init_transactions().await.unwrap();
    // The first producer's open transaction was aborted, and it can do nothing more.
    let commit = first.commit_transaction().await;
    let Err(ClientError::Fenced { source }) = &commit else {
        panic!("{commit:?}");
    };
    // How the coordinator said so is kept: an older epoch (INVALID_PRODUCER_EPOCH) or
    // PRODUCER_FENCED, by the version it speaks.
    assert!(
        matches!(source.code(), Some(47 | 90)),
        "the broker's refusal: {source:?}"
    );
    assert!(std::error::Error::source(commit.as_ref().unwrap_err()).is_some());
    let again = first.begin_transaction();
    assert!(
        matches!(again, Err(ClientError::Fenced { .. })),
        "{again:?}"
    );
    second.begin_transaction().unwrap();
    second
        .send(ProducerRecord::new(&topic, "from the second"))
        .await
        .unwrap();
    second.commit_transaction().await.unwrap();
    let mut reader = Consumer::new(committed_reader(&broker)).unwrap();
    reader.assign(&[TopicPartition::new(&topic, 0)]).unwrap();
    let mut values = Vec::new();
    wait_until(Duration::from_secs(20), "nothing read", async || {
        for r in reader.poll(Duration::from_millis(200)).await.unwrap() {
            values.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
        !values.is_empty()
    })
    .await;
    assert_eq!(values, ["from the second"]);
}

#[tokio::test]
async fn sends_outside_a_transaction_are_refused() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("outside", 1).await;
    let producer = transactional(&broker, &broker.unique("outside-id"));
    let before_init = producer.send(ProducerRecord::new(&topic, "x")).await;
    assert!(matches!(before_init, Err(ClientError::State(_))));
    producer.init_transactions().await.unwrap();
    let before_begin = producer.send(ProducerRecord::new(&topic, "x")).await;
    assert!(matches!(before_begin, Err(ClientError::State(_))));
    assert!(producer.commit_transaction().await.is_err());
    // An empty transaction commits without asking the coordinator for anything.
    producer.begin_transaction().unwrap();
    producer.commit_transaction().await.unwrap();
}

#[tokio::test]
async fn a_read_committed_position_moves_past_the_markers_it_skips() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("markers", 1).await;
    let producer = transactional(&broker, &broker.unique("markers-txn"));
    producer.init_transactions().await.unwrap();
    // A committed transaction of two records, then an aborted one of one: the log holds
    // records at 0 and 1, a commit marker at 2, a record at 3 and an abort marker at 4.
    producer.begin_transaction().unwrap();
    for value in ["a", "b"] {
        producer
            .send(ProducerRecord::new(&topic, value).partition(0))
            .await
            .unwrap();
    }
    producer.commit_transaction().await.unwrap();
    producer.begin_transaction().unwrap();
    producer
        .send(ProducerRecord::new(&topic, "gone").partition(0))
        .await
        .unwrap()
        // Written before the abort, so that the log holds it and the abort marker.
        .await
        .unwrap();
    producer.abort_transaction().await.unwrap();
    let tp = TopicPartition::new(&topic, 0);
    let mut consumer = Consumer::new(committed_reader(&broker)).unwrap();
    consumer.assign(std::slice::from_ref(&tp)).unwrap();
    // The markers are written after EndTxn answers: the end moves to 5 once both are.
    wait_until(Duration::from_secs(10), "the end is", async || {
        consumer
            .seek_to_end(std::slice::from_ref(&tp))
            .await
            .unwrap();
        let end = consumer.position(&tp).await.unwrap();
        if end == 5 {
            return Ok(());
        }
        Err(format!("{end}, not 5"))
    })
    .await;
    let end = 5;
    // From the commit marker on there is nothing to read, yet the position reaches the end,
    // as Kafka's consumer's does.
    consumer.seek(&tp, 2).unwrap();
    wait_until(
        Duration::from_secs(10),
        "the position stays short",
        async || {
            if consumer.position(&tp).await.unwrap() >= end {
                return true;
            }
            assert!(consumer
                .poll(Duration::from_millis(100))
                .await
                .unwrap()
                .is_empty());
            false
        },
    )
    .await;
    assert_eq!(consumer.position(&tp).await.unwrap(), end);
}

#[tokio::test]
async fn an_open_transaction_holds_the_committed_end_back_but_not_the_high_watermark() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("open-ends", 1).await;
    let tp = TopicPartition::new(&topic, 0);
    let producer = transactional(&broker, &broker.unique("open-ends-txn"));
    producer.init_transactions().await.unwrap();
    producer.begin_transaction().unwrap();
    for value in ["a", "b", "c"] {
        producer
            .send(ProducerRecord::new(&topic, value).partition(0))
            .await
            .unwrap()
            .await
            .unwrap();
    }
    // Unassigned partitions are measured too.
    let consumer = Consumer::new(committed_reader(&broker)).unwrap();
    let parts = std::slice::from_ref(&tp);
    assert_eq!(consumer.end_offsets(parts).await.unwrap()[&tp], 0);
    assert_eq!(consumer.high_watermarks(parts).await.unwrap()[&tp], 3);
    producer.commit_transaction().await.unwrap();
    // The marker follows the records: both ends reach past it once it is written.
    wait_until(
        Duration::from_secs(10),
        "the transaction stayed open",
        async || consumer.end_offsets(parts).await.unwrap()[&tp] == 4,
    )
    .await;
    assert_eq!(consumer.high_watermarks(parts).await.unwrap()[&tp], 4);
}
