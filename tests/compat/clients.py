"""Small helpers over the real clients: read a whole topic back with each of them."""

import subprocess
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition


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
