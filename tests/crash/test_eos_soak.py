"""Exactly-once soak, after Kafka's StreamsEosTest: a driver writes 100,000 records over 20,000
keys to `data` while eos-soak-app (a streams application: echo, min and sum per key, and after
a repartition max and count per key) runs as a separate process under exactly_once_v2. The
application is killed with SIGKILL 5 times at random moments (some inside a transaction) and
restarted, and the broker once. Afterwards, read with read_committed: `echo` is `data`
partition by partition; every value of `min`, `sum`, `max` and `cnt` is the running aggregate
of the key's input up to that record, none missing or repeated; and no transaction is left
open. It runs against eddy's broker and against Apache Kafka's: eddy must be exactly-once on
Kafka itself."""

import os
import random
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from brokers import REPO, Broker
from clients import create_topic, open_transactions, read_to_end

PARTITIONS = 3
RECORDS = 100_000
KEYS = 20_000
OUTPUTS = ["echo", "min", "sum", "max", "cnt"]
APP = Path(os.environ.get("EOS_SOAK_APP", REPO / "target" / "release" / "eos-soak-app"))
AGGREGATES = {
    "min": lambda values: _running(values, min),
    "sum": lambda values: _running(values, lambda a, b: a + b),
    "max": lambda values: _running(values, max),
    "cnt": lambda values: list(range(1, len(values) + 1)),
}


def _running(values, step):
    out, acc = [], None
    for v in values:
        acc = v if acc is None else step(acc, v)
        out.append(acc)
    return out


def long(b: bytes) -> int:
    return struct.unpack(">q", b)[0]


class Driver(threading.Thread):
    """Writes the input at a steady pace, keyed as the Java client partitions."""

    def __init__(self, bootstrap: str, seed: int):
        super().__init__(daemon=True)
        self.bootstrap, self.rng = bootstrap, random.Random(seed)
        self.sent = 0
        self.error = None

    def run(self):
        try:
            producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                                 "linger.ms": 5, "partitioner": "murmur2_random",
                                 "message.timeout.ms": 300_000})
            for i in range(RECORDS):
                key = f"k{self.rng.randrange(KEYS)}".encode()
                value = struct.pack(">q", self.rng.randrange(-1000, 1000))
                while True:
                    try:
                        producer.produce("data", key=key, value=value)
                        break
                    except BufferError:
                        producer.poll(0.05)
                self.sent = i + 1
                if i % 500 == 499:
                    producer.poll(0)
                    time.sleep(0.1)  # about 5,000 records a second
            assert producer.flush(300) == 0
        except Exception as e:  # surfaced by the test
            self.error = e


def processed(bootstrap: str) -> int:
    """How many input records the application has committed, or -1 if no answer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-soak"})
    try:
        offsets = consumer.committed([TopicPartition("data", p) for p in range(PARTITIONS)], timeout=5)
        return sum(max(tp.offset, 0) for tp in offsets)
    except Exception:
        return -1
    finally:
        consumer.close()


def caught_up(bootstrap: str) -> bool:
    """Whether the application has committed every partition it reads (`data` and its
    repartition topic) up to the partition's end: nothing is left to process."""
    from confluent_kafka.admin import AdminClient
    try:
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).topics
        read = ["data"] + [t for t in topics if t.startswith("eos-soak-") and t.endswith("-repartition")]
        partitions = [TopicPartition(t, p) for t in read for p in range(PARTITIONS)]
        group = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-soak",
                          "isolation.level": "read_committed"})
        try:
            committed = group.committed(partitions, timeout=5)
            ends = [group.get_watermark_offsets(tp, timeout=5, cached=False)[1] for tp in partitions]
        finally:
            group.close()
        return all(c.offset == end for c, end in zip(committed, ends))
    except Exception:
        return False


def read_committed(bootstrap: str, topic: str) -> dict[int, list[tuple[bytes, bytes]]]:
    out: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(PARTITIONS)}
    for m in read_to_end(bootstrap, topic, PARTITIONS, "read_committed", timeout=180):
        out[m.partition()].append((m.key(), m.value()))
    return out


