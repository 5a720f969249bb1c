"""eddy's broker killed with SIGKILL while a producer sends with acks=all: every record it
acknowledged is there afterwards, at the offset it acknowledged, in the producer's order,
and every partition's offsets run on with no gap and no offset twice. With an idempotent
producer, no record is stored twice either, though the producer retries across the kills."""

import collections
import random
import threading
import time

import pytest
from confluent_kafka import Producer

from brokers import Broker
from clients import create_topic, read_to_end

PARTITIONS = 3
KILLS = 5


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_acknowledged_records_survive_sigkill(idempotent):
    broker = Broker("eddy").start()
    try:
        create_topic(broker.bootstrap, "crash", PARTITIONS)
        producer = Producer({
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "enable.idempotence": idempotent,
            # Keeps a plain producer's order across retries; an idempotent one keeps it by itself.
            "max.in.flight": 5 if idempotent else 1,
            "linger.ms": 2,
            "retries": 1_000_000,
            "retry.backoff.ms": 50,
            "message.timeout.ms": 120_000,
            "reconnect.backoff.max.ms": 200,
        })
        acked = {}  # value -> (partition, offset)
        failed = []

        def on_delivery(err, msg):
            if err is None:
                acked[msg.value().decode()] = (msg.partition(), msg.offset())
            else:
                failed.append(err)

        stop = threading.Event()

        def killer():
            rng = random.Random(7)
            for _ in range(KILLS):
                time.sleep(rng.uniform(0.4, 1.2))
                broker.kill()
                time.sleep(rng.uniform(0.0, 0.3))
                broker.start()
            stop.set()

        thread = threading.Thread(target=killer)
        thread.start()
        sent = 0
        while not stop.is_set():
            for _ in range(200):
                value = f"seq-{sent:07d}"
                try:
                    producer.produce("crash", value=value.encode(), partition=sent % PARTITIONS,
                                     on_delivery=on_delivery)
                    sent += 1
                except BufferError:
                    break
            producer.poll(0.01)
        thread.join()
        assert producer.flush(120) == 0, "records still unacknowledged after the broker came back"
        assert not failed, f"deliveries failed: {failed[:5]}"
        assert len(acked) == sent and sent > 1000, f"{len(acked)} of {sent} acknowledged"

        # Read to the end: retried writes may have left duplicates of values, so the records
        # stored outnumber the ones acknowledged.
        messages = read_to_end(broker.bootstrap, "crash", PARTITIONS)
        by_offset = {}
        for m in messages:
            by_offset[(m.partition(), m.offset())] = m.value().decode()
        per_partition = collections.defaultdict(list)
        for (p, o), v in sorted(by_offset.items()):
            per_partition[p].append((o, v))
        for p, rows in per_partition.items():
            offsets = [o for o, _ in rows]
            assert offsets == list(range(len(rows))), f"partition {p}: a gap or a repeated offset"
        for value, (p, o) in acked.items():
            assert by_offset.get((p, o)) == value, f"{value} acknowledged at {p}/{o}, found {by_offset.get((p, o))}"
        duplicates = sum(len(rows) for rows in per_partition.values()) - len(acked)
        if idempotent:
            assert duplicates == 0, f"{duplicates} records stored twice by an idempotent producer"
        print(f"\n{sent} records sent, {len(acked)} acknowledged, {KILLS} kills, "
              f"{duplicates} unacknowledged retries stored twice")
        for p, rows in per_partition.items():
            acked_here = [v for o, v in rows if acked.get(v) == (p, o)]
            assert acked_here == sorted(acked_here), f"partition {p}: acknowledged records out of order"
    finally:
        broker.close()
