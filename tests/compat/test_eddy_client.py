"""eddy's own client beside an independent one, confluent-kafka (librdkafka), on the same
broker — eddy's and Apache Kafka's — through the `eddy` tool: what eddy's producer writes
confluent-kafka reads back intact, keys land in the partitions librdkafka's murmur2
partitioner chooses, and an eddy consumer and a confluent-kafka consumer share a group.
Last, eddy's Rust client suites (`tests/it/client_*.rs`) run against the broker process."""

import collections
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer

from brokers import Broker, free_port
from clients import create_topic, group_members, read_to_end
from proxy import CuttingProxy

REPO = Path(__file__).resolve().parents[2]
EDDY = os.environ.get("EDDY_BIN", str(REPO / "target" / "release" / "eddy"))


def eddy(*args: str, stdin: str | None = None, timeout: float = 120) -> str:
    result = subprocess.run([EDDY, *args], input=stdin, capture_output=True, text=True,
                            timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(f"eddy {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def test_records_eddy_writes_are_read_back_intact(broker, topic_name):
    eddy("topics", "create", topic_name, "--partitions", "4", "--bootstrap", broker.bootstrap)
    keyed = [(f"key-{i % 50}", f"value-{i}") for i in range(5_000)]
    unkeyed = [f"alone-{i}" for i in range(500)]
    lines = "".join(f"{k}\t{v}\n" for k, v in keyed) + "".join(f"{v}\n" for v in unkeyed)
    eddy("produce", topic_name, "--bootstrap", broker.bootstrap, "--compression", "lz4",
         stdin=lines)
    messages = read_to_end(broker.bootstrap, topic_name, 4)
    def ordered(pairs):
        return sorted(pairs, key=lambda kv: (kv[0] is not None, kv[0] or "", kv[1]))

    got = [(m.key().decode() if m.key() is not None else None, m.value().decode()) for m in messages]
    assert ordered(got) == ordered([*keyed, *[(None, v) for v in unkeyed]])
    # Each key's records in the order they were written.
    by_key = collections.defaultdict(list)
    for m in messages:
        if m.key():
            by_key[m.key().decode()].append(int(m.value().decode().removeprefix("value-")))
    assert all(values == sorted(values) for values in by_key.values())
    # eddy's consumer reads the same records.
    out = eddy("consume", topic_name, "--bootstrap", broker.bootstrap, "--from-beginning",
               "--max-messages", str(len(messages)), "--print-key")
    read = sorted(tuple(line.split("\t", 1)) for line in out.splitlines())
    expected = sorted((k, v) for k, v in keyed) + [("null", v) for v in unkeyed]
    assert read == sorted(expected)


def test_keys_land_where_librdkafkas_murmur2_partitioner_puts_them(broker, topic_name):
    partitions = 7
    keys = [f"customer-{i}" for i in range(1_000)] + ["", "é", "a\u00a0b"]
    keys = [k for k in keys if k]  # an empty key is a key of its own in each client
    by_eddy, by_librdkafka = f"{topic_name}-eddy", f"{topic_name}-librdkafka"
    for t in (by_eddy, by_librdkafka):
        create_topic(broker.bootstrap, t, partitions)
    eddy("produce", by_eddy, "--bootstrap", broker.bootstrap,
         stdin="".join(f"{k}\tv\n" for k in keys))
    producer = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    for k in keys:
        producer.produce(by_librdkafka, key=k.encode(), value=b"v")
    assert producer.flush(30) == 0

    def partition_of_key(topic):
        return {m.key().decode(): m.partition() for m in read_to_end(broker.bootstrap, topic, partitions)}

    eddy_side, librdkafka_side = partition_of_key(by_eddy), partition_of_key(by_librdkafka)
    assert len(eddy_side) == len(keys)
    assert eddy_side == librdkafka_side
    assert len(set(eddy_side.values())) == partitions


def test_an_eddy_consumer_and_a_confluent_kafka_consumer_share_a_group(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 6)
    group = f"{topic_name}-group"
    theirs = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10_000,
        "heartbeat.interval.ms": 200,
    })
    theirs.subscribe([topic_name])
    ours = subprocess.Popen(
        [EDDY, "consume", topic_name, "--bootstrap", broker.bootstrap, "--group", group,
         "--from-beginning", "--print-position"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ours_lines: list[str] = []
    reader = threading.Thread(target=lambda: ours_lines.extend(ours.stdout), daemon=True)
    reader.start()
    theirs_records: list[tuple[int, int]] = []
    try:
        # Both members hold three partitions before any record exists.
        deadline = time.monotonic() + 60
        while True:
            for m in theirs.consume(num_messages=100, timeout=0.2):
                assert m.error() is None, m.error()
            try:
                held = group_members(broker.bootstrap, group)
            except Exception:  # noqa: BLE001 - the group may not exist yet
                held = []
            if sorted(len(h) for h in held) == [3, 3] and set().union(*held) == set(range(6)):
                break
            assert time.monotonic() < deadline, f"the group did not settle: {held}"
        producer = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
        for i in range(1_200):
            producer.produce(topic_name, key=f"k{i}".encode(), value=f"{i}".encode())
        assert producer.flush(30) == 0
        deadline = time.monotonic() + 60
        while len(theirs_records) + len(ours_lines) < 1_200:
            assert time.monotonic() < deadline, \
                f"read {len(theirs_records)} + {len(ours_lines)} of 1200"
            batch = theirs.consume(num_messages=1_000, timeout=0.2)
            for m in batch:
                assert m.error() is None, m.error()
                theirs_records.append((m.partition(), m.offset()))
            # librdkafka refuses a commit with nothing consumed since the last one
            # (_NO_OFFSET), so commit only after a poll that returned records.
            if batch:
                theirs.commit(asynchronous=False)
    finally:
        theirs.close()
        ours.send_signal(signal.SIGTERM)
        ours.wait(30)
        reader.join(10)
    ours_records = [tuple(int(x) for x in line.split("\t")[:2]) for line in ours_lines]
    mine, yours = {p for p, _ in ours_records}, {p for p, _ in theirs_records}
    assert len(mine) == 3 and len(yours) == 3 and not mine & yours, (mine, yours)
    everything = sorted(ours_records + theirs_records)
    assert len(everything) == 1_200 and len(set(everything)) == 1_200


def test_eddys_idempotent_producer_writes_no_duplicate_when_its_connections_are_cut(broker_kind, topic_name):
    """Responses lost and connections cut while `eddy produce` sends: the requests written
    but never acknowledged are sent again, and the broker keeps each record once."""
    port = free_port()
    proxy = CuttingProxy(port)
    broker = Broker(broker_kind, port=port, advertised_port=proxy.port).start()
    try:
        bootstrap = f"127.0.0.1:{proxy.port}"
        create_topic(bootstrap, topic_name, 3)
        count, cuts = 100_000, 6
        log = Path(broker.data_dir).parent / f"{Path(broker.data_dir).name}-producer.log"
        with open(log, "w") as errors:
            producer = subprocess.Popen(
                [EDDY, "produce", topic_name, "--bootstrap", bootstrap, "--linger-ms", "2"],
                stdin=subprocess.PIPE, stderr=errors, text=True,
                env={**os.environ, "EDDY_LOG": os.environ.get("EDDY_LOG", "eddy=debug")})

        def cutter():
            for _ in range(cuts):
                time.sleep(0.4)
                proxy.lose_responses_then_cut(0.2)

        thread = threading.Thread(target=cutter)
        thread.start()
        for start in range(0, count, 1_000):
            producer.stdin.write("".join(f"{i % 101}\t{i:06d}\n" for i in range(start, start + 1_000)))
            producer.stdin.flush()
            time.sleep(0.02)  # spread the records over the cuts
        thread.join()
        producer.stdin.close()
        producer.wait(300)
        assert producer.returncode == 0, f"eddy produce failed:\n{log.read_text()[-30_000:]}"
        assert proxy.cuts >= cuts
        messages = read_to_end(bootstrap, topic_name, 3)
        values = [m.value().decode() for m in messages]
        duplicates = [v for v, n in collections.Counter(values).items() if n > 1]
        assert duplicates == [], f"{len(duplicates)} values written twice, e.g. {duplicates[:5]}"
        assert sorted(values) == [f"{i:06d}" for i in range(count)]
        for p in range(3):
            in_partition = [int(m.value()) for m in messages if m.partition() == p]
            assert in_partition == sorted(in_partition), f"partition {p} out of order"
    finally:
        broker.close()
        proxy.close()


def test_eddys_client_suites_pass_against_the_broker(broker):
    """The Rust tests of eddy's client, of a streams application and its topics, and of
    hostile clients on the wire, pointed at this broker process."""
    suites = ["client_admin", "client_producer", "client_consumer", "client_groups",
              "client_transactions", "forged_coordinator_state", "produce_validation",
              "request_bounds", "streams_topics", "streams_app", "streams_errors",
              "streams_queries"]
    # The suites are modules of the one test binary, `it`: a filter per module.
    command = ["cargo", "test", "-q", "-p", "eddy-tests", "--test", "it", "--"]
    command += [f"{suite}::" for suite in suites]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1_200,
                            env={**os.environ, "EDDY_TEST_BOOTSTRAP": broker.bootstrap})
    assert result.returncode == 0, result.stdout[-6_000:] + result.stderr[-6_000:]
