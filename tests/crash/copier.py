"""A read-process-write copier with exactly-once semantics, as a process the crash test can
kill: it reads INPUT with read_committed in the consumer group GROUP, and in one transaction
per batch writes each record, transformed, to the same partition of OUTPUT and commits the
input offsets with send_offsets_to_transaction. Any error ends the process (exit status 3,
or 4 if a call hangs); the test starts a new one, which fences and aborts what the old one left
open.

    python copier.py BOOTSTRAP INPUT OUTPUT GROUP
"""

import os
import sys
import threading

WATCHDOG_SECONDS = 20


class Watchdog:
    """Ends the process if one step takes far longer than its timeout: librdkafka's
    send_offsets_to_transaction can wait forever for a group coordinator it dropped when every
    broker went away (librdkafka issues 5456 and 5511), whatever timeout it is given."""

    def __init__(self):
        self._timer = None

    def step(self):
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(WATCHDOG_SECONDS, self._expired)
        self._timer.daemon = True
        self._timer.start()

    @staticmethod
    def _expired():
        print("copier: a transactional call hung; exiting", file=sys.stderr, flush=True)
        os._exit(4)

from confluent_kafka import Consumer, KafkaException, Producer


def transform(value: bytes) -> bytes:
    return b"copied-" + value


def main(bootstrap: str, input_topic: str, output_topic: str, group: str) -> None:
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": f"{group}-copier",
        "linger.ms": 5,
        "transaction.timeout.ms": 15_000,
        "message.timeout.ms": 15_000,
        "reconnect.backoff.max.ms": 200,
    })
    watchdog = Watchdog()
    watchdog.step()
    producer.init_transactions(10)
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        # Static membership: a restarted copier takes its predecessor's place at once.
        "group.instance.id": f"{group}-0",
        "session.timeout.ms": 10_000,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "reconnect.backoff.max.ms": 200,
    })
    consumer.subscribe([input_topic])
    while True:
        watchdog.step()
        messages = consumer.consume(num_messages=100, timeout=0.5)
        for m in messages:
            if m.error():
                raise KafkaException(m.error())
        if not messages:
            continue
        producer.begin_transaction()
        for m in messages:
            producer.produce(output_topic, key=m.key(), value=transform(m.value()), partition=m.partition())
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 10)
        producer.commit_transaction(10)


if __name__ == "__main__":
    try:
        main(*sys.argv[1:5])
    except KafkaException as e:
        print(f"copier: {e}", file=sys.stderr)
        sys.exit(3)
