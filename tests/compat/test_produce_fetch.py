"""Produce and fetch with the clients people already use: librdkafka's kcat and
confluent-kafka, and kafka-python, which is not built on librdkafka.

Producers whose order a test checks keep one request in flight: without idempotence, a
retried request may land after a later one (Kafka's brokers refuse the first produce to a
new partition for a moment, so retries do happen there)."""

import collections
import time

from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from clients import create_topic, kcat, read_assigned


def test_kcat_keyed_messages_round_trip(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 6)
    sent = [(f"key-{i % 97}", f"value-{i}") for i in range(10_000)]
    kcat(broker.bootstrap, "-P", "-t", topic_name, "-K", "\t", "-X", "acks=all",
         "-X", "max.in.flight=1",
         stdin="".join(f"{k}\t{v}\n" for k, v in sent))

    out = kcat(broker.bootstrap, "-C", "-t", topic_name, "-o", "beginning", "-e", "-q",
               "-f", "%p\t%o\t%k\t%s\n")
    rows = [line.split("\t") for line in out.splitlines()]
    assert len(rows) == len(sent)
    assert sorted((k, v) for _, _, k, v in rows) == sorted(sent)

    by_partition = collections.defaultdict(list)
    for p, o, k, v in rows:
        by_partition[int(p)].append((int(o), k, int(v.removeprefix("value-"))))
    partitions_of_key = collections.defaultdict(set)
    for p, records in by_partition.items():
        offsets = [o for o, _, _ in records]
        assert offsets == list(range(len(records))), f"partition {p}: offsets not contiguous from 0"
        last_of_key = {}
        for _, k, i in records:
            partitions_of_key[k].add(p)
            assert last_of_key.get(k, -1) < i, f"key {k} out of order in partition {p}"
            last_of_key[k] = i
    assert all(len(ps) == 1 for ps in partitions_of_key.values()), "a key landed in two partitions"
    assert len(by_partition) > 1, "every key landed in one partition"


def test_confluent_kafka_acks_all_headers_and_timestamps(broker, topic_name):
    partitions = 3
    create_topic(broker.bootstrap, topic_name, partitions)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    base = int(time.time() * 1000) - 3_600_000
    delivered = {}

    def on_delivery(err, msg):
        assert err is None, err
        delivered[msg.value()] = (msg.partition(), msg.offset())

    count = 2_000
    for i in range(count):
        producer.produce(
            topic_name,
            key=f"k{i % 50}".encode(),
            value=f"v{i}".encode(),
            partition=i % partitions,
            timestamp=base + i,
            headers=[("trace", f"t{i}".encode()), ("dup", b"a"), ("dup", b"b"), ("empty", b"")],
            on_delivery=on_delivery,
        )
    assert producer.flush(30) == 0
    assert len(delivered) == count

    messages = read_assigned(broker.bootstrap, topic_name, partitions, count)
    assert len(messages) == count
    for m in messages:
        i = int(m.value().decode()[1:])
        assert m.key() == f"k{i % 50}".encode()
        assert (m.partition(), m.offset()) == delivered[m.value()]
        assert m.timestamp() == (1, base + i)  # (TIMESTAMP_CREATE_TIME, the producer's time)
        assert m.headers() == [("trace", f"t{i}".encode()), ("dup", b"a"), ("dup", b"b"), ("empty", b"")]


def test_kafka_python_round_trip(broker, topic_name):
    partitions = 4
    create_topic(broker.bootstrap, topic_name, partitions)
    # kafka-python 3 is idempotent by default: InitProducerId and sequence numbers.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5,
                             max_in_flight_requests_per_connection=1)
    base = int(time.time() * 1000) - 60_000
    count = 1_000
    futures = []
    for i in range(count):
        futures.append(producer.send(
            topic_name,
            key=f"k{i % 10}".encode(),
            value=f"v{i}".encode(),
            partition=i % partitions,
            timestamp_ms=base + i,
            headers=[("n", str(i).encode())],
        ))
    producer.flush(30)
    metadata = {f.get(timeout=30).offset * partitions + f.get().partition: f.get() for f in futures}
    assert len(metadata) == count
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                             enable_auto_commit=False, consumer_timeout_ms=10_000)
    assigned = [KpTopicPartition(topic_name, p) for p in range(partitions)]
    consumer.assign(assigned)
    consumer.seek_to_beginning(*assigned)
    received = []
    for m in consumer:
        received.append(m)
        if len(received) == count:
            break
    consumer.close()
    assert len(received) == count
    for m in received:
        i = int(m.value.decode()[1:])
        assert m.partition == i % partitions
        assert m.offset == i // partitions
        assert m.key == f"k{i % 10}".encode()
        assert m.timestamp == base + i
        assert m.headers == [("n", str(i).encode())]


def test_restart_keeps_every_record(fresh_broker, topic_name):
    create_topic(fresh_broker.bootstrap, topic_name, 2)
    lines = [f"{i}" for i in range(500)]
    kcat(fresh_broker.bootstrap, "-P", "-t", topic_name, "-p", "0", "-X", "acks=all",
         "-X", "max.in.flight=1", stdin="\n".join(lines) + "\n")
    assert fresh_broker.stop() == 0, "broker did not stop cleanly on SIGTERM"
    fresh_broker.start()
    out = kcat(fresh_broker.bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "beginning", "-e", "-q")
    assert out.splitlines() == lines
    # And the restarted broker takes new writes after the old ones.
    kcat(fresh_broker.bootstrap, "-P", "-t", topic_name, "-p", "0", "-X", "acks=all", stdin="after\n")
    out = kcat(fresh_broker.bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "beginning", "-e", "-q")
    assert out.splitlines() == lines + ["after"]
