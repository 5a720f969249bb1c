"""Transactions and idempotence with confluent-kafka (librdkafka): what read_committed and
read_uncommitted consumers see of committed, aborted and open transactions; fencing of a
producer by a newer one with the same transactional.id; the broker aborting a transaction
past its timeout; and an idempotent producer whose connections are cut while it sends."""

import collections
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from brokers import Broker, free_port
from clients import create_topic, read_to_end
from proxy import CuttingProxy


def txn_producer(bootstrap: str, txn_id: str, **config) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **config})
    producer.init_transactions(60)
    return producer


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str):
    """Every record up to the end a consumer with `isolation` sees: (partition, value)."""
    return [(m.partition(), m.value().decode()) for m in read_to_end(bootstrap, topic, partitions, isolation)]


def ends(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    """The end offset of each partition a consumer with `isolation` sees (ListOffsets latest)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": isolation})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def send(producer: Producer, topic: str, values, partitions: int = 2):
    for i, v in enumerate(values):
        producer.produce(topic, value=v, partition=i % partitions)
    producer.flush(30)


def test_committed_aborted_and_open_transactions(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    producer = txn_producer(broker.bootstrap, f"visibility-{topic_name}")
    first = [f"committed-{i}" for i in range(100)]
    aborted = [f"aborted-{i}" for i in range(100)]
    second = [f"committed-again-{i}" for i in range(100)]
    for values, commit in [(first, True), (aborted, False), (second, True)]:
        producer.begin_transaction()
        send(producer, topic_name, values)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)

    committed = read_all(broker.bootstrap, topic_name, 2, "read_committed")
    assert sorted(v for _, v in committed) == sorted(first + second)
    for p in range(2):
        in_partition = [v for q, v in committed if q == p]
        assert in_partition == [v for i, v in enumerate(first) if i % 2 == p] + \
            [v for i, v in enumerate(second) if i % 2 == p], f"partition {p} out of order"
    uncommitted = read_all(broker.bootstrap, topic_name, 2, "read_uncommitted")
    assert sorted(v for _, v in uncommitted) == sorted(first + aborted + second)
    assert ends(broker.bootstrap, topic_name, 2, "read_committed") == \
        ends(broker.bootstrap, topic_name, 2, "read_uncommitted"), "a transaction was left open"

    # An open transaction: written, not visible to read_committed, and the last stable offset
    # stays before it.
    stable_before = ends(broker.bootstrap, topic_name, 2, "read_committed")
    pending = [f"pending-{i}" for i in range(10)]
    producer.begin_transaction()
    send(producer, topic_name, pending)
    assert ends(broker.bootstrap, topic_name, 2, "read_committed") == stable_before
    assert ends(broker.bootstrap, topic_name, 2, "read_uncommitted") > stable_before
    assert not any(v.startswith("pending") for _, v in read_all(broker.bootstrap, topic_name, 2, "read_committed"))
    producer.commit_transaction(30)
    visible = [v for _, v in read_all(broker.bootstrap, topic_name, 2, "read_committed")]
    assert sorted(v for v in visible if v.startswith("pending")) == sorted(pending)


def fenced(error: KafkaError) -> bool:
    return error.fatal() and error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                               KafkaError.INVALID_PRODUCER_EPOCH)


def test_a_newer_producer_fences_the_older(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    txn_id = f"fencing-{topic_name}"
    old = txn_producer(broker.bootstrap, txn_id)
    old.begin_transaction()
    send(old, topic_name, [f"zombie-{i}" for i in range(20)])

    new = txn_producer(broker.bootstrap, txn_id)  # aborts the old producer's transaction
    new.begin_transaction()
    send(new, topic_name, [f"live-{i}" for i in range(20)])
    new.commit_transaction(30)

    with pytest.raises(KafkaException) as raised:
        old.produce(topic_name, value=b"zombie-late", partition=0)
        old.flush(10)
        old.commit_transaction(30)
    assert fenced(raised.value.args[0]), raised.value.args[0]

    values = sorted(v for _, v in read_all(broker.bootstrap, topic_name, 2, "read_committed"))
    assert values == sorted(f"live-{i}" for i in range(20))


def test_the_broker_aborts_a_transaction_past_its_timeout(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    producer = txn_producer(broker.bootstrap, f"timeout-{topic_name}",
                            **{"transaction.timeout.ms": 2000, "message.timeout.ms": 2000})
    producer.begin_transaction()
    send(producer, topic_name, [f"forgotten-{i}" for i in range(10)])
    written = ends(broker.bootstrap, topic_name, 2, "read_uncommitted")
    assert ends(broker.bootstrap, topic_name, 2, "read_committed") == [0, 0]

    # Nobody ends the transaction: the broker aborts it, and its ABORT markers free the
    # last stable offset.
    deadline = time.monotonic() + 30
    while True:
        stable = ends(broker.bootstrap, topic_name, 2, "read_committed")
        if stable == ends(broker.bootstrap, topic_name, 2, "read_uncommitted") and stable > written:
            break
        assert time.monotonic() < deadline, f"the transaction is still open: {stable} vs {written}"
        time.sleep(0.5)
    assert read_all(broker.bootstrap, topic_name, 2, "read_committed") == []
    assert len(read_all(broker.bootstrap, topic_name, 2, "read_uncommitted")) == 10
    with pytest.raises(KafkaException):
        producer.commit_transaction(30)


def test_an_idempotent_producer_writes_no_duplicate_when_its_connections_are_cut(broker_kind, topic_name):
    port = free_port()
    proxy = CuttingProxy(port)
    broker = Broker(broker_kind, port=port, advertised_port=proxy.port).start()
    try:
        bootstrap = f"127.0.0.1:{proxy.port}"
        create_topic(bootstrap, topic_name, 3)
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 2, "batch.num.messages": 500, "retry.backoff.ms": 50})
        failures, delivered = [], [0]

        def on_delivery(err, _msg):
            if err is not None:
                failures.append(err)
            delivered[0] += 1

        count, cuts = 60_000, 6

        def cutter():
            # Whenever a few thousand more records were delivered, lose the broker's answers
            # for a moment and cut: the requests sent meanwhile were written but never
            # acknowledged, and are sent again.
            for n in range(1, cuts + 1):
                while delivered[0] < n * count // (cuts + 2):
                    time.sleep(0.005)
                proxy.lose_responses_then_cut(0.2)

        thread = threading.Thread(target=cutter)
        thread.start()
        try:
            for i in range(count):
                while True:
                    try:
                        producer.produce(topic_name, value=f"{i:06d}", key=str(i % 101), on_delivery=on_delivery)
                        break
                    except BufferError:
                        producer.poll(0.05)
                producer.poll(0)
                if i % 1000 == 0:
                    producer.poll(0.05)  # spread the sends over the cuts
            while thread.is_alive():
                producer.poll(0.05)
        finally:
            thread.join()
        assert producer.flush(120) == 0
        assert proxy.cuts >= cuts, f"only {proxy.cuts} cuts happened while sending"
        assert failures == []
        records = read_all(bootstrap, topic_name, 3, "read_uncommitted")
        values = [v for _, v in records]
        duplicates = [v for v, n in collections.Counter(values).items() if n > 1]
        assert duplicates == [], f"{len(duplicates)} values written twice, e.g. {duplicates[:5]}"
        assert sorted(values) == [f"{i:06d}" for i in range(count)]
        for p in range(3):
            in_partition = [int(v) for q, v in records if q == p]
            assert in_partition == sorted(in_partition), f"partition {p} out of order"
    finally:
        broker.close()
        proxy.close()


def transactional_instance(bootstrap: str, group: str, name: str):
    """One instance of a consume-transform-produce application: a consumer of `group`
    reading committed records and a transactional producer of its own."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    })
    producer = txn_producer(bootstrap, f"{group}-{name}")
    return consumer, producer


def test_a_zombies_offsets_from_an_old_generation_are_refused(broker, topic_name):
    """KIP-447: instance A reads every partition, starts a transaction and takes its group
    metadata; instance B joins, and the group rebalances into a new generation. A, now a
    zombie for the partitions it read, sends its offsets with the old generation: the broker
    refuses its TxnOffsetCommit (ILLEGAL_GENERATION), A must abort, and only B's processing
    of those records is ever committed."""
    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"kip447-{topic_name}"
    create_topic(broker.bootstrap, source, 2)
    create_topic(broker.bootstrap, sink, 2)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    send(plain, source, [f"order-{i}" for i in range(20)])

    a_assigned, b_assigned = [], []
    a, a_producer = transactional_instance(broker.bootstrap, group, "a")
    a.subscribe([source], on_assign=lambda _, parts: a_assigned.append(sorted(p.partition for p in parts)))
    read = []
    deadline = time.monotonic() + 60
    while len(read) < 20:
        assert time.monotonic() < deadline, f"A read {len(read)} of 20 records"
        m = a.poll(0.2)
        if m is not None and m.error() is None:
            read.append(m)
    assert a_assigned[-1] == [0, 1], "A alone holds both partitions"
    a_producer.begin_transaction()
    send(a_producer, sink, [f"zombie-{m.value().decode()}" for m in read])
    zombie_offsets = [TopicPartition(source, p, 10) for p in range(2)]
    zombie_metadata = a.consumer_group_metadata()

    # B joins: A keeps polling, so it takes part in the rebalance and is a member of the new
    # generation, with one partition. Its transaction still holds what it read before.
    b, b_producer = transactional_instance(broker.bootstrap, group, "b")
    b.subscribe([source], on_assign=lambda _, parts: b_assigned.append(sorted(p.partition for p in parts)))
    b_read = []
    deadline = time.monotonic() + 60
    while len(a_assigned) < 2 or not b_assigned or not b_assigned[-1]:
        assert time.monotonic() < deadline, f"no rebalance: A {a_assigned}, B {b_assigned}"
        a.poll(0.1)
        m = b.poll(0.1)
        if m is not None and m.error() is None:
            b_read.append(m)
    assert sorted(a_assigned[-1] + b_assigned[-1]) == [0, 1], (a_assigned, b_assigned)

    with pytest.raises(KafkaException) as raised:
        a_producer.send_offsets_to_transaction(zombie_offsets, zombie_metadata, 30)
    error = raised.value.args[0]
    assert error.code() == KafkaError.ILLEGAL_GENERATION, error
    assert error.txn_requires_abort(), error
    a_producer.abort_transaction(30)

    # B processes its partition from the start and commits, output and offsets together.
    mine = b_assigned[-1]
    deadline = time.monotonic() + 60
    while len(b_read) < 10 * len(mine):
        assert time.monotonic() < deadline, f"B read {len(b_read)} records"
        a.poll(0.1)
        m = b.poll(0.1)
        if m is not None and m.error() is None:
            b_read.append(m)
    b_producer.begin_transaction()
    send(b_producer, sink, [f"live-{m.value().decode()}" for m in b_read])
    b_producer.send_offsets_to_transaction([TopicPartition(source, p, 10) for p in mine],
                                           b.consumer_group_metadata(), 30)
    b_producer.commit_transaction(30)

    outputs = [v for _, v in read_all(broker.bootstrap, sink, 2, "read_committed")]
    assert not [v for v in outputs if v.startswith("zombie")], "a zombie's output was committed"
    assert sorted(outputs) == sorted(f"live-{m.value().decode()}" for m in b_read)
    committed = b.committed([TopicPartition(source, p) for p in range(2)], timeout=30)
    assert {tp.partition: tp.offset for tp in committed if tp.partition in mine} == {p: 10 for p in mine}
    for consumer in (a, b):
        consumer.close()
