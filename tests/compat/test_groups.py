"""Consumer groups with real clients: members share a topic's partitions, committed offsets
let a group resume where it stopped, groups fan out, and committed offsets survive a broker
killed with SIGKILL. The same answers from eddy's broker as from Apache Kafka's."""

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer

from clients import create_topic


def consumer(broker, group, **config):
    return Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        **config,
    })


def poll_until(consumers, done, timeout=60):
    """Polls every consumer in turn until `done()` holds; returns the messages seen."""
    seen = []
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the group did not settle in time"
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                seen.append((c, m))
    return seen


def produce(broker, topic, count, partitions):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def test_members_share_the_partitions(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 6)
    group = f"share-{topic_name}"
    members = [consumer(broker, group) for _ in range(3)]
    try:
        for m in members:
            m.subscribe([topic_name])
        poll_until(members, lambda: sorted(len(m.assignment()) for m in members) == [2, 2, 2])
        owned = sorted(tp.partition for m in members for tp in m.assignment())
        assert owned == list(range(6)), "every partition has exactly one owner"

        # Four more: seven members for six partitions, so one holds nothing.
        extra = [consumer(broker, group) for _ in range(4)]
        members += extra
        for m in extra:
            m.subscribe([topic_name])
        poll_until(members, lambda: sorted(len(m.assignment()) for m in members) == [0, 1, 1, 1, 1, 1, 1])
    finally:
        for m in members:
            m.close()


def test_a_group_resumes_from_its_commits_and_groups_fan_out(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker, topic_name, 100, 2)
    first = consumer(broker, f"resume-{topic_name}")
    first.subscribe([topic_name])
    got = []
    try:
        while len(got) < 60:
            m = first.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
                first.commit(message=m, asynchronous=False)
    finally:
        first.close()
    second = consumer(broker, f"resume-{topic_name}")
    second.subscribe([topic_name])
    rest = []
    deadline = time.monotonic() + 60
    try:
        while len(got) + len(rest) < 100:
            assert time.monotonic() < deadline, f"resumed with {len(rest)} of 40 records"
            m = second.poll(0.5)
            if m is not None and m.error() is None:
                rest.append(m.value())
    finally:
        second.close()
    assert sorted(got + rest) == sorted(f"v{i}".encode() for i in range(100)), "nothing twice, nothing lost"

    other = consumer(broker, f"fan-out-{topic_name}")
    other.subscribe([topic_name])
    everything = []
    deadline = time.monotonic() + 60
    try:
        while len(everything) < 100:
            assert time.monotonic() < deadline
            m = other.poll(0.5)
            if m is not None and m.error() is None:
                everything.append(m.value())
    finally:
        other.close()
    assert len(everything) == 100, "another group reads every record too"


def test_kafka_python_joins_a_group_and_commits(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 3)
    produce(broker, topic_name, 30, 3)
    group = f"kp-{topic_name}"
    c = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=20_000, session_timeout_ms=6000, heartbeat_interval_ms=500)
    seen = []
    for m in c:
        seen.append(m)
        if len(seen) == 30:
            break
    c.commit()
    c.close()
    assert len(seen) == 30
    check = consumer(broker, group)
    try:
        committed = check.committed([TopicPartition(topic_name, p) for p in range(3)], timeout=30)
        assert sorted(tp.offset for tp in committed) == [10, 10, 10]
    finally:
        check.close()


def while_coordinator_loads(call, timeout=60):
    """Calls `call` again while the coordinator answers that it is not ready: Kafka creates
    and loads `__consumer_offsets` after start and answers NOT_COORDINATOR meanwhile (a
    retriable error in Kafka's protocol); eddy replays it before it listens."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except KafkaException as e:
            loading = e.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
            assert loading and time.monotonic() < deadline, e
            time.sleep(0.5)


def test_committed_offsets_survive_a_broker_sigkill(fresh_broker, topic_name):
    create_topic(fresh_broker.bootstrap, topic_name, 2)
    group = f"durable-{topic_name}"
    c = consumer(fresh_broker, group)
    offsets = [TopicPartition(topic_name, 0, 17), TopicPartition(topic_name, 1, 4)]
    while_coordinator_loads(lambda: c.commit(offsets=offsets, asynchronous=False))
    c.close()
    fresh_broker.kill()
    fresh_broker.start()
    check = consumer(fresh_broker, group)
    try:
        wanted = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
        committed = while_coordinator_loads(lambda: check.committed(wanted, timeout=30))
        assert [tp.offset for tp in committed] == [17, 4]
    finally:
        check.close()
