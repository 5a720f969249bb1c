"""Small helpers over the real clients: read a whole topic back with each of them."""

import subprocess
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def kcat(bootstrap: str, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
    result = subprocess.run(
        ["kcat", "-b", bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise AssertionError(f"kcat {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    # kcat reports a message it gave up on but may still exit with 0.
    if "Delivery failed" in result.stderr:
        raise AssertionError(f"kcat {' '.join(args)} dropped messages:\n{result.stderr}")
    return result.stdout


def read_assigned(bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 60, **config):
    """Reads `count` records from every partition of `topic` with confluent-kafka and assign(),
    from the beginning, with no consumer group. Returns the messages in arrival order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-assign-only",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            **config,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    messages = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < count and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                if m.error():
                    raise AssertionError(f"consume error: {m.error()}")
                messages.append(m)
    finally:
        consumer.close()
    return messages


def read_to_end(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted",
                timeout: float = 60):
    """Every record of `topic` from the beginning up to the end a consumer with `isolation`
    sees (the high watermark, or for read_committed the last stable offset), read with
    confluent-kafka and assign(). Returns the messages in arrival order."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "unused-assign-only",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": isolation,
    })
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    messages, at_end = [], set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"{isolation}: no end of {topic} after {timeout}s")
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
                        continue
                    raise AssertionError(f"consume error: {m.error()}")
                at_end.discard(m.partition())
                messages.append(m)
    finally:
        consumer.close()
    return messages


def create_topic(bootstrap: str, name: str, partitions: int, config: dict | None = None) -> None:
    """Creates a topic and waits until the broker's metadata shows a leader for every
    partition: Kafka answers CreateTopics before its metadata cache has caught up, and a
    produce in between is retried, which reorders records of a non-idempotent producer."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=30)
    for f in futures.values():
        f.result(timeout=30)
    deadline = time.monotonic() + 30
    while True:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions \
                and all(p.leader >= 0 and p.error is None for p in topic.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {name} has no leader for every partition after 30s")
        time.sleep(0.05)


def open_transactions(bootstrap: str, topics: dict[str, int]) -> list[str]:
    """Partitions (of `topics`, by partition count) whose last stable offset is not their
    high watermark: a transaction left open."""
    ends = {}
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": isolation})
        try:
            ends[isolation] = {
                (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10, cached=False)[1]
                for t, n in topics.items() for p in range(n)
            }
        finally:
            consumer.close()
    return [f"{t}-{p}: {ends['read_committed'][(t, p)]} < {hw}"
            for (t, p), hw in ends["read_uncommitted"].items() if ends["read_committed"][(t, p)] != hw]


def group_members(bootstrap: str, group: str) -> list[set[int]]:
    """The partitions each member of `group` holds, as the coordinator describes them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return [{tp.partition for tp in m.assignment.topic_partitions} for m in description.members]
