//! A compacted topic on a running broker: the background cleaner leaves one record per key
//! in the closed segments, at its original offset, as a consumer sees it over the wire.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use eddy::embedded::{Broker, EmbeddedBroker};
use eddy_core::log::Record;
use eddy_core::wire::batch::{decode_records, BatchBuilder, Batches};
use eddy_core::wire::compression::Compression;
use eddy_tests::{wait_until, WireConnection};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{CreateTopicsRequest, FetchRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

fn config(name: &'static str, value: &'static str) -> CreatableTopicConfig {
    CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str(name))
        .with_value(Some(StrBytes::from_static_str(value)))
}

/// On paused time: the broker runs in the test's runtime, so its cleaner's interval passes
/// without being waited for.
#[tokio::test(start_paused = true)]
async fn the_cleaner_compacts_closed_segments_of_a_running_broker() {
    let dir = tempfile::tempdir().unwrap();
    let broker: Broker = EmbeddedBroker::builder(dir.path().to_path_buf())
        .cleaner_backoff(Duration::from_secs(15))
        .start()
        .await
        .unwrap();
    let mut conn = WireConnection::connect(&broker.bootstrap()).await.unwrap();
    let topic = TopicName(StrBytes::from_static_str("balances"));
    let created = conn
        .request(
            7,
            &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
                .with_name(topic.clone())
                .with_num_partitions(1)
                .with_replication_factor(1)
                .with_configs(vec![
                    config("cleanup.policy", "compact"),
                    config("segment.bytes", "1024"),
                ])]),
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);

    for n in 0..200 {
        let mut batch = BatchBuilder::new(Compression::None);
        batch.append(&Record::new(
            format!("account-{}", n % 5),
            format!("{n}"),
            n,
        ));
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic.clone())
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(Bytes::from(batch.build(0).unwrap())))])]);
        let response = conn.request(9, &request).await.unwrap();
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    }

    // The cleaner passes every 15 s of the broker's clock (Kafka's log.cleaner.backoff.ms):
    // read the partition from the start until it has.
    let mut rows = Vec::new();
    wait_until(
        Duration::from_secs(60),
        "nothing was compacted",
        async || {
            rows.clear();
            let mut offset = 0;
            loop {
                // A fetch returns the batches of one segment at most: follow them to the end.
                let fetch = FetchRequest::default()
                    .with_max_bytes(1 << 20)
                    .with_topics(vec![FetchTopic::default()
                        .with_topic(topic.clone())
                        .with_partitions(vec![FetchPartition::default()
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(1 << 20)])]);
                let response = conn.request(12, &fetch).await.unwrap();
                let partition = &response.responses[0].partitions[0];
                let records = partition.records.clone().unwrap();
                for item in Batches::new(&records) {
                    let (header, bytes) = item.unwrap();
                    let (_, decoded) =
                        decode_records(&Bytes::copy_from_slice(bytes), 1 << 20).unwrap();
                    rows.extend(decoded.into_iter().map(|r| (r.offset, r.record)));
                    offset = header.next_offset();
                }
                if records.is_empty() || offset >= partition.high_watermark {
                    break;
                }
            }
            if rows.len() < 100 {
                return Ok(());
            }
            Err(format!("{} records", rows.len()))
        },
    )
    .await;
    // Offsets kept, values where they were, and every key's latest value still the last one.
    let mut latest = BTreeMap::new();
    for (offset, record) in &rows {
        assert_eq!(record.value.as_deref(), Some(offset.to_string().as_bytes()));
        latest.insert(record.key.clone().unwrap(), *offset);
    }
    let expected: BTreeMap<_, _> = (195..200)
        .map(|n: i64| (Bytes::from(format!("account-{}", n % 5)), n))
        .collect();
    assert_eq!(latest, expected);
    broker.shutdown().await.unwrap();
}
