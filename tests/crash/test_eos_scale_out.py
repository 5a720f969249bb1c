"""Scale-out under exactly-once: eos-soak-app runs as one instance, then two, then three
(each a process with its own state directory) while a driver writes the input; every
instance that joins gets tasks while the others keep running; then one is killed with
SIGKILL and the two left take over its tasks, restoring their state from the changelogs.
Afterwards every output is recomputed from the input read with read_committed: nothing is
missing or repeated, whichever instance processed it."""

import time

import pytest

from brokers import Broker
from clients import group_members
from soak import App, Driver, caught_up, create_soak_topics, processed, soak_seed, verify

PARTITIONS = 6
RECORDS = 60_000
KEYS = 10_000
PACE = 2_000


def members_with_tasks(bootstrap: str) -> list[int]:
    """How many input partitions each member of the application's group holds."""
    try:
        return sorted(len(held) for held in group_members(bootstrap, "eos-soak"))
    except Exception:  # noqa: BLE001 - the group may be between generations
        return []


@pytest.mark.parametrize("kind", ["eddy", "kafka"])
def test_instances_join_and_die_and_the_totals_stay_exact(kind, tmp_path):
    seed = soak_seed()
    broker = Broker(kind).start()
    apps = [App(broker.bootstrap, tmp_path / f"state-{i}", tmp_path / f"app-{i}.log") for i in range(3)]

    def logs() -> str:
        return "\n".join(f"--- instance {i}:\n{a.tail(20)}" for i, a in enumerate(apps))

    try:
        create_soak_topics(broker.bootstrap, PARTITIONS)
        apps[0].start()
        driver = Driver(broker.bootstrap, seed, RECORDS, KEYS, PACE)
        driver.start()
        # A second instance at a fifth of the input, a third at two fifths, and the second
        # killed at three fifths.
        steps = [(RECORDS // 5, "join", 1), (2 * RECORDS // 5, "join", 2), (3 * RECORDS // 5, "kill", 1)]
        deadline = time.monotonic() + 420
        while True:
            assert driver.error is None, driver.error
            progress = processed(broker.bootstrap, PARTITIONS)
            assert time.monotonic() < deadline, f"stuck at {progress} (seed {seed})\n{logs()}"
            for i, app in enumerate(apps):
                assert app.process is None or app.running() or (i == 1 and not steps), \
                    f"instance {i} stopped (seed {seed})\n{logs()}"
            if steps and progress >= steps[0][0]:
                _, what, i = steps.pop(0)
                if what == "join":
                    apps[i].start()
                    # The newcomer gets its share while the instances before it go on:
                    # every member holds input partitions.
                    wait = time.monotonic() + 90
                    while members_with_tasks(broker.bootstrap)[:1] in ([], [0]) \
                            or len(members_with_tasks(broker.bootstrap)) != i + 1:
                        assert time.monotonic() < wait, \
                            f"instance {i} got no tasks: {members_with_tasks(broker.bootstrap)}\n{logs()}"
                        time.sleep(0.5)
                else:
                    apps[i].kill()
            if not steps and not driver.is_alive() and progress == RECORDS \
                    and caught_up(broker.bootstrap, PARTITIONS):
                break
            time.sleep(0.2)
        # The two left hold every partition between them.
        wait = time.monotonic() + 60
        while len(members_with_tasks(broker.bootstrap)) != 2:
            assert time.monotonic() < wait, f"{members_with_tasks(broker.bootstrap)}\n{logs()}"
            time.sleep(0.5)
        for i in (0, 2):
            assert apps[i].terminate() == 0, logs()
        verify(broker.bootstrap, PARTITIONS, RECORDS, seed)
    finally:
        for app in apps:
            app.close()
        broker.close()
