"""What the exactly-once soaks share: the input driver, eos-soak-app processes, the
application's committed progress, and the verifier that recomputes every output from the
input read with read_committed."""

import os
import random
import struct
import subprocess
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from brokers import REPO
from clients import create_topic, open_transactions, read_to_end

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


def soak_seed() -> int:
    """The run's seed: `SOAK_SEED` when set (to replay a run), random otherwise; printed."""
    seed = int(os.environ.get("SOAK_SEED", random.randrange(1 << 30)))
    print(f"SOAK_SEED={seed}")
    return seed


def create_soak_topics(bootstrap: str, partitions: int):
    """The topics eos-soak-app expects to exist: its input and its outputs."""
    for topic in ["data", *OUTPUTS]:
        create_topic(bootstrap, topic, partitions)


class Driver(threading.Thread):
    """Writes `records` inputs over `keys` keys to `data` at a steady pace (`pace` records a
    second), keyed as the Java client partitions."""

    def __init__(self, bootstrap: str, seed: int, records: int, keys: int, pace: int = 5_000):
        super().__init__(daemon=True)
        self.bootstrap, self.rng = bootstrap, random.Random(seed)
        self.records, self.keys, self.pace = records, keys, pace
        self.sent = 0
        self.error = None

    def run(self):
        try:
            producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                                 "linger.ms": 5, "partitioner": "murmur2_random",
                                 "message.timeout.ms": 300_000})
            for i in range(self.records):
                key = f"k{self.rng.randrange(self.keys)}".encode()
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
                    time.sleep(500 / self.pace)
            assert producer.flush(300) == 0
        except Exception as e:  # surfaced by the test
            self.error = e


class App:
    """One eos-soak-app process at a time over one state directory, logging to a file."""

    def __init__(self, bootstrap: str, state: Path, log: Path, *extra: str):
        self.bootstrap, self.state, self.log_path, self.extra = bootstrap, state, log, extra
        self.log = open(log, "ab")
        self.process = None
        self.started = 0.0

    def start(self) -> "App":
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [str(APP), "--bootstrap", self.bootstrap, "--state-dir", str(self.state),
             "--guarantee", "exactly_once_v2", *self.extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self):
        self.process.kill()
        self.process.wait()

    def terminate(self) -> int:
        self.process.terminate()
        return self.process.wait(90)

    def tail(self, lines: int = 40) -> str:
        self.log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def close(self):
        if self.running():
            self.kill()
        self.log.close()


def processed(bootstrap: str, partitions: int) -> int:
    """How many input records the application has committed, or -1 if no answer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-soak"})
    try:
        offsets = consumer.committed([TopicPartition("data", p) for p in range(partitions)], timeout=5)
        return sum(max(tp.offset, 0) for tp in offsets)
    except Exception:
        return -1
    finally:
        consumer.close()


def caught_up(bootstrap: str, partitions: int) -> bool:
    """Whether the application has committed every partition it reads (`data` and its
    repartition topic) up to the partition's end: nothing is left to process."""
    from confluent_kafka.admin import AdminClient
    try:
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).topics
        read = ["data"] + [t for t in topics if t.startswith("eos-soak-") and t.endswith("-repartition")]
        tps = [TopicPartition(t, p) for t in read for p in range(partitions)]
        group = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-soak",
                          "isolation.level": "read_committed"})
        try:
            committed = group.committed(tps, timeout=5)
            ends = [group.get_watermark_offsets(tp, timeout=5, cached=False)[1] for tp in tps]
        finally:
            group.close()
        return all(c.offset == end for c, end in zip(committed, ends))
    except Exception:
        return False


def read_committed(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[bytes, bytes]]]:
    out: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(partitions)}
    for m in read_to_end(bootstrap, topic, partitions, "read_committed", timeout=180):
        out[m.partition()].append((m.key(), m.value()))
    return out


def verify(bootstrap: str, partitions: int, records: int, seed: int):
    """Every transaction finished, in the application's internal topics too; `echo` is
    `data` partition by partition; every value of
    `min`, `sum`, `max` and `cnt` is the running aggregate of its key's input up to that
    record, none missing or repeated."""
    from confluent_kafka.admin import AdminClient
    listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    internal = {name: len(t.partitions) for name, t in listed.items() if name.startswith("eos-soak-")}
    # The changelogs and the repartition topic too: a transaction left open anywhere would
    # hold restoration or the repartitioned side back.
    topics = {**{t: partitions for t in ["data", *OUTPUTS]}, **internal}
    assert internal, f"no internal topics (seed {seed})"
    assert open_transactions(bootstrap, topics) == [], f"seed {seed}"
    data = read_committed(bootstrap, "data", partitions)
    assert sum(len(v) for v in data.values()) == records
    echo = read_committed(bootstrap, "echo", partitions)
    for p in range(partitions):
        assert echo[p] == data[p], f"echo-{p}: {len(echo[p])} records, {len(data[p])} expected (seed {seed})"
    inputs: dict[bytes, list[int]] = {}
    for p in range(partitions):
        for key, value in data[p]:
            inputs.setdefault(key, []).append(long(value))
    for topic, aggregate in AGGREGATES.items():
        got: dict[bytes, list[int]] = {}
        for rows in read_committed(bootstrap, topic, partitions).values():
            for key, value in rows:
                got.setdefault(key, []).append(long(value))
        wrong = [k for k, values in inputs.items() if got.get(k) != aggregate(values)]
        assert not wrong, f"{topic}: {len(wrong)} keys wrong, e.g. {wrong[0]!r}: " \
            f"{got.get(wrong[0])} for input {inputs[wrong[0]]} (seed {seed})"
        assert set(got) == set(inputs), f"{topic}: keys that were never input (seed {seed})"
