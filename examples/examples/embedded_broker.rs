//! Starts eddy's broker inside the program, creates a topic, writes records with acks=all and
//! reads them back with eddy's client — all through the Kafka wire protocol, as any Kafka
//! client would.
//!
//! ```sh
//! cargo run --example embedded_broker
//! ```

use std::time::Duration;

use eddy::client::{
    Admin, Consumer, ConsumerConfig, NewTopic, OffsetReset, Producer, ProducerConfig,
    ProducerRecord,
};
use eddy::embedded::EmbeddedBroker;

const TOPIC: &str = "seat-holds";

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let broker = EmbeddedBroker::start().await?;
    let bootstrap = broker.bootstrap();
    println!("broker listening on {bootstrap}");
    let admin = Admin::connect(&bootstrap).await?;
    admin.create_topics(&[NewTopic::new(TOPIC, 3)]).await?;

    // Every event of an order goes to the partition its key picks, as the Java client picks it,
    // so one consumer sees all of them, in order.
    let events = [
        ("order-17", "hold A12"),
        ("order-17", "release A12"),
        ("order-17", "hold A12"),
        ("order-42", "hold C3"),
    ];
    let producer = Producer::new(ProducerConfig::new(&bootstrap))?;
    let mut deliveries = Vec::new();
    for (key, value) in events {
        deliveries.push(
            producer
                .send(ProducerRecord::new(TOPIC, value).key(key))
                .await?,
        );
    }
    for delivery in deliveries {
        let written = delivery.await?;
        println!(
            "written to partition {} at offset {}",
            written.partition, written.offset
        );
    }

    let mut consumer = Consumer::new(
        ConsumerConfig::new(&bootstrap)
            .group_id("embedded-example")
            .auto_offset_reset(OffsetReset::Earliest),
    )?;
    consumer.subscribe(&[TOPIC])?;
    let mut read = 0;
    while read < events.len() {
        for record in consumer.poll(Duration::from_millis(200)).await? {
            read += 1;
            println!(
                "partition {} offset {}: {} = {}",
                record.partition,
                record.offset,
                String::from_utf8_lossy(&record.key.unwrap_or_default()),
                String::from_utf8_lossy(&record.value.unwrap_or_default()),
            );
        }
    }
    consumer.close().await?;
    broker.shutdown().await?;
    Ok(())
}
