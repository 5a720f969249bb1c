//! librdkafka's producer and consumer under the load `eddy bench produce|consume` puts on a
//! broker: values of a fixed size without keys, acks=all, idempotence on, every partition read
//! from the start. Prints one JSON line in `eddy bench`'s format.
//!
//! ```text
//! librdkafka-bench produce|consume BOOTSTRAP TOPIC PARTITIONS RECORDS RECORD_SIZE
//! ```

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 7 {
        eprintln!("usage: librdkafka-bench produce|consume BOOTSTRAP TOPIC PARTITIONS RECORDS RECORD_SIZE");
        std::process::exit(2);
    }
    let (mode, bootstrap, topic) = (&args[1], &args[2], &args[3]);
    let partitions: i32 = args[4].parse().expect("PARTITIONS");
    let records: u64 = args[5].parse().expect("RECORDS");
    let size: usize = args[6].parse().expect("RECORD_SIZE");
    let elapsed = match mode.as_str() {
        "produce" => produce(bootstrap, topic, records, size),
        "consume" => consume(bootstrap, topic, partitions, records),
        _ => panic!("mode must be produce or consume"),
    };
    let secs = elapsed.as_secs_f64();
    println!(
        "{{\"client\":\"librdkafka {}\",\"test\":\"{mode}\",\"records\":{records},\"seconds\":{secs:.3},\"records_per_sec\":{:.0},\"mb_per_sec\":{:.1}}}",
        rdkafka::util::get_rdkafka_version().1,
        records as f64 / secs,
        (records * size as u64) as f64 / 1e6 / secs
    );
}

fn produce(bootstrap: &str, topic: &str, records: u64, size: usize) -> Duration {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("queue.buffering.max.kbytes", "32768")
        .create()
        .expect("a producer");
    let payload: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
    let started = Instant::now();
    for _ in 0..records {
        let mut record = BaseRecord::<(), [u8]>::to(topic).payload(&payload);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(1));
                }
                Err((e, _)) => panic!("produce failed: {e}"),
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer
        .flush(Duration::from_secs(120))
        .expect("every record acknowledged");
    started.elapsed()
}

fn consume(bootstrap: &str, topic: &str, partitions: i32, records: u64) -> Duration {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "librdkafka-bench")
        .set("enable.auto.commit", "false")
        .create()
        .expect("a consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .expect("a partition");
    }
    consumer.assign(&assignment).expect("assigned");
    let started = Instant::now();
    let mut seen = 0u64;
    let mut bytes = 0usize;
    while seen < records {
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(m)) => {
                bytes += m.payload().map_or(0, <[u8]>::len);
                seen += 1;
            }
            Some(Err(e)) => panic!("consume failed: {e}"),
            None => {}
        }
    }
    assert!(bytes > 0);
    started.elapsed()
}
