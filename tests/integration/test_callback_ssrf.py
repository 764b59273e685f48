"""Callbacks cannot be turned against the broker's network (SSRF): checked at registration and at call time."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.broker import Broker
from app.main import create_app
from checker.back_check import BackChecker, RoundReport
from checker.guarded_http import guarded_client
from tests.integration.conftest import create_topic, error_code, make_settings
from tests.support.callback_server import CallbackServer


class RawServer:
    """Answers every POST with a fixed status, headers and body; counts the requests it got."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.hits = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                server.hits += 1
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/check"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def check_round(client: TestClient) -> RoundReport:
    """One checker round with the checker's own (guarded) HTTP client."""
    broker: Broker = client.app.state.broker  # type: ignore[attr-defined]
    assert broker.halves.callback_guard is not None

    async def run() -> RoundReport:
        async with guarded_client(broker.halves.callback_guard, 4) as http:  # type: ignore[arg-type]
            checker = BackChecker(broker.halves, broker.settings, http)
            report = await checker.run_once()
            await checker.drain()
            return report

    return client.portal.call(run)  # type: ignore[union-attr]


def register(client: TestClient, url: str) -> Any:
    return client.put("/v1/producer-groups/pg/listeners/i1", json={"callback_url": url, "ttl_seconds": 60})


def prepare(client: TestClient) -> str:
    answer = client.post("/v1/half-messages", json={"topic": "orders", "producer_group": "pg", "value": 1})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["message_id"])


def described(client: TestClient, message_id: str) -> tuple[str, int]:
    body = client.get(f"/v1/half-messages/{message_id}").json()
    return body["state"], body["check_times"]


@pytest.fixture
def orders(client: TestClient) -> TestClient:
    create_topic(client, "orders")
    return client


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://0.0.0.0:8080/check",
        "http://[fe80::1]:8080/check",
        "http://[::ffff:169.254.169.254]/check",
    ],
)
def test_registration_refuses_link_local_and_unspecified_addresses(orders: TestClient, url: str) -> None:
    refused = register(orders, url)
    assert (refused.status_code, error_code(refused)) == (422, "CALLBACK_NOT_ALLOWED")
    assert orders.delete("/v1/producer-groups/pg/listeners/i1").status_code == 404  # nothing was stored


def test_a_name_that_resolves_outside_the_allowed_networks_is_refused(database_url: str) -> None:
    settings = make_settings(database_url, callback_allowed_networks="10.0.0.0/8")
    with TestClient(create_app(settings)) as client:
        refused = register(client, "http://localhost:8080/check")
        assert (refused.status_code, error_code(refused)) == (422, "CALLBACK_NOT_ALLOWED")
        assert register(client, "http://10.0.0.7:8080/check").status_code == 200


@pytest.fixture
def rebinding_dns(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """``rebind.test`` resolves to whatever the test puts in the returned map (a DNS-rebinding name)."""
    answers = {"rebind.test": "127.0.0.1"}
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in answers:
            return real(answers[host], port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield answers


def test_a_name_that_resolves_elsewhere_at_call_time_is_not_called(
    orders: TestClient, rebinding_dns: dict[str, str]
) -> None:
    with CallbackServer(lambda _check: "COMMIT") as listener:
        port = listener.url.split(":")[2].split("/")[0]
        assert register(orders, f"http://rebind.test:{port}/check").status_code == 200  # 127.0.0.1 now
        message_id = prepare(orders)
        rebinding_dns["rebind.test"] = "169.254.169.254"  # ... and the metadata service later
        check_round(orders)
        assert listener.received == []
        assert described(orders, message_id) == ("PREPARED", 1)  # the refused call counted as a failed check
        rebinding_dns["rebind.test"] = "127.0.0.1"
        time.sleep(0.25)  # the next check is one check interval (0.2 s here) later
        check_round(orders)
    assert len(listener.received) == 1
    assert described(orders, message_id)[0] == "COMMITTED"


@pytest.mark.parametrize("target", ["http://169.254.169.254/latest/meta-data/", "local"])
def test_redirects_are_never_followed(orders: TestClient, target: str) -> None:
    elsewhere = RawServer(200, {"content-type": "application/json"}, b'{"state": "COMMIT"}')
    redirecting = RawServer(302, {"location": elsewhere.url if target == "local" else target})
    try:
        assert register(orders, redirecting.url).status_code == 200
        message_id = prepare(orders)
        check_round(orders)
        assert redirecting.hits == 1
        assert elsewhere.hits == 0
        assert described(orders, message_id) == ("PREPARED", 1)
    finally:
        redirecting.close()
        elsewhere.close()


def test_an_oversized_answer_is_not_read_whole(orders: TestClient) -> None:
    flood = RawServer(
        200, {"content-type": "application/json"}, b'{"state": "COMMIT", "pad": "' + b"x" * 200_000 + b'"}'
    )
    try:
        assert register(orders, flood.url).status_code == 200
        message_id = prepare(orders)
        check_round(orders)
        assert flood.hits == 1
        assert described(orders, message_id) == ("PREPARED", 1)
    finally:
        flood.close()
