"""What the exactly-once soaks share: the input driver, eos-soak-app processes, the
application's committed progress, and the verifier that recomputes every output from the
input read with read_committed."""

import collections
import os
import random
import re
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


def committed_to_end(bootstrap: str, group: str, tps: list[TopicPartition]) -> bool:
    """Whether `group` has committed each of `tps` up to its end (read_committed); `False`
    when the broker does not answer."""
    try:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                             "isolation.level": "read_committed"})
        try:
            committed = consumer.committed(tps, timeout=5)
            ends = [consumer.get_watermark_offsets(tp, timeout=5, cached=False)[1] for tp in tps]
        finally:
            consumer.close()
        return all(c.offset == end for c, end in zip(committed, ends))
    except Exception:
        return False


def caught_up(bootstrap: str, partitions: int) -> bool:
    """Whether the application has committed every partition it reads (`data` and its
    repartition topic) up to the partition's end: nothing is left to process."""
    from confluent_kafka.admin import AdminClient
    try:
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).topics
    except Exception:
        return False
    read = ["data"] + [t for t in topics if t.startswith("eos-soak-") and t.endswith("-repartition")]
    return committed_to_end(bootstrap, "eos-soak",
                            [TopicPartition(t, p) for t in read for p in range(partitions)])


def read_committed(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[bytes, bytes]]]:
    out: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(partitions)}
    for m in read_to_end(bootstrap, topic, partitions, "read_committed", timeout=180):
        out[m.partition()].append((m.key(), m.value()))
    return out


def verify(bootstrap: str, partitions: int, records: int, seed: int, explain=lambda: ""):
    """Every transaction finished, in the application's internal topics too; `echo` is
    `data` partition by partition; every value of
    `min`, `sum`, `max` and `cnt` is the running aggregate of its key's input up to that
    record, none missing or repeated. A failure's message ends with `explain()`."""
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
    failures = [f"echo-{p}: {len(echo[p])} records, {len(data[p])} expected, "
                f"{echo_difference(data[p], echo[p])}"
                for p in range(partitions) if echo[p] != data[p]]
    inputs: dict[bytes, list[int]] = {}
    # Where each key's inputs are in `data`: (partition, offset among committed records).
    where: dict[bytes, list[tuple[int, int]]] = {}
    for p in range(partitions):
        for i, (key, value) in enumerate(data[p]):
            inputs.setdefault(key, []).append(long(value))
            where.setdefault(key, []).append((p, i))
    for topic, aggregate in AGGREGATES.items():
        got: dict[bytes, list[int]] = {}
        for rows in read_committed(bootstrap, topic, partitions).values():
            for key, value in rows:
                got.setdefault(key, []).append(long(value))
        wrong = [k for k, values in inputs.items() if got.get(k) != aggregate(values)]
        if wrong:
            failures.append(f"{topic}: {len(wrong)} keys wrong, e.g. {wrong[0]!r}: "
                            f"{got.get(wrong[0])} for input {inputs[wrong[0]]}; "
                            + wrong_keys(wrong, inputs, got, aggregate, where))
        elif set(got) != set(inputs):
            failures.append(f"{topic}: keys that were never input")
    # Every topic is checked before failing: which of them lost what tells a lost output
    # batch (one topic) from inputs processed twice or skipped (all of them).
    assert not failures, f"seed {seed}: " + "\n".join(failures) + "\n" + explain()


def echo_difference(expected: list, got: list) -> str:
    """Where `echo` departs from `data` in one partition: the first record that differs,
    and whether the rest is `data` with one run of records missing or repeated there."""
    first = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b),
                 min(len(expected), len(got)))
    gap = len(expected) - len(got)
    if gap > 0 and got[first:] == expected[first + gap:]:
        return f"data offsets {first}..{first + gap - 1} (committed records) missing, the rest exact"
    if gap < 0 and got[first - gap:] == expected[first:]:
        return f"{-gap} records repeated before data offset {first} (committed records), the rest exact"
    return f"first difference at data offset {first} (committed records)"


def log_lines(path: Path, pattern: str, limit: int = 40) -> str:
    """The last `limit` lines of the log at `path` that match `pattern`, for a failure's
    message (colour codes stripped)."""
    try:
        text = re.sub(r"\x1b\[[0-9;]*m", "", Path(path).read_text(errors="replace"))
    except OSError:
        return f"--- {Path(path).name}: no log"
    found = [line for line in text.splitlines() if re.search(pattern, line)]
    return "\n".join([f"--- {Path(path).name}: {len(found)} lines like {pattern!r}, "
                      f"the last {limit}:", *found[-limit:]])


def wrong_keys(wrong, inputs, got, aggregate, where) -> str:
    """Where the wrong keys go wrong: outputs missing, extra or different, and the span of
    `data` offsets, per partition, of the first input whose output is not as expected."""
    kinds = collections.Counter()
    spans: dict[int, list[int]] = {}
    for key in wrong:
        expected, outputs = aggregate(inputs[key]), got.get(key, [])
        kinds["missing" if len(outputs) < len(expected)
              else "extra" if len(outputs) > len(expected) else "different"] += 1
        first = next((i for i, (a, b) in enumerate(zip(expected, outputs)) if a != b),
                     min(len(expected), len(outputs)))
        partition, offset = where[key][min(first, len(expected) - 1)]
        spans.setdefault(partition, []).append(offset)
    described = ", ".join(f"{n} with outputs {kind}" for kind, n in sorted(kinds.items()))
    by_partition = "; ".join(f"data-{p}: {len(o)} keys, first wrong input at {min(o)}..{max(o)}"
                             for p, o in sorted(spans.items()))
    return f"{described}; {by_partition}"
