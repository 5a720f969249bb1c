"""The fraud job (`cargo run --release --example fraud_detection`) as its users run it, as a
process against a broker process, on eddy's broker and on Apache Kafka's:

- run to its end, it reports exactly the bots it planted, and `fraud-alerts` holds one alert
  for each of them and for no other order;
- killed with SIGKILL once its first alerts are committed, then run again with
  `--no-generator` over the same state directory, it resumes where its last transaction left
  off, and `fraud-alerts` still holds exactly one alert per bot.

What the alerts should be is found apart from the job: `order-events` is read back and the
rule applied here, in Python, to each order's holds and releases in event-time order."""

import json
import os
import subprocess
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from brokers import REPO, Broker
from clients import read_to_end

FRAUD = os.environ.get("FRAUD_DETECTION_BIN",
                       str(REPO / "target" / "release" / "examples" / "fraud_detection"))
PARTITIONS = 6
BOTS = 50
WINDOW_MS = 10 * 60 * 1000


class Job:
    """One run of the fraud job, its output collected line by line as it comes."""

    def __init__(self, bootstrap: str, state: Path, *args: str):
        self.process = subprocess.Popen(
            [FRAUD, "--bootstrap", bootstrap, "--state-dir", str(state),
             "--partitions", str(PARTITIONS), *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, predicate, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self.lines):
            assert self.process.poll() is None, f"the job ended first:\n{self.output()}"
            assert time.monotonic() < deadline, f"still waiting after {timeout}s:\n{self.output()}"
            time.sleep(0.01)

    def finish(self, timeout: float = 300) -> int:
        code = self.process.wait(timeout)
        self.reader.join(10)
        return code

    def kill(self) -> None:
        self.process.kill()
        self.finish(30)

    def output(self) -> str:
        return "\n".join(self.lines[-60:])


def expected_alerts(bootstrap: str) -> Counter:
    """The rule applied to what `order-events` holds: four of an order's holds and releases in
    a row, held, released, held, released, the last less than the window after the first; the
    search resumes after the fourth."""
    by_order = defaultdict(list)
    for m in read_to_end(bootstrap, "order-events", PARTITIONS, timeout=180):
        event = json.loads(m.value())
        assert m.key().decode() == event["order_id"] and m.timestamp()[1] == event["at"]
        if event["type"] in ("SeatsHeld", "SeatsReleased"):
            by_order[event["order_id"]].append((event["at"], event["type"]))
    want = ["SeatsHeld", "SeatsReleased", "SeatsHeld", "SeatsReleased"]
    found = Counter()
    for order, events in by_order.items():
        events.sort()
        i = 0
        while i + 4 <= len(events):
            four = events[i:i + 4]
            if [k for _, k in four] == want and four[3][0] - four[0][0] < WINDOW_MS:
                found[order] += 1
                i += 4
            else:
                i += 1
    return found


def committed_alerts(bootstrap: str) -> Counter:
    alerts = Counter()
    for m in read_to_end(bootstrap, "fraud-alerts", PARTITIONS, "read_committed", timeout=180):
        alert = json.loads(m.value())
        assert m.key().decode() == alert["order_id"]
        assert alert["pattern"] == "hold-release-hold-release"
        assert 0 <= alert["last_at"] - alert["first_at"] < WINDOW_MS
        alerts[alert["order_id"]] += 1
    return alerts


@pytest.mark.parametrize("kind", ["eddy", "kafka"])
def test_the_fraud_job_alerts_exactly_the_planted_bots(kind, tmp_path):
    broker = Broker(kind).start()
    try:
        job = Job(broker.bootstrap, tmp_path / "state", "--orders", "20000", "--bots", str(BOTS))
        assert job.finish() == 0, job.output()
        assert f"bots planted       {BOTS}, found {BOTS}, missed 0; normal buyers alerted 0" \
            in job.lines, job.output()
        expected = expected_alerts(broker.bootstrap)
        assert len(expected) == BOTS and set(expected.values()) == {1}
        assert committed_alerts(broker.bootstrap) == expected
    finally:
        broker.close()


@pytest.mark.parametrize("kind", ["eddy", "kafka"])
def test_the_fraud_job_killed_and_run_again_alerts_each_bot_once(kind, tmp_path):
    broker = Broker(kind).start()
    state = tmp_path / "state"
    try:
        first = Job(broker.bootstrap, state, "--orders", "60000", "--bots", str(BOTS))
        # Killed once the input is written and the first alerts committed: mid-processing.
        first.wait_for(lambda lines: any(l.startswith("generator:") and "written" in l for l in lines)
                       and any(l.startswith("ALERT") for l in lines), timeout=240)
        first.kill()
        assert not any(l.startswith("records processed") for l in first.lines), first.output()

        second = Job(broker.bootstrap, state, "--no-generator")
        assert second.finish() == 0, second.output()
        assert "bots planted       unknown: no generator ran" in second.lines, second.output()
        processed = next(l for l in second.lines if l.startswith("records processed"))
        resumed = int(processed.split()[2].replace(",", ""))

        expected = expected_alerts(broker.bootstrap)
        assert len(expected) == BOTS and set(expected.values()) == {1}
        assert committed_alerts(broker.bootstrap) == expected
        total = sum(1 for _ in read_to_end(broker.bootstrap, "order-events", PARTITIONS, timeout=180))
        # The second run went on from the first one's last commit, not from the beginning.
        assert 0 < resumed < total, (resumed, total)
        print(f"{kind}: the second run processed {resumed} of {total} records")
    finally:
        broker.close()
