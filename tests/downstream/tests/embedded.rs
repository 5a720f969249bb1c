//! eddy as a dependency: the application's topology run exactly once on the embedded broker,
//! and the broker's decoders (the Kafka codec eddy builds with) refusing a request whose array
//! claims 2³¹−1 elements in a few bytes, the broker serving on after it.

use std::collections::BTreeMap;
use std::time::Duration;

use eddy::app::{State, Streams, StreamsConfig};
use eddy::client::{
    Admin, Consumer, ConsumerConfig, IsolationLevel, NewTopic, Producer, ProducerConfig,
    ProducerRecord, Topic,
};
use eddy::embedded::EmbeddedBroker;
use eddy::log::TopicPartition;
use eddy_downstream::{topology, ORDERS, SEATS_PER_SHOW};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// A DescribeGroups v0 request (API key 15), which the broker decodes with the codec crate,
/// whose groups array claims `i32::MAX` names and holds none: 18 bytes that a decoder trusting
/// the count would answer by allocating tens of gigabytes, aborting the process.
fn count_bomb() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&15i16.to_be_bytes()); // DescribeGroups
    body.extend_from_slice(&0i16.to_be_bytes()); // version 0
    body.extend_from_slice(&7i32.to_be_bytes()); // correlation id
    body.extend_from_slice(&(-1i16).to_be_bytes()); // no client id
    body.extend_from_slice(&i32::MAX.to_be_bytes()); // groups: 2^31 - 1 of them
    body.extend_from_slice(&[0, 0]);
    let mut frame = i32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// Whether the broker closes the connection without an answer, as Kafka does on a malformed
/// request.
async fn closed_without_answer(connection: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        timeout(Duration::from_secs(30), connection.read(&mut byte)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_bomb_is_refused_and_a_topology_then_runs_exactly_once() {
    let broker = EmbeddedBroker::start().await.unwrap();
    let bootstrap = broker.bootstrap();

    let mut bomb = TcpStream::connect(broker.local_addr()).await.unwrap();
    bomb.write_all(&count_bomb()).await.unwrap();
    assert!(
        closed_without_answer(&mut bomb).await,
        "the broker answered a request claiming 2^31-1 groups"
    );

    let admin = Admin::connect(&bootstrap).await.unwrap();
    for topic in [ORDERS, SEATS_PER_SHOW] {
        admin.ensure_topic(&NewTopic::new(topic, 2)).await.unwrap();
    }
    let orders = [
        ("order-1", "stadium,4"),
        ("order-2", "opera,2"),
        ("order-3", "stadium,3"),
        ("order-4", "no seats"),
        ("order-5", "opera,1"),
        ("order-6", "stadium,5"),
    ];
    let producer = Producer::new(ProducerConfig::new(&bootstrap)).unwrap();
    for (key, value) in orders {
        let record = ProducerRecord::new(Topic::from(ORDERS), value.as_bytes().to_vec()).key(key);
        producer.send(record).await.unwrap().await.unwrap();
    }
    producer.close().await.unwrap();

    let state = tempfile::tempdir().unwrap();
    let config = StreamsConfig::from_properties([
        ("application.id", "downstream-seats"),
        ("bootstrap.servers", bootstrap.as_str()),
        ("processing.guarantee", "exactly_once_v2"),
        ("commit.interval.ms", "100"),
        ("state.dir", state.path().to_str().unwrap()),
    ])
    .unwrap();
    let mut streams = Streams::new(topology().unwrap(), config).unwrap();
    streams.start().await.unwrap();

    let outputs: Vec<TopicPartition> = (0..2)
        .map(|p| TopicPartition::new(SEATS_PER_SHOW, p))
        .collect();
    let mut consumer = Consumer::new(
        ConsumerConfig::new(&bootstrap).isolation_level(IsolationLevel::ReadCommitted),
    )
    .unwrap();
    consumer.assign(&outputs).unwrap();
    consumer.seek_to_beginning(&outputs).await.unwrap();
    let expected = BTreeMap::from([("opera".to_string(), 3), ("stadium".to_string(), 12)]);
    let mut seats = BTreeMap::new();
    let mut updates = 0;
    let waited = timeout(Duration::from_secs(60), async {
        while seats != expected {
            for record in consumer.poll(Duration::from_millis(200)).await.unwrap() {
                let show = String::from_utf8(record.key.unwrap().to_vec()).unwrap();
                let value: [u8; 8] = record.value.unwrap()[..].try_into().unwrap();
                seats.insert(show, i64::from_be_bytes(value));
                updates += 1;
            }
        }
    })
    .await;
    assert!(waited.is_ok(), "seats per show after 60 s: {seats:?}");
    assert_eq!(streams.state(), State::Running);
    streams.close(Duration::from_secs(30)).await.unwrap();
    // Exactly once: each order with seats counted once, so no more updates than such orders.
    assert!(updates <= 5, "{updates} updates for 5 orders with seats");
    broker.shutdown().await.unwrap();
}
