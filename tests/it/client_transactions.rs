//! eddy's transactional producer against a real broker (embedded, or the one
//! `EDDY_TEST_BOOTSTRAP` names): a read-process-write loop that commits its input offsets in
//! the same transactions as its output (one round aborted and redone), and fencing of a
//! producer whose `transactional.id` another producer took.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
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

/// A TCP relay in front of a broker that can be cut: while cut, it closes every connection
/// and refuses new ones, as an unreachable cluster does.
struct Relay {
    port: u16,
    target: Arc<OnceLock<SocketAddr>>,
    cut: Arc<AtomicBool>,
    /// Connections being relayed.
    open: Arc<AtomicUsize>,
}

impl Relay {
    /// Listens on a free port; relays nothing until [`Relay::to`] names the broker.
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let target: Arc<OnceLock<SocketAddr>> = Arc::default();
        let cut = Arc::new(AtomicBool::new(false));
        let open = Arc::new(AtomicUsize::new(0));
        tokio::spawn({
            let (target, cut, open) = (Arc::clone(&target), Arc::clone(&cut), Arc::clone(&open));
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    match target.get() {
                        Some(&to) if !cut.load(Ordering::Acquire) => {
                            open.fetch_add(1, Ordering::AcqRel);
                            let (cut, open) = (Arc::clone(&cut), Arc::clone(&open));
                            tokio::spawn(async move {
                                relay(client, to, cut).await;
                                open.fetch_sub(1, Ordering::AcqRel);
                            });
                        }
                        _ => drop(client),
                    }
                }
            }
        });
        Self {
            port,
            target,
            cut,
            open,
        }
    }

    fn to(&self, broker: SocketAddr) {
        self.target.set(broker).unwrap();
    }

    fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Cuts every connection (returning once they are closed), or lets them be made again.
    async fn cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::Release);
        while cut && self.open.load(Ordering::Acquire) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Relays `client` to `to` until either side closes or the relay is cut.
async fn relay(client: tokio::net::TcpStream, to: SocketAddr, cut: Arc<AtomicBool>) {
    let Ok(server) = tokio::net::TcpStream::connect(to).await else {
        return;
    };
    let (mut client_in, mut client_out) = client.into_split();
    let (mut server_in, mut server_out) = server.into_split();
    let until_cut = async {
        while !cut.load(Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::select! {
        _ = tokio::io::copy(&mut client_in, &mut server_out) => {}
        _ = tokio::io::copy(&mut server_in, &mut client_out) => {}
        () = until_cut => {}
    }
}

/// KIP-360: a batch sent in a transaction that is never answered (the cluster unreachable
/// past `delivery.timeout.ms`) leaves a gap in its partition's sequence numbers. The
/// transaction fails and is aborted, the abort bumps the producer's epoch, and the producer
/// goes on with its next transaction: it neither hangs nor stays refused.
#[tokio::test]
async fn a_send_lost_to_an_outage_dooms_its_transaction_and_the_producer_goes_on() {
    let relay = Relay::start().await;
    let dir = tempfile::tempdir().unwrap();
    let broker = eddy::embedded::EmbeddedBroker::builder(dir.path().to_path_buf())
        .advertised_port(relay.port)
        .start()
        .await
        .unwrap();
    relay.to(broker.local_addr());
    let admin = eddy::client::Admin::connect(&relay.bootstrap())
        .await
        .unwrap();
    admin
        .create_topics(&[eddy::client::NewTopic::new("outage", 1)])
        .await
        .unwrap();
    let mut config = ProducerConfig::new(&relay.bootstrap())
        .transactional_id("outage-txn")
        .delivery_timeout(Duration::from_secs(2))
        .linger(Duration::ZERO);
    config.client = config
        .client
        .request_timeout(Duration::from_millis(500))
        .retry_backoff(Duration::from_millis(50));
    let producer = Producer::new(config).unwrap();
    producer.init_transactions().await.unwrap();
    let value = |v: &str| ProducerRecord::new("outage", v.to_string());

    producer.begin_transaction().unwrap();
    producer.send(value("before")).await.unwrap().await.unwrap();
    producer.commit_transaction().await.unwrap();

    // The partition is in the transaction: the next batch is numbered and sent, and lost.
    producer.begin_transaction().unwrap();
    producer.send(value("kept")).await.unwrap().await.unwrap();
    relay.cut(true).await;
    let lost = producer.send(value("lost")).await.unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(20), lost)
        .await
        .expect("the lost send's delivery failed in time");
    assert!(matches!(lost, Err(ClientError::TimedOut(_))), "{lost:?}");
    relay.cut(false).await;
    let commit = producer.commit_transaction().await;
    assert!(commit.is_err(), "a transaction with a lost send committed");
    producer.abort_transaction().await.unwrap();

    producer.begin_transaction().unwrap();
    let after = producer.send(value("after")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), after)
        .await
        .expect("the producer sent nothing after the abort")
        .unwrap();
    producer.commit_transaction().await.unwrap();

    let mut reader = Consumer::new(
        ConsumerConfig::new(&relay.bootstrap())
            .auto_offset_reset(OffsetReset::Earliest)
            .isolation_level(IsolationLevel::ReadCommitted),
    )
    .unwrap();
    reader.assign(&[TopicPartition::new("outage", 0)]).unwrap();
    let mut values = Vec::new();
    wait_until(Duration::from_secs(20), "nothing read", async || {
        for r in reader.poll(Duration::from_millis(200)).await.unwrap() {
            values.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
        values.len() >= 2
    })
    .await;
    assert_eq!(values, ["before", "after"]);
}

/// A producer fenced while batches of its transaction wait behind one in flight fails them
/// with its transaction's error as soon as the fencing is known, as Kafka's producer aborts
/// its undrained batches, rather than holding them until `delivery.timeout.ms`: its close
/// returns at once, which is what a stream thread replacing a fenced producer waits on.
#[tokio::test]
async fn a_fenced_producer_fails_the_batches_queued_behind_its_refused_one() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("fenced-queue", 1).await;
    let id = broker.unique("fenced-queue-id");
    let mut config = ProducerConfig::new(broker.bootstrap())
        .transactional_id(&id)
        .delivery_timeout(Duration::from_secs(300))
        .linger(Duration::ZERO)
        .batch_size(1);
    // One batch in flight at a time, each record a batch of its own: the rest queue.
    config.max_in_flight = 1;
    let first = Producer::new(config).unwrap();
    first.init_transactions().await.unwrap();
    first.begin_transaction().unwrap();
    let record = |i: usize| ProducerRecord::new(&topic, format!("queued {i}"));
    first.send(record(0)).await.unwrap().await.unwrap();

    let second = transactional(&broker, &id);
    second.init_transactions().await.unwrap();
    let mut deliveries = Vec::new();
    for i in 1..=20 {
        deliveries.push(first.send(record(i)).await.unwrap());
    }
    tokio::time::timeout(Duration::from_secs(30), first.close())
        .await
        .expect("the fenced producer's close waited on its queued batches")
        .unwrap();
    for (i, delivery) in deliveries.into_iter().enumerate() {
        let outcome = delivery.await;
        assert!(
            matches!(outcome, Err(ClientError::Fenced { .. })),
            "record {}: {outcome:?}",
            i + 1
        );
    }
    let abort = first.abort_transaction().await;
    assert!(
        matches!(abort, Err(ClientError::Fenced { .. })),
        "{abort:?}"
    );
}
