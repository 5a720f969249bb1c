"""The state memory bound: eos-soak-app over 32 partitions (64 tasks, 128 stores) with
`statestore.memory.max.bytes` at 64 MiB is fed 200,000 keys, whose state held in memory
would take several times that, at as high a rate as the driver writes. The process's
resident memory, read from /proc through the run, must stay within the budget plus 64 MiB
(the clients' buffers, the threads, the code), and the outputs must be exactly right: under a
small budget the state goes to sled and is read back, and nothing may be lost on the way.

The process runs with glibc's malloc arenas at two (`MALLOC_ARENA_MAX=2`), as the book's
state chapter advises: otherwise glibc keeps freed memory in an arena per thread."""

import os
import subprocess
import time

from brokers import Broker
from soak import App, Driver, caught_up, create_soak_topics, soak_seed, verify

PARTITIONS = 32
RECORDS = 400_000
KEYS = 200_000
BUDGET = 64 << 20
ALLOWANCE = 64 << 20


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
