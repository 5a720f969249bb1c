"""Topic administration and offset lookups through confluent-kafka's AdminClient and
consumer: the same answers from eddy's broker as from Apache Kafka's."""

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from clients import create_topic


def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def error_code(future) -> int:
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=30)
    return raised.value.args[0].code()


def test_configs_are_stored_and_described(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2,
                 {"cleanup.policy": "compact", "retention.ms": "3600000", "segment.bytes": "1048576"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    client = admin(broker)  # must outlive its futures
    described = client.describe_configs([resource])[resource].result(timeout=30)
    assert described["cleanup.policy"].value == "compact"
    assert not described["cleanup.policy"].is_default
    assert described["retention.ms"].value == "3600000"
    assert described["segment.bytes"].value == "1048576"
    assert described["max.message.bytes"].value == "1048588"
    assert described["max.message.bytes"].is_default
    assert described["message.timestamp.type"].value == "CreateTime"


def test_bad_topic_requests_get_kafkas_error_codes(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    client = admin(broker)
    again = client.create_topics([NewTopic(topic_name, 1, 1)])[topic_name]
    assert error_code(again) == KafkaError.TOPIC_ALREADY_EXISTS
    bad = client.create_topics([NewTopic(topic_name + "-x", 1, 1, config={"retention.ms": "soon"})])
    assert error_code(bad[topic_name + "-x"]) == KafkaError.INVALID_CONFIG
    unknown = client.create_topics([NewTopic(topic_name + "-y", 1, 1, config={"no.such.config": "1"})])
    assert error_code(unknown[topic_name + "-y"]) == KafkaError.INVALID_CONFIG
    replicated = client.create_topics([NewTopic(topic_name + "-z", 1, 3)])
    assert error_code(replicated[topic_name + "-z"]) == KafkaError.INVALID_REPLICATION_FACTOR
    invalid = client.create_topics([NewTopic("bad name!", 1, 1)])
    assert error_code(invalid["bad name!"]) == KafkaError.TOPIC_EXCEPTION
    shrink = client.create_partitions([NewPartitions(topic_name, 1)])[topic_name]
    assert error_code(shrink) == KafkaError.INVALID_PARTITIONS
    missing = client.delete_topics([topic_name + "-never"], operation_timeout=30)[topic_name + "-never"]
    assert error_code(missing) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_partitions_grow_and_topics_go(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    client = admin(broker)
    client.create_partitions([NewPartitions(topic_name, 5)])[topic_name].result(timeout=30)
    deadline = time.monotonic() + 30
    while len(client.list_topics(topic_name, timeout=10).topics[topic_name].partitions) != 5:
        assert time.monotonic() < deadline, "the new partitions never appeared"
        time.sleep(0.1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic_name, value=b"into a new partition", partition=4)
    assert producer.flush(30) == 0
    client.delete_topics([topic_name], operation_timeout=30)[topic_name].result(timeout=30)
    deadline = time.monotonic() + 30
    while topic_name in client.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "the topic was not deleted"
        time.sleep(0.1)


def test_offsets_by_time_and_at_the_ends(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "max.in.flight": 1})
    base = 1_700_000_000_000
    for i in range(10):
        producer.produce(topic_name, value=f"v{i}".encode(), partition=0, timestamp=base + 1000 * i)
        producer.flush(30)  # one batch per record, so the lookup must look inside the log
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused-offsets"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=30)
        assert (low, high) == (0, 10)
        found = consumer.offsets_for_times(
            [TopicPartition(topic_name, 0, base + 3500)], timeout=30)[0]
        assert found.offset == 4
        exact = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 3000)], timeout=30)[0]
        assert exact.offset == 3
        beyond = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 99_000)], timeout=30)[0]
        assert beyond.offset == -1  # no record that late: the end, as Kafka answers
    finally:
        consumer.close()
