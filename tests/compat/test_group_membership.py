"""Membership changes with real clients: a member killed with SIGKILL, an incremental
(cooperative-sticky) rebalance, and a static member coming back. The same behaviour from
eddy's broker as from Apache Kafka's."""

import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer

from clients import create_topic

MEMBER = Path(__file__).resolve().parent / "member.py"


def produce(broker, topic, count, partitions):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def read_log(path, member=0):
    """(partition, offset) -> [(time, what, member)] from a member's log."""
    rows = collections.defaultdict(list)
    for line in Path(path).read_text().splitlines():
        at, kind, partition, offset = line.split()[:4]
        rows[(int(partition), int(offset))].append((float(at), kind, member))
    return rows


def test_a_killed_members_partitions_move_and_committed_records_are_not_redone(broker, topic_name):
    partitions, records = 6, 3000
    create_topic(broker.bootstrap, topic_name, partitions)
    produce(broker, topic_name, records, partitions)
    group = f"kill-{topic_name}"
    logs = [tempfile.mktemp(prefix="member-", suffix=".log") for _ in range(3)]
    procs = [subprocess.Popen([sys.executable, str(MEMBER), broker.bootstrap, group, topic_name, log, "0.002"])
             for log in logs]
    try:
        # Let every member get going, then kill one without warning, in the middle of a
        # partition: a member that joined late can leave the victim time to finish one.
        deadline = time.monotonic() + 60

        def latest(log):
            """The (partition, offset) a member logged last."""
            rows = read_log(log)
            return max(rows.items(), key=lambda kv: max(e[0] for e in kv[1]))[0] if rows else None

        while not (all(os.path.exists(l) and len(read_log(l)) >= 20 for l in logs)
                   and latest(logs[0])[1] < records // partitions - 50):
            assert time.monotonic() < deadline, "the members never got going"
            time.sleep(0.05)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        killed_at = time.time()
        last_partition, last_offset = latest(logs[0])
        # The others take over its partitions after its session expires and finish the topic.
        deadline = time.monotonic() + 90
        while True:
            seen = set()
            for log in logs:
                seen.update(read_log(log).keys())
            if len(seen) == records:
                break
            assert time.monotonic() < deadline, f"{len(seen)} of {records} records processed"
            time.sleep(0.2)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    history = collections.defaultdict(list)
    for member, log in enumerate(logs):
        for key, events in read_log(log, member).items():
            history[key].extend(events)
    # What the killed member committed is not processed again once it is gone: the members
    # that take its partitions over start from its commits. (While the group forms, a member
    # may process and commit a record it has just lost, which the new owner may process too:
    # Kafka's commits check the generation, not who owns the partition, so neither broker is
    # held to more than the kill.)
    for key, events in history.items():
        committed_by_victim = any(k == "committed" and m == 0 for _, k, m in events)
        again = [(at, m) for at, k, m in events if k == "processed" and m != 0 and at > killed_at]
        assert not committed_by_victim or not again, \
            f"record {key} was committed by the killed member, then processed by {again}"
    # The partition the killed member was in the middle of was finished by another member.
    assert last_offset < records // partitions - 1, "the member was killed after its work was done"
    finished_by = {m for (p, o), events in history.items() if p == last_partition and o > last_offset
                   for _, kind, m in events if kind == "processed"}
    assert finished_by and 0 not in finished_by, f"partition {last_partition} did not move: {finished_by}"
    for log in logs:
        os.unlink(log)


class Tracker:
    """A consumer with the partitions it was given and asked to give up."""

    def __init__(self, broker, group, topic, **config):
        self.assigned, self.revoked, self.events = set(), [], 0
        self.consumer = Consumer({
            "bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 500, **config})
        self.consumer.subscribe([topic], on_assign=self.on_assign, on_revoke=self.on_revoke)
        self.cooperative = config.get("partition.assignment.strategy") == "cooperative-sticky"

    def on_assign(self, consumer, partitions):
        self.events += 1
        if self.cooperative:
            consumer.incremental_assign(partitions)
            self.assigned |= {p.partition for p in partitions}
        else:
            self.assigned = {p.partition for p in partitions}

    def on_revoke(self, consumer, partitions):
        self.events += 1
        self.revoked.append({p.partition for p in partitions})
        if self.cooperative:
            consumer.incremental_unassign(partitions)
            self.assigned -= {p.partition for p in partitions}
        else:
            self.assigned = set()


def settle(trackers, sizes, timeout=60):
    deadline = time.monotonic() + timeout
    while sorted(len(t.assigned) for t in trackers) != sorted(sizes):
        assert time.monotonic() < deadline, f"assignments {[t.assigned for t in trackers]}"
        for t in trackers:
            t.consumer.poll(0.05)
    # A little longer, so a late revocation would show.
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        for t in trackers:
            t.consumer.poll(0.05)


def test_cooperative_sticky_moves_only_what_must_move(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 6)
    group = f"coop-{topic_name}"
    strategy = {"partition.assignment.strategy": "cooperative-sticky"}
    members = [Tracker(broker, group, topic_name, **strategy) for _ in range(2)]
    try:
        settle(members, [3, 3])
        before = [set(m.assigned) for m in members]
        for m in members:
            m.revoked.clear()
        members.append(Tracker(broker, group, topic_name, **strategy))
        settle(members, [2, 2, 2])
        for m, had in zip(members[:2], before):
            assert m.assigned <= had, "a member was given partitions it did not have"
            given_up = set().union(*m.revoked) if m.revoked else set()
            assert given_up == had - m.assigned, f"revoked {m.revoked}, kept {m.assigned} of {had}"
            assert len(given_up) == 1, "a member gave up more than it had to"
    finally:
        for m in members:
            m.consumer.close()


def test_a_static_member_returns_to_its_partitions_without_a_rebalance(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 6)
    group = f"static-{topic_name}"
    members = [Tracker(broker, group, topic_name, **{"group.instance.id": f"host-{i}"}) for i in range(3)]
    try:
        settle(members, [2, 2, 2])
        held = set(members[1].assigned)
        events = [m.events for m in members]
        # A static member closes without leaving the group; it comes back within its session.
        members[1].consumer.close()
        members[1] = Tracker(broker, group, topic_name, **{"group.instance.id": "host-1"})
        settle(members, [2, 2, 2])
        assert members[1].assigned == held, "the static member came back to other partitions"
        assert [m.events for m in (members[0], members[2])] == [events[0], events[2]], \
            "the other members went through a rebalance"
    finally:
        for m in members:
            m.consumer.close()
