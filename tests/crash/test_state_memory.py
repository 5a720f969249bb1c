"""The state memory bound under a small `statestore.memory.max.bytes`: eos-soak-app over 32
partitions (64 tasks, 128 stores, no record cache) in 64 MiB, fed 200,000 keys, whose state
held in memory would take several times that, at as high a rate as the driver writes; and
count-app's count in one-minute tumbling windows over 64 partitions (64 tasks, each a
windowed store, the record cache at its default) in 96 MiB, 2,000,000 records over 1,000,000
keys in two windows, written before it starts so that it reads a backlog as fast as it can
(where each task's emptied buffers and the consumer's decoded records once took 250 MiB).
Each process's resident memory, read from /proc through the run, must stay within the
budget plus 64 MiB (the clients' buffers, the threads, the code), and the outputs must be
exactly right: under a small budget the state goes to sled and is read back, and nothing may
be lost on the way.

The processes run with glibc's malloc arenas at two (`MALLOC_ARENA_MAX=2`), as the book's
state chapter advises: otherwise glibc keeps freed memory in an arena per thread."""

import collections
import os
import random
import struct
import subprocess
import time
from pathlib import Path

from confluent_kafka import Producer, TopicPartition

from brokers import REPO, Broker
from clients import create_topic, open_transactions, read_to_end
from soak import (App, Driver, caught_up, committed_to_end, create_soak_topics, soak_seed,
                  verify)

PARTITIONS = 32
RECORDS = 400_000
KEYS = 200_000
BUDGET = 64 << 20
ALLOWANCE = 64 << 20
COUNT_APP = Path(os.environ.get("COUNT_APP_BIN", REPO / "target" / "release" / "count-app"))
WINDOW_MS = 60_000


