"""eddy's own producer (`eddy produce`, idempotent, acks=all) while its broker is killed with
SIGKILL and restarted: the producer resumes by itself, and the topic holds every record
exactly once, each key's records in the order they were sent."""

import collections
import os
import random
import subprocess
import threading
import time
from pathlib import Path

from brokers import Broker
from clients import create_topic, read_to_end

REPO = Path(__file__).resolve().parents[2]
EDDY = os.environ.get("EDDY_BIN", str(REPO / "target" / "release" / "eddy"))
PARTITIONS = 3
RECORDS = 300_000
KILLS = 3


def test_eddys_producer_survives_broker_kills_without_loss_or_duplicates():
    broker = Broker("eddy").start()
    try:
        create_topic(broker.bootstrap, "restarts", PARTITIONS)
        log = Path(broker.data_dir).parent / f"{Path(broker.data_dir).name}-producer.log"
        with open(log, "w") as errors:
            producer = subprocess.Popen(
                [EDDY, "produce", "restarts", "--bootstrap", broker.bootstrap, "--linger-ms", "2"],
                stdin=subprocess.PIPE, stderr=errors, text=True)
        written = threading.Event()

        def feed():
            # Paced, so that the kills fall in the middle of the stream.
            for start in range(0, RECORDS, 1_000):
                lines = "".join(f"k{i % 64}\t{i}\n" for i in range(start, start + 1_000))
                producer.stdin.write(lines)
                producer.stdin.flush()
                time.sleep(0.01)
            producer.stdin.close()
            written.set()

        feeder = threading.Thread(target=feed)
        feeder.start()
        rng = random.Random(11)
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.5, 1.2))
            broker.kill()
            time.sleep(rng.uniform(0.2, 1.0))
            broker.start()
        feeder.join(300)
        assert written.is_set(), "standard input was not consumed"
        producer.wait(300)
        assert producer.returncode == 0, f"eddy produce failed:\n{log.read_text()}"

        messages = read_to_end(broker.bootstrap, "restarts", PARTITIONS, timeout=120)
        values = [int(m.value()) for m in messages]
        counts = collections.Counter(values)
        duplicates = [v for v, n in counts.items() if n > 1]
        missing = RECORDS - len(counts)
        assert not duplicates and missing == 0, \
            f"{len(duplicates)} records twice (e.g. {duplicates[:5]}), {missing} missing"
        by_key = collections.defaultdict(list)
        for m in sorted(messages, key=lambda m: (m.partition(), m.offset())):
            by_key[m.key()].append(int(m.value()))
        assert all(v == sorted(v) for v in by_key.values()), "a key's records out of order"
    finally:
        broker.kill()
