"""What an outside probe got through (issue #38), replayed against a real token-auth broker, on both databases.

Each test is one finding: it failed before its fix. The route-rights test
(tests/integration/test_route_rights.py) covers every route with wrong JSON types too.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.e2e

ADMIN = "probe-admin-token"
BODY_TIMEOUT_SECONDS = 1


@pytest.fixture(scope="module")
def broker(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("probe")
    process = BrokerProcess(
        module_database_url,
        log_path=directory / "broker.log",
        auth="token",
        admin_token=ADMIN,
        access_log="true",
        body_timeout_seconds=BODY_TIMEOUT_SECONDS,
        max_long_poll_waiters_per_principal=2,
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


OPEN_CLIENTS: list[httpx.Client] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while OPEN_CLIENTS:
        OPEN_CLIENTS.pop().close()


class Caller:
    def __init__(self, broker: BrokerProcess, token: str) -> None:
        self.http = httpx.Client(base_url=broker.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        OPEN_CLIENTS.append(self.http)

    def __getattr__(self, method: str) -> Any:
        return getattr(self.http, method)


def principal(broker: BrokerProcess, grants: list[tuple[str, str, str, str]]) -> Caller:
    """A new principal with ``(resource_type, pattern, pattern_type, operation)`` grants, and its token."""
    admin = Caller(broker, ADMIN)
    name = f"p-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/principals", json={"name": name}).status_code == 201
    for resource_type, pattern, pattern_type, operation in grants:
        acl = {
            "principal": name,
            "resource_type": resource_type,
            "pattern": pattern,
            "pattern_type": pattern_type,
            "operations": [operation],
        }
        assert admin.post("/v1/acls", json=acl).status_code == 201
    return Caller(broker, admin.post(f"/v1/principals/{name}/tokens").json()["token"])


def topic(broker: BrokerProcess, partitions: int = 2) -> str:
    name = f"orders.{uuid.uuid4().hex[:8]}"
    assert Caller(broker, ADMIN).post("/v1/topics", json={"name": name, "partitions": partitions}).status_code == 201
    return name


def code(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def test_a_non_boolean_transactional_flag_is_refused_never_coerced(broker: BrokerProcess) -> None:
    orders = topic(broker)
    tid = f"victim-{uuid.uuid4().hex[:6]}"
    victim = principal(broker, [("topic", "orders.", "prefixed", "write"), ("transactional_id", tid, "literal", "write")])
    attacker = principal(broker, [("topic", "orders.", "prefixed", "write")])
    stamp = victim.post("/v1/producers", json={"transactional_id": tid}).json()
    own = {"messages": [{"value": "mine"}], "transactional": True, **stamp}
    txn_id = victim.post(f"/v1/topics/{orders}/partitions/0/messages", json=own).json()["txn_id"]

    for flag in ("true", 1, "yes", "on", 1.0):
        body = {"messages": [{"value": "theirs"}], "transactional": flag, **stamp}
        assert code(attacker.post(f"/v1/topics/{orders}/partitions/1/messages", json=body)) == (422, "VALIDATION_ERROR")
    body = {"messages": [{"value": "theirs"}], "transactional": True, **stamp}
    assert code(attacker.post(f"/v1/topics/{orders}/partitions/1/messages", json=body)) == (403, "FORBIDDEN")

    admin = Caller(broker, ADMIN)
    assert [p["partition"] for p in admin.get(f"/v1/transactions/{txn_id}").json()["partitions"]] == [0]
    assert admin.get(f"/v1/topics/{orders}").json()["partitions"][1]["high_watermark"] == 0


def test_a_producer_id_is_usable_only_by_the_principal_that_obtained_it(broker: BrokerProcess) -> None:
    orders = topic(broker)
    alice = principal(broker, [("topic", orders, "literal", "write")])
    bob = principal(broker, [("topic", orders, "literal", "write"), ("cluster", "cluster", "literal", "write")])
    stamp = alice.post("/v1/producers", json={}).json()
    batch = {"messages": [{"value": 1}], "base_sequence": 0, **stamp}
    stolen = bob.post(f"/v1/topics/{orders}/partitions/0/messages", json=batch)
    unknown = bob.post(
        f"/v1/topics/{orders}/partitions/0/messages", json={**batch, "producer_id": stamp["producer_id"] + 10_000}
    )
    assert code(stolen) == code(unknown) == (403, "FORBIDDEN")  # someone else's id answers as an unknown one
    opened = bob.post(f"/v1/topics/{orders}/partitions/0/messages", json={**batch, "transactional": True})
    assert code(opened) == (403, "FORBIDDEN")  # no transactions on another principal's idempotent producer
    mine = alice.post(f"/v1/topics/{orders}/partitions/0/messages", json=batch).json()
    assert mine["duplicate"] is False and mine["offsets"] == [{"partition": 0, "offset": 0}]


def front_rss_kib(broker: BrokerProcess) -> int:
    status = Path(f"/proc/{broker.pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


def raw_request(broker: BrokerProcess, head: str, body: bytes) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", broker.port), timeout=15)
    connection.sendall(head.encode() + b"\r\n" + body)
    return connection


def status_of(connection: socket.socket) -> int:
    answer = connection.recv(4096)
    return int(answer.split(b" ", 2)[1])


def whole_answer(connection: socket.socket) -> bytes:
    """Everything the broker sends until it closes the connection (a socket timeout if it never does)."""
    chunks = []
    while chunk := connection.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_tokenless_body_is_refused_on_its_headers_before_it_is_read(broker: BrokerProcess) -> None:
    declared = 60 * 1024 * 1024
    before = front_rss_kib(broker)
    connections = [
        raw_request(
            broker,
            f"POST /v1/topics/t/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {declared}\r\n",
            b'{"messages": [' + b" " * (1024 * 1024),
        )
        for _ in range(20)
    ]
    try:
        assert [status_of(c) for c in connections] == [401] * 20  # answered with 59 MiB of each still unsent
    finally:
        for connection in connections:
            connection.close()
    assert front_rss_kib(broker) - before < 64 * 1024  # the bodies were never buffered (1.2 GB before the fix)


def test_a_body_that_does_not_arrive_in_time_is_refused_and_its_connection_freed(broker: BrokerProcess) -> None:
    connection = raw_request(
        broker,
        f"POST /v1/topics/t/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n",
        b'{"messages": [',  # and never the rest
    )
    try:
        answer = whole_answer(connection)  # returns once the broker closed it: a slow client holds nothing
    finally:
        connection.close()
    assert answer.startswith(b"HTTP/1.1 408 ") and b"REQUEST_TIMEOUT" in answer


def test_huge_names_are_refused_before_any_right_is_decided_and_never_echoed(broker: BrokerProcess) -> None:
    nobody = principal(broker, [])
    token = nobody.http.headers["Authorization"]
    huge = "x" * 60_000  # under what the HTTP parser itself refuses (400), far over any valid path
    head = f"GET /v1/topics/{huge} HTTP/1.1\r\nHost: x\r\nAuthorization: {token}\r\nConnection: close\r\n"
    connection = raw_request(broker, head, b"")
    try:
        answer = whole_answer(connection)
    finally:
        connection.close()
    assert answer.startswith(b"HTTP/1.1 414 ") and b"URI_TOO_LONG" in answer and len(answer) < 400
    long_group = "g" * 3000  # under the path limit, over any name's: refused, and not echoed whole
    refused = nobody.get(f"/v1/groups/{long_group}")
    assert refused.status_code in (403, 422) and len(refused.content) < 600
    assert long_group not in broker.log_tail(200_000)


def test_principal_token_and_acl_changes_are_audited_in_the_brokers_output(broker: BrokerProcess) -> None:
    admin = Caller(broker, ADMIN)
    name = f"audited-{uuid.uuid4().hex[:6]}"
    assert admin.post("/v1/principals", json={"name": name}).status_code == 201
    token_id = admin.post(f"/v1/principals/{name}/tokens").json()["token_id"]
    acl = {"principal": name, "resource_type": "topic", "pattern": "audited", "operations": ["read"]}
    acl_id = admin.post("/v1/acls", json=acl).json()["acl_id"]
    assert admin.delete(f"/v1/acls/{acl_id}").status_code == 204
    assert admin.delete(f"/v1/tokens/{token_id}").status_code == 204
    deadline = time.monotonic() + 10
    wanted = [
        f'"event":"principal_created","by":"(admin token)","principal":"{name}"',
        f'"event":"token_created","by":"(admin token)","principal":"{name}","token_id":"{token_id}"',
        f'"event":"acl_created","by":"(admin token)","acl_id":"{acl_id}"',
        f'"event":"acl_deleted","by":"(admin token)","acl_id":"{acl_id}"',
        f'"event":"token_revoked","by":"(admin token)","principal":"{name}","token_id":"{token_id}"',
    ]
    while time.monotonic() < deadline and not all(w in broker.log_tail(200_000) for w in wanted):
        time.sleep(0.1)
    lines = [line for line in broker.log_tail(200_000).splitlines() if name in line or token_id in line]
    assert all(any(w in line and " AUDIT " in line for line in lines) for w in wanted), lines


def test_one_principal_cannot_take_every_long_poll_slot(broker: BrokerProcess) -> None:
    orders = topic(broker, partitions=1)
    hog = principal(broker, [("topic", orders, "literal", "read")])
    other = principal(broker, [("topic", orders, "literal", "read")])
    url = f"/v1/topics/{orders}/partitions/0/messages"
    waiting = [threading.Thread(target=hog.get, args=(url,), kwargs={"params": {"max_wait_ms": 3000}}) for _ in range(2)]
    for thread in waiting:
        thread.start()
    time.sleep(0.5)  # both are parked in the broker
    try:
        assert code(hog.get(url, params={"max_wait_ms": 3000})) == (429, "TOO_MANY_REQUESTS")
        assert other.get(url, params={"max_wait_ms": 100}).status_code == 200
    finally:
        for thread in waiting:
            thread.join()


def test_someone_elses_id_and_an_unknown_id_answer_alike(broker: BrokerProcess) -> None:
    orders = topic(broker)
    tid = f"owner-{uuid.uuid4().hex[:6]}"
    admin = Caller(broker, ADMIN)
    stamp = admin.post("/v1/producers", json={"transactional_id": tid}).json()
    txn_id = admin.post("/v1/transactions", json=stamp).json()["txn_id"]
    message_id = admin.post("/v1/half-messages", json={"topic": orders, "producer_group": "secret-pg", "value": 1}).json()[
        "message_id"
    ]
    nosy = principal(broker, [("topic", orders, "literal", "describe")])
    for known, unknown in (
        (f"/v1/transactions/{txn_id}", "/v1/transactions/txn-000000000000000000000000"),
        (f"/v1/half-messages/{message_id}", "/v1/half-messages/0000000000000000"),
    ):
        answers = [nosy.get(known), nosy.get(unknown)]
        assert [code(a) for a in answers] == [(403, "FORBIDDEN")] * 2
        messages = [a.json()["error"]["message"] for a in answers]
        assert messages[0] == messages[1]  # nothing tells them apart ...
        assert tid not in messages[0] and "secret-pg" not in messages[0]  # ... nor names the owner


def test_a_forwarded_for_header_from_a_local_peer_is_not_believed(broker: BrokerProcess) -> None:
    marker = f"/v1/topics/forwarded-{uuid.uuid4().hex[:6]}"
    Caller(broker, ADMIN).get(marker, headers={"X-Forwarded-For": "203.0.113.9"})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and marker not in broker.log_tail(200_000):
        time.sleep(0.1)
    (line,) = [line for line in broker.log_tail(200_000).splitlines() if marker in line and '"client"' in line]
    assert '"client":"127.0.0.1:' in line and "203.0.113.9" not in line


def test_a_new_sqlite_database_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    with BrokerProcess(f"sqlite:///{path}", log_path=tmp_path / "b.log"):
        modes = {p.name: oct(os.stat(p).st_mode & 0o777) for p in tmp_path.glob("fresh.db*")}
    assert modes and set(modes.values()) == {"0o600"}, modes
