"""The broker's protective limits: each refuses with a clear error and the broker stays up.

One real broker process with small limits: request body size, message size,
messages per batch, fetch size and wait, concurrent long-poll waiters, in-flight
back-checks, header count and size. Every refusal must be the contract's error
shape with a fitting status and a message naming the limit, and the broker must
answer normally right after.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.callback_server import CallbackServer

pytestmark = pytest.mark.e2e

LIMITS: dict[str, object] = {
    "max_request_bytes": 20_000,
    "max_message_bytes": 5_000,
    "max_batch_messages": 5,
    "max_fetch_messages": 50,
    "max_fetch_wait_ms": 5_000,
    "max_long_poll_waiters": 2,
    "max_header_count": 3,
    "max_header_bytes": 200,
    "check_concurrency": 4,  # so at most 1 in flight per producer group (check_concurrency // 4)
    "check_interval_seconds": 0.2,
    "transaction_timeout_seconds": 0,
    "check_timeout_seconds": 5,
    "check_max": 1000,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    path = tmp_path_factory.mktemp("limits")
    process = BrokerProcess(f"sqlite:///{path}/broker.db", log_path=path / "broker.log", **LIMITS)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def http(broker: BrokerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=broker.url, timeout=20) as client:
        created = client.post("/v1/topics", json={"name": "limits", "partitions": 2})
        assert created.status_code == 201, created.text
        yield client


def refused(response: httpx.Response, status: int, code: str, *mentions: str) -> None:
    """The contract's error shape, this status and code, and a message naming the limit."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    for mention in mentions:
        assert mention in error["message"], error


def still_healthy(http: httpx.Client) -> None:
    assert http.get("/healthz").status_code == 200
    answer = http.post("/v1/topics/limits/messages", json={"messages": [{"value": "ok"}]})
    assert answer.status_code == 200, answer.text


def test_request_body_over_the_limit_is_413(http: httpx.Client) -> None:
    big = {"messages": [{"value": "x" * 4000} for _ in range(5)] + [{"value": "y" * 2000}]}
    body = json.dumps(big).encode()
    assert len(body) > 20_000
    too_large = http.post("/v1/topics/limits/messages", content=body, headers={"content-type": "application/json"})
    refused(too_large, 413, "MESSAGE_TOO_LARGE", "20000")
    still_healthy(http)


def test_chunked_request_body_over_the_limit_is_413(http: httpx.Client) -> None:
    """No Content-Length: the body is counted as it streams and cut off at the limit."""

    def chunks() -> Iterator[bytes]:
        yield b'{"messages": [{"value": "'
        for _ in range(30):
            yield b"z" * 1000
        yield b'"}]}'

    answer = http.post("/v1/topics/limits/messages", content=chunks(), headers={"content-type": "application/json"})
    refused(answer, 413, "MESSAGE_TOO_LARGE", "20000")
    still_healthy(http)


def test_message_over_the_limit_is_413(http: httpx.Client) -> None:
    answer = http.post("/v1/topics/limits/messages", json={"messages": [{"value": "m" * 6000}]})
    refused(answer, 413, "MESSAGE_TOO_LARGE", "5000")
    half = http.post("/v1/half-messages", json={"topic": "limits", "producer_group": "lg", "value": "m" * 6000})
    refused(half, 413, "MESSAGE_TOO_LARGE", "5000")
    still_healthy(http)


