"""Brokers as real processes: eddy's (`eddy broker`) and Apache Kafka's
(`tests/reference/kafka-broker`), started the same way so every scenario can run on both."""

import os
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KINDS = ("eddy", "kafka")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_versions_answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when the broker answers an ApiVersions v0 request with error code 0."""
    request = struct.pack(">hhih", 18, 0, 1, len("probe")) + b"probe"
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(request)) + request)
            head = _read_exactly(s, 4)
            (size,) = struct.unpack(">i", head)
            body = _read_exactly(s, size)
            correlation_id, error_code = struct.unpack(">ih", body[:6])
            return correlation_id == 1 and error_code == 0
    except OSError:
        return False


def _read_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise OSError("connection closed")
        data += chunk
    return data


class Broker:
    """One broker process on a loopback port with its own data directory, which survives
    stop/kill/start so restarts see the same data."""

    def __init__(self, kind: str, data_dir: str | None = None, port: int | None = None,
                 advertised_port: int | None = None):
        if kind not in KINDS:
            raise ValueError(f"unknown broker kind {kind!r}")
        self.kind = kind
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix=f"compat-{kind}-")
        self.port = port or free_port()
        # Clients are sent here by metadata (a proxy in front of the broker, say).
        self.advertised_port = advertised_port
        self.process: subprocess.Popen | None = None
        self.log_path = Path(self.data_dir).parent / f"{Path(self.data_dir).name}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        listen = ["--data-dir", self.data_dir, "--listen", self.bootstrap]
        if self.advertised_port is not None:
            listen += ["--advertised-port", str(self.advertised_port)]
        if self.kind == "eddy":
            binary = os.environ.get("EDDY_BIN", str(REPO / "target" / "release" / "eddy"))
            return [binary, "broker", *listen]
        return [str(REPO / "tests" / "reference" / "kafka-broker"), *listen]

    def start(self, timeout: float = 60.0) -> "Broker":
        log = open(self.log_path, "ab")
        # A session of its own, so that a kill reaches every process of the broker (the
        # reference broker is a script with a JVM under it).
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.kind} broker exited with {self.process.returncode}:\n{self.log_tail()}")
            if api_versions_answers("127.0.0.1", self.port):
                return self
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"{self.kind} broker not ready in {timeout}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait for a clean exit; returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"{self.kind} broker ignored SIGTERM for {timeout}s")

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to flush or close anything."""
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()

    def restart(self) -> "Broker":
        self.stop()
        return self.start()

    def server_log(self) -> Path:
        """The broker's own log: Kafka's server.log in its data directory, or what eddy's
        broker prints."""
        return Path(self.data_dir) / "server.log" if self.kind == "kafka" else self.log_path

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def close(self) -> None:
        self.kill()
        if self._own_dir:
            subprocess.run(["rm", "-rf", self.data_dir], check=False)
            self.log_path.unlink(missing_ok=True)
