"""Fixtures of the compatibility suite: every test that takes `broker` runs once per broker
kind listed in COMPAT_BROKERS (default: eddy,kafka), against a real broker process."""

import itertools
import os

import pytest

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