@pytest.mark.parametrize("kind", ["eddy", "kafka"])
def test_eos_soak_app_is_exactly_once_through_sigkills(kind, tmp_path):
    seed = int(os.environ.get("SOAK_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"SOAK_SEED={seed}")
    broker = Broker(kind).start()
    app = None
    log = open(tmp_path / "app.log", "ab")
    state = tmp_path / "state"

    started = [0.0]

    def start_app():
        started[0] = time.monotonic()
        return subprocess.Popen([str(APP), "--bootstrap", broker.bootstrap, "--state-dir", str(state),
                                 "--guarantee", "exactly_once_v2"], stdout=log, stderr=subprocess.STDOUT)

    def app_log() -> str:
        log.flush()
        return "\n".join((tmp_path / "app.log").read_text(errors="replace").splitlines()[-40:])

    try:
        for topic in ["data", *OUTPUTS]:
            create_topic(broker.bootstrap, topic, PARTITIONS)
        app = start_app()
        driver = Driver(broker.bootstrap, seed)
        driver.start()
        # Five kills of the application and one of the broker, at random points of the input.
        marks = sorted(rng.sample(range(5, 95), 6))
        kinds = ["app"] * 5 + ["broker"]
        rng.shuffle(kinds)
        events = [(RECORDS * m // 100, k) for m, k in zip(marks, kinds)]
        done, restarts = [], 0
        deadline = time.monotonic() + 600
        while True:
            assert driver.error is None, driver.error
            progress = processed(broker.bootstrap)
            assert time.monotonic() < deadline, \
                f"stuck at {progress} after {done} (seed {seed}); app log:\n{app_log()}\nbroker log:\n{broker.log_tail()}"
            if app.poll() is not None:
                restarts += 1  # the application stopped on an error (the broker went away, say)
                app = start_app()
            # Each kill waits until the input has reached its mark and the application has
            # moved on since the one before (or has caught up with all of it).
            moved_on = not done or progress > done[-1][1] or progress == RECORDS
            if events and driver.sent >= events[0][0] and moved_on:
                _, what = events.pop(0)
                if what == "app":
                    # At a random moment: often inside an open transaction.
                    time.sleep(rng.uniform(0, 0.3))
                    app.kill()
                    app.wait()
                    app = start_app()
                else:
                    broker.kill()
                    time.sleep(rng.uniform(0, 0.5))
                    broker.start()
                done.append((what, progress))
            # Done once everything is processed by an application that has finished starting
            # (the clean close below is of a running application).
            if not events and not driver.is_alive() and progress == RECORDS \
                    and time.monotonic() - started[0] > 5 and caught_up(broker.bootstrap):
                break
            time.sleep(0.2)
        assert len(done) == 6
        app.terminate()
        assert app.wait(90) == 0, app_log()

        # Every transaction finished: read_committed sees everything below.
        topics = {t: PARTITIONS for t in ["data", *OUTPUTS]}
        assert open_transactions(broker.bootstrap, topics) == [], f"seed {seed}"
        data = read_committed(broker.bootstrap, "data")
        assert sum(len(v) for v in data.values()) == RECORDS
        echo = read_committed(broker.bootstrap, "echo")
        for p in range(PARTITIONS):
            assert echo[p] == data[p], f"echo-{p}: {len(echo[p])} records, {len(data[p])} expected (seed {seed})"
        inputs: dict[bytes, list[int]] = {}
        for p in range(PARTITIONS):
            for key, value in data[p]:
                inputs.setdefault(key, []).append(long(value))
        for topic, aggregate in AGGREGATES.items():
            got: dict[bytes, list[int]] = {}
            for records in read_committed(broker.bootstrap, topic).values():
                for key, value in records:
                    got.setdefault(key, []).append(long(value))
            wrong = [k for k, values in inputs.items() if got.get(k) != aggregate(values)]
            assert not wrong, f"{topic}: {len(wrong)} keys wrong, e.g. {wrong[0]!r}: " \
                f"{got.get(wrong[0])} for input {inputs[wrong[0]]} (seed {seed})"
            assert set(got) == set(inputs), f"{topic}: keys that were never input (seed {seed})"
        print(f"{kind}: events {done}, restarts after errors {restarts}")
    finally:
        if app is not None and app.poll() is None:
            app.kill()
        log.close()
        broker.close()
