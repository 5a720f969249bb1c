//! Starts eddy's broker inside the program, creates a topic, writes records with acks=all and
//! reads them back — all through the Kafka wire protocol, as any Kafka client would.
//!
//! ```sh
//! cargo run --example embedded_broker
//! ```

use eddy::client::protocol::messages::create_topics_request::CreatableTopic;
use eddy::client::protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use eddy::client::protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use eddy::client::protocol::messages::{
    CreateTopicsRequest, FetchRequest, ProduceRequest, TopicName,
};
use eddy::client::protocol::protocol::StrBytes;
use eddy::client::Connection;
use eddy::embedded::EmbeddedBroker;
use eddy::log::{partition_for_key, Record};
use eddy::wire::batch::{decode_records, BatchBuilder, Batches};
use eddy::wire::compression::Compression;

const PARTITIONS: i32 = 3;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let broker = EmbeddedBroker::start().await?;
    println!("broker listening on {}", broker.bootstrap());
    let conn = Connection::connect(&broker.bootstrap(), "embedded-example").await?;
    let topic = TopicName(StrBytes::from_static_str("seat-holds"));

    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic.clone())
        .with_num_partitions(PARTITIONS)
        .with_replication_factor(1)]);
    conn.send(5, &create).await?;

    // Every event of an order goes to the partition its key picks, as the Java client picks it,
    // so one consumer sees all of them, in order.
    let events = [
        ("order-17", "hold A12"),
        ("order-17", "release A12"),
        ("order-17", "hold A12"),
        ("order-42", "hold C3"),
    ];
    let mut batches: Vec<BatchBuilder> = (0..PARTITIONS)
        .map(|_| BatchBuilder::new(Compression::Lz4))
        .collect();
    for (i, (key, value)) in events.iter().enumerate() {
        let partition = partition_for_key(key.as_bytes(), PARTITIONS);
        batches[partition as usize].append(&Record::new(*key, *value, 1_000 + i as i64));
    }
    let mut data = Vec::new();
    for (partition, batch) in batches.into_iter().enumerate() {
        if !batch.is_empty() {
            data.push(
                PartitionProduceData::default()
                    .with_index(partition as i32)
                    .with_records(Some(batch.build(0)?.into())),
            );
        }
    }
    let produce = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic.clone())
            .with_partition_data(data)]);
    for answer in &conn.send(9, &produce).await?.responses[0].partition_responses {
        println!(
            "partition {}: written at offset {} (error {})",
            answer.index, answer.base_offset, answer.error_code
        );
    }

    let fetch = FetchRequest::default()
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic)
            .with_partitions(
                (0..PARTITIONS)
                    .map(|p| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_partition_max_bytes(1 << 20)
                    })
                    .collect(),
            )]);
    for partition in &conn.send(12, &fetch).await?.responses[0].partitions {
        let records = partition.records.clone().unwrap_or_default();
        for batch in Batches::new(&records) {
            let (_, bytes) = batch?;
            let (_, decoded) = decode_records(&records.slice_ref(bytes), 1 << 20)?;
            for r in decoded {
                println!(
                    "partition {} offset {}: {} = {}",
                    partition.partition_index,
                    r.offset,
                    String::from_utf8_lossy(&r.record.key.unwrap_or_default()),
                    String::from_utf8_lossy(&r.record.value.unwrap_or_default()),
                );
            }
        }
    }
    broker.shutdown().await?;
    Ok(())
}
