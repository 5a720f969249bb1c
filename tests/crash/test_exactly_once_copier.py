"""Exactly-once through crashes: a transactional copier (copier.py) copies 100,000 records
from a 3-partition input topic to an output topic while the copier is killed with SIGKILL 3
times and eddy's broker 3 times, at random moments. Afterwards the output, read with
read_committed, is exactly the input transformed: every record once, none missing, each
partition in the input's order; and no transaction is left open (the last stable offset
equals the high watermark in every partition)."""

import os
import random
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from brokers import Broker
from clients import create_topic, open_transactions, read_to_end

PARTITIONS = 3
RECORDS = 100_000
COPIER = Path(__file__).resolve().parent / "copier.py"


def produce_input(bootstrap: str, topic: str) -> dict[int, list[str]]:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    expected: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    for i in range(RECORDS):
        value = f"{i:06d}"
        while True:
            try:
                producer.produce(topic, key=value, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        expected[i % PARTITIONS].append(f"copied-{value}")
    assert producer.flush(60) == 0
    return expected


def copied(bootstrap: str, group: str, topic: str) -> int:
    """How many input records the group has committed, or -1 if the broker does not answer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        offsets = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=5)
        return sum(max(tp.offset, 0) for tp in offsets)
    except Exception:
        return -1
    finally:
        consumer.close()


def read_committed(bootstrap: str, topic: str) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    for m in read_to_end(bootstrap, topic, PARTITIONS, "read_committed", timeout=120):
        out[m.partition()].append(m.value().decode())
    return out


def test_a_transactional_copier_copies_exactly_once_through_sigkills(tmp_path):
    seed = int(os.environ.get("COPIER_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"COPIER_SEED={seed}")
    broker = Broker("eddy").start()
    copier = None
    log = open(tmp_path / "copier.log", "ab")

    def start_copier():
        return subprocess.Popen([sys.executable, str(COPIER), broker.bootstrap, "input", "output", "copiers"],
                                stdout=log, stderr=subprocess.STDOUT)

    try:
        create_topic(broker.bootstrap, "input", PARTITIONS)
        create_topic(broker.bootstrap, "output", PARTITIONS)
        expected = produce_input(broker.bootstrap, "input")

        # Three kills of each, at random points of the copy, in random order.
        marks = sorted(rng.sample(range(5, 90), 6))
        kinds = ["copier"] * 3 + ["broker"] * 3
        rng.shuffle(kinds)
        events = [(RECORDS * m // 100, kind) for m, kind in zip(marks, kinds)]
        copier = start_copier()
        restarts, done_events = 0, []
        deadline = time.monotonic() + 240
        while True:
            assert time.monotonic() < deadline, f"copy stuck at {copied(broker.bootstrap, 'copiers', 'input')} " \
                f"after {done_events} (seed {seed}); broker log:\n{broker.log_tail()}"
            if copier.poll() is not None:
                restarts += 1  # the copier gave up on an error (say, the broker went away)
                copier = start_copier()
            progress = copied(broker.bootstrap, "copiers", "input")
            # Each kill waits until the copy has moved on since the one before (or is done).
            moved_on = not done_events or progress > done_events[-1][1] or progress == RECORDS
            if events and progress >= events[0][0] and moved_on:
                at, kind = events.pop(0)
                if kind == "copier":
                    copier.kill()
                    copier.wait()
                    copier = start_copier()
                else:
                    broker.kill()
                    time.sleep(rng.uniform(0, 0.5))
                    broker.start()
                done_events.append((kind, progress))
            if not events and progress == RECORDS:
                break
            time.sleep(0.1)
        assert len(done_events) == 6
        copier.terminate()
        copier.wait(30)

        output = read_committed(broker.bootstrap, "output")
        for p in range(PARTITIONS):
            got, want = output[p], expected[p]
            assert len(got) == len(set(got)), f"partition {p}: a record copied twice (seed {seed})"
            assert got == want, f"partition {p}: {len(got)} records, {len(want)} expected (seed {seed})"
        assert open_transactions(broker.bootstrap, {"output": PARTITIONS, "__consumer_offsets": 50}) == []
        print(f"events {done_events}, copier restarts after errors {restarts}")
    finally:
        if copier is not None and copier.poll() is None:
            copier.kill()
        log.close()
        broker.close()
