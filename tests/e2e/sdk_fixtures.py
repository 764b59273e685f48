"""Fixtures and helpers for the SDK's end-to-end tests (imported by ``test_sdk_*.py``).

Each test module gets one real broker process (``python -m app``) on a temporary
SQLite database, with a fast checker so back-check tests take seconds. Nothing is
mocked; :class:`FaultyProxy` sits between the SDK and a real broker to lose
answers the broker did send, which is how a retry is proven not to duplicate.
"""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # plain `pytest` does not put the repo root on sys.path
    sys.path.insert(0, str(REPO_ROOT))

from sdk import Client  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402

FAST_CHECKER = {
    "check_interval_seconds": 0.3,
    "transaction_timeout_seconds": 1,
    "check_max": 30,
    "check_timeout_seconds": 2,
    "poll_check_lease_seconds": 2,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker per test module, with a checker that runs every 0.3 s."""
    path = tmp_path_factory.mktemp("sdk-broker")
    process = BrokerProcess(f"sqlite:///{path}/broker.db", log_path=path / "broker.log", **FAST_CHECKER)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[Client]:
    """A blocking :class:`sdk.Client` on the module's broker."""
    with Client(broker.url) as client:
        yield client


@pytest.fixture()
def new_topic(admin: Client) -> Callable[..., str]:
    """Create a topic with a unique name: ``new_topic(partitions=1)``."""

    def create(partitions: int = 1, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        admin.create_topic(name, partitions)
        return name

    return create


def unique(prefix: str) -> str:
    """A unique name for groups, transactional ids and producer groups."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def read_all(client: Client, topic: str, *, isolation: str = "read_committed") -> list[Any]:
    """Every readable message of ``topic``, all partitions, in partition/offset order."""
    messages = []
    for partition in client.get_topic(topic).partitions:
        offset = partition.log_start_offset
        while True:
            result = client.fetch(topic, partition.partition, offset, isolation=isolation)
            messages += result.messages
            if result.next_offset == offset or not result.messages:
                break
            offset = result.next_offset
    return messages


class FaultyProxy:
    """An HTTP proxy in front of a real broker that can lose or refuse chosen requests.

    ``fail(path_part, mode, times)``: the next ``times`` requests whose path contains
    ``path_part`` are either forwarded and their answer thrown away (``"lose_answer"``:
    the broker did the work, the client sees a dropped connection) or answered 503
    without forwarding (``"unavailable"``). ``seen`` records ``(method, path, body)``.
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self.seen: list[tuple[str, str, bytes]] = []
        self._faults: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(base_url=target, timeout=30)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.seen.append((self.command, self.path, body))
                fault = proxy._take_fault(self.path)
                if fault == "unavailable":
                    self._send(503, b'{"error":{"code":"STORAGE_UNAVAILABLE","message":"injected"}}')
                    return
                headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
                answer = proxy._client.request(self.command, self.path, content=body, headers=headers)
                if fault == "lose_answer":
                    self.close_connection = True  # the broker answered; the client never hears it
                    return
                self._send(answer.status_code, answer.content)

            def _send(self, status: int, content: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_PUT = do_DELETE = _forward  # http.server's naming

            def log_message(self, format: str, *args: Any) -> None:  # http.server's signature
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """Where to point the SDK."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def fail(self, path_part: str, mode: str, times: int = 1) -> None:
        """Arm ``times`` faults of ``mode`` for requests whose path contains ``path_part``."""
        with self._lock:
            self._faults += [(path_part, mode)] * times

    def _take_fault(self, path: str) -> str | None:
        with self._lock:
            for index, (part, mode) in enumerate(self._faults):
                if part in path:
                    del self._faults[index]
                    return mode
        return None

    def close(self) -> None:
        """Stop the proxy and close its connections."""
        self._server.shutdown()
        self._thread.join()
        self._server.server_close()
        self._client.close()


@pytest.fixture()
def faulty_proxy(broker: BrokerProcess) -> Iterator[FaultyProxy]:
    """A :class:`FaultyProxy` in front of the module's broker."""
    proxy = FaultyProxy(broker.url)
    try:
        yield proxy
    finally:
        proxy.close()