def peak_resident(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in bytes; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def test_state_stays_within_its_memory_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")
    seed = soak_seed()
    broker = Broker("eddy").start()
    app = App(broker.bootstrap, tmp_path / "state", tmp_path / "app.log",
              "--config", f"statestore.memory.max.bytes={BUDGET}")
    try:
        create_soak_topics(broker.bootstrap, PARTITIONS)
        app.start()
        driver = Driver(broker.bootstrap, seed, RECORDS, KEYS, pace=200_000)
        driver.start()
        peak = 0
        deadline = time.monotonic() + 600
        while True:
            assert driver.error is None, driver.error
            assert app.running(), app.tail()
            peak = max(peak, peak_resident(app.process.pid))
            if driver.sent == RECORDS and not driver.is_alive() and caught_up(broker.bootstrap, PARTITIONS):
                break
            assert time.monotonic() < deadline, f"not caught up; {driver.sent} sent\n{app.tail()}"
            time.sleep(0.5)
        peak = max(peak, peak_resident(app.process.pid))
        state = subprocess.run(["du", "-sb", str(tmp_path / "state")], capture_output=True,
                               text=True, check=True).stdout.split()[0]
        print(f"peak resident {peak >> 20} MiB with a budget of {BUDGET >> 20} MiB; "
              f"state on disk {int(state) >> 20} MiB")
        assert 0 < peak <= BUDGET + ALLOWANCE, \
            f"peak resident {peak >> 20} MiB over {(BUDGET + ALLOWANCE) >> 20} MiB"
        assert app.terminate() == 0, app.tail()
        verify(broker.bootstrap, PARTITIONS, RECORDS, seed, explain=app.tail)
    finally:
        app.close()
        broker.stop()


WINDOWED_PARTITIONS = 64
WINDOWED_RECORDS = 2_000_000
WINDOWED_KEYS = 1_000_000
WINDOWS = 2
# The record caches at their default (10 MiB, counted three times) leave sled 18 MiB of 96.
WINDOWED_BUDGET = 96 << 20


def windowed_input(seed: int) -> list[tuple[bytes, int]]:
    """The windowed case's input: keys drawn at random, timestamps rising through two
    one-minute windows (so no record is late and each window's counts are final)."""
    rng = random.Random(seed)
    start = 1_700_000_040_000  # a minute's start
    span = WINDOWS * WINDOW_MS
    return [(f"k{rng.randrange(WINDOWED_KEYS)}".encode(), start + i * span // WINDOWED_RECORDS)
            for i in range(WINDOWED_RECORDS)]


def test_windowed_state_stays_within_its_memory_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")
    seed = soak_seed()
    broker = Broker("eddy").start()
    log = open(tmp_path / "app.log", "wb")
    app = None
    try:
        for topic in ["windowed-in", "windowed-out"]:
            create_topic(broker.bootstrap, topic, WINDOWED_PARTITIONS)
        records = windowed_input(seed)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                             "linger.ms": 5, "partitioner": "murmur2_random"})
        for key, timestamp in records:
            while True:
                try:
                    producer.produce("windowed-in", key=key, value=b"v", timestamp=timestamp)
                    break
                except BufferError:
                    producer.poll(0.05)
        assert producer.flush(60) == 0
        app = subprocess.Popen(
            [str(COUNT_APP), "--bootstrap", broker.bootstrap, "--state-dir", str(tmp_path / "state"),
             "--input", "windowed-in", "--output", "windowed-out", "--workload", "windowed",
             "--config", f"statestore.memory.max.bytes={WINDOWED_BUDGET}"],
            stdout=log, stderr=subprocess.STDOUT)

        def tail() -> str:
            log.flush()
            return "\n".join((tmp_path / "app.log").read_text(errors="replace").splitlines()[-40:])

        peak = 0
        deadline = time.monotonic() + 600
        read = [TopicPartition("windowed-in", p) for p in range(WINDOWED_PARTITIONS)]
        while not committed_to_end(broker.bootstrap, "count-app", read):
            assert app.poll() is None, tail()
            assert time.monotonic() < deadline, f"not caught up\n{tail()}"
            peak = max(peak, peak_resident(app.pid))
            time.sleep(0.5)
        peak = max(peak, peak_resident(app.pid))
        print(f"windowed: peak resident {peak >> 20} MiB with a budget of {WINDOWED_BUDGET >> 20} MiB")
        assert 0 < peak <= WINDOWED_BUDGET + ALLOWANCE, \
            f"peak resident {peak >> 20} MiB over {(WINDOWED_BUDGET + ALLOWANCE) >> 20} MiB"
        app.terminate()
        assert app.wait(90) == 0, tail()

        expected = collections.Counter((key, ts - ts % WINDOW_MS) for key, ts in records)
        assert len({window for _, window in expected}) == WINDOWS
        assert open_transactions(broker.bootstrap, {"windowed-out": WINDOWED_PARTITIONS}) == []
        counts: dict[tuple[bytes, int], list[int]] = {}
        for m in read_to_end(broker.bootstrap, "windowed-out", WINDOWED_PARTITIONS,
                             "read_committed", timeout=180):
            key, window = m.key()[:-8], struct.unpack(">q", m.key()[-8:])[0]
            counts.setdefault((key, window), []).append(struct.unpack(">q", m.value())[0])
        wrong = [w for w, n in expected.items() if counts.get(w, [None])[-1] != n]
        assert not wrong, (f"{len(wrong)} windows' last counts wrong, e.g. {wrong[0]!r}: "
                           f"{counts.get(wrong[0])} for {expected[wrong[0]]} records")
        assert set(counts) == set(expected), "counts of windows that had no records"
        flat = [w for w, values in counts.items()
                  if any(a >= b for a, b in zip(values, values[1:]))]
        assert not flat, f"counts that did not rise, e.g. {flat[0]!r}: {counts[flat[0]]}"
    finally:
        if app is not None and app.poll() is None:
            app.kill()
            app.wait()
        log.close()
        broker.stop()
