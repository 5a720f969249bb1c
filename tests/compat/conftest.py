"""Fixtures of the compatibility suite: every test that takes `broker` runs once per broker
kind listed in COMPAT_BROKERS (default: eddy,kafka), against a real broker process."""

import itertools
import os
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import Broker

_names = itertools.count()


def broker_kinds() -> list[str]:
    return [k for k in os.environ.get("COMPAT_BROKERS", "eddy,kafka").split(",") if k]


def pytest_generate_tests(metafunc):
    if "broker_kind" in metafunc.fixturenames:
        metafunc.parametrize("broker_kind", broker_kinds(), scope="module")


@pytest.fixture(scope="module")
def broker(broker_kind):
    """A broker shared by the tests of one module; each test uses topics of its own."""
    b = Broker(broker_kind).start()
    yield b
    b.close()


@pytest.fixture
def fresh_broker(broker_kind):
    """A broker of this test's own, for tests that stop, kill or restart it."""
    b = Broker(broker_kind).start()
    yield b
    b.close()


@pytest.fixture
def topic_name(request):
    base = request.node.name.split("[")[0].replace("_", "-")
    return f"{base}-{next(_names)}"


def create_topic(bootstrap: str, name: str, partitions: int, config: dict | None = None) -> None:
    """Creates a topic and waits until the broker's metadata shows a leader for every
    partition: Kafka answers CreateTopics before its metadata cache has caught up, and a
    produce in between is retried, which reorders records of a non-idempotent producer."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=30)
    for f in futures.values():
        f.result(timeout=30)
    deadline = time.monotonic() + 30
    while True:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions \
                and all(p.leader >= 0 and p.error is None for p in topic.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {name} has no leader for every partition after 30s")
        time.sleep(0.05)