def test_limits_are_inclusive(http: httpx.Client) -> None:
    """A message of exactly max_message_bytes and a body of exactly max_request_bytes are accepted."""
    at_limit = http.post("/v1/topics/limits/messages", json={"messages": [{"value": "m" * 4998}]})  # 4998 + 2 quotes
    assert at_limit.status_code == 200, at_limit.text
    refused(http.post("/v1/topics/limits/messages", json={"messages": [{"value": "m" * 4999}]}), 413, "MESSAGE_TOO_LARGE")
    prefix, suffix = b'{"messages": [{"value": "', b'"}]}'
    filler = b"b" * 4000
    pad = 20_000 - len(prefix) - len(suffix) - 4 * (len(filler) + len(b'"}, {"value": "'))
    body = prefix + (filler + b'"}, {"value": "') * 4 + b" " * 0 + b"c" * pad + suffix
    assert len(body) == 20_000
    answer = http.post("/v1/topics/limits/messages", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 200, answer.text
    refused(
        http.post("/v1/topics/limits/messages", content=body + b" ", headers={"content-type": "application/json"}),
        413,
        "MESSAGE_TOO_LARGE",
    )


def test_too_many_messages_in_one_batch(http: httpx.Client) -> None:
    six = {"messages": [{"value": i} for i in range(6)]}
    refused(http.post("/v1/topics/limits/messages", json=six), 422, "VALIDATION_ERROR", "5")
    refused(http.post("/v1/topics/limits/partitions/0/messages", json=six), 422, "VALIDATION_ERROR", "5")
    five = {"messages": [{"value": i} for i in range(5)]}
    assert http.post("/v1/topics/limits/messages", json=five).status_code == 200
    still_healthy(http)


def test_fetch_size_and_wait_limits(http: httpx.Client) -> None:
    path = "/v1/topics/limits/partitions/0/messages"
    refused(http.get(path, params={"max_messages": 51}), 422, "VALIDATION_ERROR", "50")
    refused(http.get(path, params={"max_messages": 10, "max_wait_ms": 5001}), 422, "VALIDATION_ERROR", "5000")
    assert http.get(path, params={"max_messages": 50}).status_code == 200
    refused(http.get("/v1/producer-groups/lg/checks", params={"max_wait_ms": 5001}), 422, "VALIDATION_ERROR", "5000")
    still_healthy(http)


def test_header_count_and_size_limits(http: httpx.Client) -> None:
    four = {f"h{i}": "v" for i in range(4)}
    many = http.post("/v1/topics/limits/messages", json={"messages": [{"value": 1, "headers": four}]})
    refused(many, 422, "VALIDATION_ERROR", "3")
    large = {"h": "v" * 300}
    big = http.post("/v1/topics/limits/messages", json={"messages": [{"value": 1, "headers": large}]})
    refused(big, 422, "VALIDATION_ERROR", "200")
    half = {"topic": "limits", "producer_group": "lg", "value": 1, "headers": four}
    refused(http.post("/v1/half-messages", json=half), 422, "VALIDATION_ERROR", "3")
    three = {f"h{i}": "v" for i in range(3)}
    assert http.post("/v1/topics/limits/messages", json={"messages": [{"value": 1, "headers": three}]}).status_code == 200
    still_healthy(http)


def _long_poll(url: str, partition: int, wait_ms: int) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=30) as client:
        return client.get(
            f"/v1/topics/limits/partitions/{partition}/messages",
            params={"offset": _end(client, partition), "max_wait_ms": wait_ms, "max_messages": 10}
        )


def test_a_fetch_without_max_messages_works_when_the_fetch_limit_is_below_the_default(http: httpx.Client) -> None:
    """The default max_messages (500) must not be refused by a configured max_fetch_messages of 50."""
    answer = http.get("/v1/topics/limits/partitions/0/messages")
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["messages"]) <= 50


def _waiters(http: httpx.Client) -> int:
    found = re.search(r"^halfmq_long_poll_waiters (\S+)$", http.get("/metrics").text, re.MULTILINE)
    return int(float(found.group(1))) if found else 0


def _end(client: httpx.Client, partition: int) -> int:
    return int(client.get("/v1/topics/limits").json()["partitions"][partition]["high_watermark"])


