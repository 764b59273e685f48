"""A real broker process for end-to-end tests: ``python -m app`` on a free port.

Tests start it, talk HTTP to it, SIGKILL it, and restart it on the same database.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 30.0, every: float = 0.05) -> Any:
    """Poll ``condition`` (another process's doing: nothing to await) until it is truthy; its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def _new_log_file() -> Path:
    descriptor, path = tempfile.mkstemp(prefix="halfmq-broker-", suffix=".log")
    os.close(descriptor)
    return Path(path)


class BrokerProcess:
    """One broker process; ``start()`` waits until ``/readyz`` answers 200."""

    def __init__(
        self,
        database_url: str,
        *,
        port: int | None = None,
        log_path: Path | None = None,
        **settings: object,
    ) -> None:
        self.database_url = database_url
        self.port = port or free_port()
        # No Kafka listener unless a test asks for one (kafka_port=free_port()): never the default
        # 9092, since tests run side by side, and no second free port that another broker could take.
        settings.setdefault("kafka_port", 0)
        self.settings = settings
        self.log_path = log_path or _new_log_file()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def tls_ca(self) -> str | None:
        """The certificate to trust when the broker serves TLS (tests use self-signed ones)."""
        found = self.settings.get("ssl_certfile")
        return None if found is None else str(found)

    @property
    def verify(self) -> bool | ssl.SSLContext:
        return True if self.tls_ca is None else ssl.create_default_context(cafile=self.tls_ca)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls_ca else 'http'}://127.0.0.1:{self.port}"

    @property
    def kafka_bootstrap(self) -> str:
        return f"127.0.0.1:{self.settings['kafka_port']}"

    @property
    def pid(self) -> int:
        assert self._process is not None, "broker not started"
        return self._process.pid

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HALFMQ_")}
        env["HALFMQ_DATABASE_URL"] = self.database_url
        env["HALFMQ_HOST"] = "127.0.0.1"
        env["HALFMQ_PORT"] = str(self.port)
        env["HALFMQ_LOG_LEVEL"] = "warning"
        env["HALFMQ_GRPC_PORT"] = "0"  # the RocketMQ listener only where a test asks for it (grpc_port=...)
        for name, value in self.settings.items():
            env[f"HALFMQ_{name.upper()}"] = str(value)
        env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def start(self, timeout: float = 60.0) -> BrokerProcess:
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "app"],
                cwd=REPO_ROOT,
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.wait_ready(timeout)
        return self

    @property
    def returncode(self) -> int | None:
        assert self._process is not None, "broker not started"
        return self._process.poll()

    def children(self) -> list[int]:
        """The broker's child processes (its core process, unless ``core_process=false``)."""
        found = []
        for entry in Path("/proc").iterdir():
            try:
                stat = (entry / "stat").read_text()
            except (OSError, ValueError):
                continue
            if entry.name.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == self.pid:
                found.append(int(entry.name))
        return found

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"broker exited with {self._process.returncode}: {self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1.0, verify=self.verify).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"broker on port {self.port} not ready after {timeout}s")

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, no flushing; what a crash looks like."""
        if self._process and self._process.poll() is None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(10)

    def stop(self) -> None:
        """SIGTERM and wait: a graceful shutdown."""
        if self._process and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)

    def restart(self, timeout: float = 60.0) -> BrokerProcess:
        self.kill()
        return self.start(timeout)

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextmanager
def brokers_on(
    database_url: str, directory: Path, count: int, listeners: tuple[str, ...] = ("kafka_port",), **settings: Any
) -> Iterator[list[BrokerProcess]]:
    """``count`` broker processes on one database, each ``listeners`` port a free one of its own; stopped after."""
    started = []
    for n in range(count):
        ports = {name: free_port() for name in listeners}
        started.append(BrokerProcess(database_url, log_path=directory / f"broker-{n}.log", **ports, **settings))
    try:
        for broker in started:
            broker.start()
        yield started
    finally:
        for broker in started:
            broker.stop()
