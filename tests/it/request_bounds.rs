//! What one request may make a broker hold, against a real broker (embedded, or the one
//! `EDDY_TEST_BOOTSTRAP` names, as `.ci/run` does with Apache Kafka): a collection of more
//! than 1,000,000 elements makes the request malformed, as Kafka's decoders have it, and a
//! Metadata request naming one topic many times is answered once per topic.

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use eddy_tests::{TestBroker, WireConnection};
use kafka_protocol::messages::{MetadataResponse, ResponseHeader};
use kafka_protocol::protocol::Decodable;

/// A Metadata v8 request (i16-length names) naming `count` times the topic `name`.
fn metadata_request(name: &str, count: i32) -> Vec<u8> {
    let names = vec![name.to_string(); usize::try_from(count).unwrap()];
    metadata_request_naming(&names, count)
}

/// A Metadata v8 request naming `names`, its array claiming `count` elements.
fn metadata_request_naming(names: &[String], count: i32) -> Vec<u8> {
    let mut frame = BytesMut::new();
    frame.put_i32(0); // the size, below
    frame.put_i16(3); // Metadata
    frame.put_i16(8);
    frame.put_i32(1); // correlation id
    frame.put_i16(-1); // no client id
    frame.put_i32(count);
    for name in names {
        frame.put_i16(i16::try_from(name.len()).unwrap());
        frame.put_slice(name.as_bytes());
    }
    frame.put_u8(0); // allow_auto_topic_creation
    frame.put_u8(0); // include_cluster_authorized_operations
    frame.put_u8(0); // include_topic_authorized_operations
    let size = i32::try_from(frame.len() - 4).unwrap();
    frame[..4].copy_from_slice(&size.to_be_bytes());
    frame.to_vec()
}

#[tokio::test]
async fn a_collection_of_more_than_a_million_elements_closes_the_connection() {
    let broker = TestBroker::start().await;
    let mut conn = WireConnection::connect(broker.bootstrap()).await.unwrap();
    conn.send_raw(&metadata_request("", 1_000_001))
        .await
        .unwrap();
    assert!(conn.is_closed_by_peer(Duration::from_secs(30)).await);
}

#[tokio::test]
async fn a_million_requests_for_one_topic_are_answered_once() {
    let broker = TestBroker::start().await;
    let topic = broker.create_topic("named-often", 2).await;
    let mut conn = WireConnection::connect(broker.bootstrap()).await.unwrap();
    conn.send_raw(&metadata_request(&topic, 1_000_000))
        .await
        .unwrap();
    let mut frame = conn.read_frame().await.unwrap();
    assert!(frame.len() < 4_096, "a {}-byte answer", frame.len());
    let header = ResponseHeader::decode(&mut frame, 0).unwrap();
    assert_eq!(header.correlation_id, 1);
    let response = MetadataResponse::decode(&mut frame, 8).unwrap();
    assert_eq!(response.topics.len(), 1);
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(response.topics[0].partitions.len(), 2);
}

#[tokio::test]
async fn many_distinct_names_are_each_answered_once() {
    let broker = TestBroker::start().await;
    let known = broker.create_topic("named-among-many", 1).await;
    // 200,000 names, unknown but one, each named twice, in two orders.
    let distinct: Vec<String> = (0..200_000)
        .map(|i| match i {
            77_777 => known.clone(),
            i => broker.unique(&format!("never-made-{i}")),
        })
        .collect();
    let names: Vec<String> = distinct
        .iter()
        .chain(distinct.iter().rev())
        .cloned()
        .collect();
    let mut conn = WireConnection::connect(broker.bootstrap()).await.unwrap();
    let count = i32::try_from(names.len()).unwrap();
    conn.send_raw(&metadata_request_naming(&names, count))
        .await
        .unwrap();
    let mut frame = conn.read_frame().await.unwrap();
    ResponseHeader::decode(&mut frame, 0).unwrap();
    let response = MetadataResponse::decode(&mut frame, 8).unwrap();
    assert_eq!(response.topics.len(), distinct.len());
    let mut answered = std::collections::HashMap::new();
    for topic in &response.topics {
        let name = topic.name.as_ref().unwrap().0.to_string();
        assert!(
            answered.insert(name, topic.error_code).is_none(),
            "answered twice"
        );
    }
    for name in &distinct {
        let expected = if *name == known { 0 } else { 3 }; // UNKNOWN_TOPIC_OR_PARTITION
        assert_eq!(answered.get(name), Some(&expected), "{name}");
    }
}