def test_long_poll_waiters_over_the_limit_get_429_and_admitted_ones_finish(broker: BrokerProcess, http: httpx.Client) -> None:
    """Two waiters fit; newcomers are refused with 429 while they wait, never an admitted one midway.

    An admitted long poll re-reads the partition every 0.5 s between waits; newcomers
    arriving all the time must not take its slot in that moment.
    """
    stop = threading.Event()
    newcomer_statuses: list[int] = []

    def newcomers() -> None:
        with httpx.Client(base_url=broker.url, timeout=30) as client:
            while not stop.is_set():
                answer = client.get(
                    "/v1/topics/limits/partitions/1/messages",
                    params={"offset": _end(client, 1), "max_wait_ms": 20, "max_messages": 10},
                )
                newcomer_statuses.append(answer.status_code)
                if answer.status_code == 429:
                    refused(answer, 429, "TOO_MANY_REQUESTS", "2")

    with ThreadPoolExecutor(6) as pool:
        admitted = [pool.submit(_long_poll, broker.url, 1, 3000) for _ in range(2)]
        deadline = time.monotonic() + 5
        while _waiters(http) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        hammering = [pool.submit(newcomers) for _ in range(4)]
        admitted_answers = [f.result() for f in admitted]
        stop.set()
        for future in hammering:
            future.result()
    assert 429 in newcomer_statuses, newcomer_statuses[:50]
    assert [a.status_code for a in admitted_answers] == [200, 200], [a.text for a in admitted_answers]
    time.sleep(0.2)
    assert _long_poll(broker.url, 1, 100).status_code == 200  # room again once they are gone
    still_healthy(http)


class SlowListener:
    """A callback server that holds every back-check for a while and counts how many overlap."""

    def __init__(self, hold_seconds: float) -> None:
        self.hold_seconds = hold_seconds
        self.lock = threading.Lock()
        self.in_flight: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.total = 0
        self.total_peak = 0
        self.calls: list[str] = []
        self.server = CallbackServer(self._answer).start()

    def _answer(self, check: dict[str, Any]) -> str:
        group = check["producer_group"]
        with self.lock:
            self.calls.append(group)
            self.in_flight[group] = self.in_flight.get(group, 0) + 1
            self.peak[group] = max(self.peak.get(group, 0), self.in_flight[group])
            self.total += 1
            self.total_peak = max(self.total_peak, self.total)
        time.sleep(self.hold_seconds)
        with self.lock:
            self.in_flight[group] -= 1
            self.total -= 1
        return "COMMIT"

    @property
    def url(self) -> str:
        return self.server.url

    def close(self) -> None:
        self.server.close()


def test_back_checks_in_flight_are_bounded_per_group_and_overall(http: httpx.Client) -> None:
    """check_concurrency 4: at most 4 calls in flight, at most 4 // 4 = 1 per producer group, every group served."""
    listener = SlowListener(hold_seconds=0.6)
    groups = [f"slow-{n}" for n in range(6)]
    try:
        for group in groups:
            body = {"callback_url": listener.url, "ttl_seconds": 60}
            answer = http.put(f"/v1/producer-groups/{group}/listeners/one", json=body)
            assert answer.status_code == 200, answer.text
        ids = [
            http.post("/v1/half-messages", json={"topic": "limits", "producer_group": group, "value": i}).json()["message_id"]
            for group in groups
            for i in range(3)
        ]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            states = [http.get(f"/v1/half-messages/{m}").json()["state"] for m in ids]
            if all(s == "COMMITTED" for s in states):
                break
            time.sleep(0.2)
        assert all(s == "COMMITTED" for s in states), states
        assert listener.peak == {group: 1 for group in groups}, listener.peak
        assert 1 < listener.total_peak <= 4, listener.total_peak
    finally:
        listener.close()
    still_healthy(http)


def test_check_polling_waiters_count_towards_the_long_poll_limit(broker: BrokerProcess, http: httpx.Client) -> None:
    """GET /producer-groups/{g}/checks?max_wait_ms= is a long poll too: it must be bounded like fetches."""

    def poll(instance: str) -> httpx.Response:
        with httpx.Client(base_url=broker.url, timeout=30) as client:
            return client.get("/v1/producer-groups/idle-group/checks", params={"max_wait_ms": 2000, "instance_id": instance})

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(poll, [f"i{n}" for n in range(6)]))
    statuses = [a.status_code for a in answers]
    assert 429 in statuses, f"6 concurrent check polls with max_long_poll_waiters=2 all admitted: {statuses}"
    still_healthy(http)
