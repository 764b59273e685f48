"""The direct path (app/api/direct_routes.py) answers exactly as FastAPI would.

The same requests, well formed and not, go to a broker that serves plain routes
directly and to one that leaves every request to FastAPI, each on a fresh database
of the same kind: both must give the same answers. The well-formed ones must really
have taken the direct path, and the ones it is unsure of must not have.
"""

from __future__ import annotations

import contextlib
import gzip
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.conftest import DATABASES, fresh_database
from tests.integration.conftest import make_settings

ADMIN = "admin-secret-for-direct-routes"
JSON = {"content-type": "application/json"}
TEXT = {"content-type": "text/plain"}
# Answers carry fields that differ from run to run; their presence still counts.
VOLATILE = {"timestamp", "message_id", "transaction_id", "txn_id", "created_at", "updated_at", "prepared_at", "token"}

# (method, url, request arguments, whether the direct path serves it)
Case = tuple[str, str, dict[str, Any], bool]
CASES: list[Case] = [
    ("POST", "/v1/topics", {"json": {"name": "other", "partitions": 2}}, True),
    ("POST", "/v1/topics", {"json": {"name": "bad name", "partitions": 2}}, False),
    ("POST", "/v1/topics/t/messages", {"json": {"messages": [{"value": {"a": [1, 2.5, None]}, "key": "k"}]}}, True),
    ("POST", "/v1/topics/t/messages", {"json": {"messages": [{"value_base64": "aGk=", "headers": {"h": "v"}}]}}, True),
    ("POST", "/v1/topics/t/messages", {"json": {"messages": [{"value": 1, "partition": 1, "timestamp": 5}]}}, True),
    ("POST", "/v1/topics/t/messages", {"json": {"messages": [{"value_base64": "not base64!"}]}}, True),
    ("POST", "/v1/topics/t/messages", {"json": {"messages": [{"value": 1, "partition": 7}]}}, True),
    ("POST", "/v1/topics/t/messages", {"json": {"messages": []}}, False),
    ("POST", "/v1/topics/t/messages", {"json": {"messages": [{"value": 1, "extra": 2}]}}, False),
    ("POST", "/v1/topics/t/messages", {"json": {"messages": [{"value": 1, "value_base64": "aGk="}]}}, False),
    ("POST", "/v1/topics/t/messages", {"json": {"messages": [{"key": "k"}]}}, False),
    ("POST", "/v1/topics/t/messages", {"json": {"messages": [{"value": 1, "key": "a\x00b"}]}}, False),
    ("POST", "/v1/topics/t/messages", {"json": [1, 2]}, False),
    ("POST", "/v1/topics/t/messages", {"content": b'{"messages": [{"value": NaN}]}', "headers": JSON}, True),
    ("POST", "/v1/topics/t/messages", {"content": b'{"messages": [{"value": "\\ud800"}]}', "headers": JSON}, False),
    ("POST", "/v1/topics/t/messages", {"content": b'{"messages": [{"value": 1' + b"0" * 30 + b"}]}", "headers": JSON}, True),
    ("POST", "/v1/topics/t/messages", {"content": b'{"messages": [{"value": 1}]', "headers": JSON}, False),
    ("POST", "/v1/topics/t/messages", {"content": b"", "headers": JSON}, False),
    ("POST", "/v1/topics/t/messages", {"content": b'{"messages": [{"value": 1}]}', "headers": TEXT}, False),
    ("POST", "/v1/topics/t/messages", {"content": b'{"messages": [{"value": 1}]}'}, False),
    (
        "POST",
        "/v1/topics/t/messages",
        {"content": b'{"messages": [{"value": 1}]}', "headers": {"content-type": "Application/JSON; charset=utf-8"}},
        True,
    ),
    ("POST", "/v1/topics/bad%20name/messages", {"json": {"messages": [{"value": 1}]}}, False),
    ("POST", "/v1/topics/missing/messages", {"json": {"messages": [{"value": 1}]}}, True),
    ("PUT", "/v1/topics/t/messages", {"json": {"messages": [{"value": 1}]}}, False),
    ("GET", "/v1/topics/t/partitions/0/messages", {"params": {"offset": 0, "max_messages": 10}}, True),
    ("GET", "/v1/topics/t/partitions/1/messages", {"params": {"isolation": "read_uncommitted"}}, True),
    ("GET", "/v1/topics/t/partitions/0/messages", {"params": [("offset", "5"), ("offset", "0")]}, True),
    ("GET", "/v1/topics/t/partitions/0/messages", {"params": {"max_messages": 100_000}}, True),
    ("GET", "/v1/topics/t/partitions/0/messages", {"params": {"offset": -1}}, False),
    ("GET", "/v1/topics/t/partitions/0/messages", {"params": {"offset": ""}}, False),
    ("GET", "/v1/topics/t/partitions/0/messages", {"params": {"max_messages": 0}}, False),
    ("GET", "/v1/topics/t/partitions/0/messages", {"params": {"isolation": "dirty"}}, False),
    ("GET", "/v1/topics/t/partitions/x/messages", {}, False),
    ("GET", "/v1/topics/t/partitions/9/messages", {}, True),
    ("POST", "/v1/topics/t/partitions/0/messages", {"json": {"messages": [{"value": 2}]}}, True),
    ("POST", "/v1/topics/t/partitions/0/messages", {"json": {"messages": [{"value": 2, "partition": 1}]}}, True),
    ("POST", "/v1/topics/t/partitions/0/messages", {"json": {"messages": [{"value": 2}], "base_sequence": 0}}, True),
    ("POST", "/v1/half-messages", {"json": {"topic": "t", "producer_group": "g", "value": "v"}}, True),
    ("POST", "/v1/half-messages", {"json": {"topic": "t", "producer_group": "", "value": "v"}}, False),
    ("POST", "/v1/half-messages/no-such-message/commit", {}, True),
    ("GET", "/v1/half-messages/" + "x" * 65, {}, False),
    ("GET", "/v1/half-messages/" + "x" * 64, {}, True),
    ("POST", "/v1/transactions", {}, True),
    ("POST", "/v1/transactions", {"json": {}}, True),
    ("POST", "/v1/transactions", {"json": {"timeout_ms": 5000}}, True),
    ("POST", "/v1/transactions", {"json": {"timeout_ms": 0}}, False),
    ("POST", "/v1/transactions", {"content": b"{}", "headers": TEXT}, False),
    ("POST", "/v1/transactions", {"content": b"", "headers": TEXT}, True),
    ("POST", "/v1/producers", {"json": {"transactional_id": "tx-1"}}, True),
    ("POST", "/v1/producers", {"content": b"null", "headers": JSON}, False),
    ("GET", "/v1/topics", {"params": {"include_system": "true"}}, True),
    ("GET", "/v1/topics", {"params": {"include_system": "maybe"}}, False),
    ("DELETE", "/v1/topics/other", {}, True),
    ("GET", "/v1/no-such-route", {}, False),
]


@pytest.fixture(params=DATABASES)
def two_databases(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """Two migrated, empty databases of one kind."""
    fresh = contextlib.contextmanager(fresh_database)
    with fresh(request) as first, fresh(request) as second:
        yield first, second


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ("<volatile>" if k in VOLATILE else _masked(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _direct_count(client: TestClient) -> float:
    """How many requests the direct path has answered so far (the metric's sum over routes)."""
    total = 0.0
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("halfmq_http_direct_requests_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _answers(database_url: str, *, direct: bool) -> list[tuple[int, Any, bool]]:
    """Every case's (status, masked body, whether the direct path served it)."""
    answers = []
    with TestClient(create_app(make_settings(database_url, direct_routes=direct))) as client:
        assert client.post("/v1/topics", json={"name": "t", "partitions": 2}).status_code == 201
        for method, url, arguments, _ in CASES:
            before = _direct_count(client)
            response = client.request(method, url, **arguments)
            served = _direct_count(client) > before + 1  # the /metrics request itself is served directly
            body = response.json() if response.headers.get("content-type") == "application/json" else response.text
            answers.append((response.status_code, _masked(body), served))
    return answers


def test_the_direct_path_answers_every_request_as_fastapi_does(two_databases: tuple[str, str]) -> None:
    direct = _answers(two_databases[0], direct=True)
    fastapi_only = _answers(two_databases[1], direct=False)
    for (method, url, arguments, served_directly), mine, theirs in zip(CASES, direct, fastapi_only, strict=True):
        assert mine[:2] == theirs[:2], f"{method} {url} {arguments}"
        assert mine[2] is served_directly, f"{method} {url} {arguments}: direct path {'not ' * served_directly}taken"
        assert theirs[2] is False


def test_with_auth_on_the_direct_path_refuses_as_fastapi_does(two_databases: tuple[str, str]) -> None:
    for direct, url in zip((True, False), two_databases, strict=True):
        settings = make_settings(url, auth="token", admin_token=ADMIN, direct_routes=direct)
        with TestClient(create_app(settings)) as client:
            admin = {"Authorization": f"Bearer {ADMIN}"}
            assert client.post("/v1/topics", json={"name": "t", "partitions": 1}, headers=admin).status_code == 201
            produce = {"messages": [{"value": 1}]}
            anonymous = client.post("/v1/topics/t/messages", json=produce)
            assert (anonymous.status_code, anonymous.json()["error"]["code"]) == (401, "UNAUTHENTICATED")
            unknown = client.post("/v1/topics/t/messages", json=produce, headers={"Authorization": "Bearer nope"})
            assert (unknown.status_code, unknown.json()["error"]["code"]) == (401, "UNAUTHENTICATED")
            client.post("/v1/principals", json={"name": "app"}, headers=admin)
            token = client.post("/v1/principals/app/tokens", json={}, headers=admin).json()["token"]
            mine = {"Authorization": f"Bearer {token}"}
            refused = client.post("/v1/topics/t/messages", json=produce, headers=mine)
            assert (refused.status_code, refused.json()["error"]["code"]) == (403, "FORBIDDEN")
            grant = {"principal": "app", "resource_type": "topic", "pattern": "t", "operations": ["write"]}
            assert client.post("/v1/acls", json=grant, headers=admin).status_code == 201
            assert client.post("/v1/topics/t/messages", json=produce, headers=mine).status_code == 200
            fetched = client.get("/v1/topics/t/partitions/0/messages", headers=admin).json()["messages"]
            assert [m["value"] for m in fetched] == [1]


def _requests_counted(client: TestClient, route: str, status: int) -> float:
    """halfmq_http_requests_total of POST ``route`` answered with ``status``."""
    wanted = f'halfmq_http_requests_total{{method="POST",route="{route}",status="{status}"}}'
    for line in client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN}"}).text.splitlines():
        if line.startswith(wanted):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_the_front_door_does_the_middlewares_work_as_they_do(two_databases: tuple[str, str]) -> None:
    """Body limit, request gate, listing filter, gzip and request metrics: the same on both paths."""
    produce_route = "/v1/topics/{topic}/messages"
    for direct, url in zip((True, False), two_databases, strict=True):
        settings = make_settings(
            url, auth="token", admin_token=ADMIN, direct_routes=direct, max_request_bytes=2048, gzip_min_bytes=200
        )
        with TestClient(create_app(settings)) as client:
            admin = {"Authorization": f"Bearer {ADMIN}"}
            for name in ("mine", "theirs"):
                assert client.post("/v1/topics", json={"name": name, "partitions": 1}, headers=admin).status_code == 201
            client.post("/v1/principals", json={"name": "app"}, headers=admin)
            token = client.post("/v1/principals/app/tokens", json={}, headers=admin).json()["token"]
            app = {"Authorization": f"Bearer {token}"}
            for operation in ("write", "describe"):
                grant = {"principal": "app", "resource_type": "topic", "pattern": "mine", "operations": [operation]}
                assert client.post("/v1/acls", json=grant, headers=admin).status_code == 201

            counted = _requests_counted(client, produce_route, 200)
            small = {"messages": [{"value": "x" * 100}]}
            assert client.post("/v1/topics/mine/messages", json=small, headers=app).status_code == 200
            assert _requests_counted(client, produce_route, 200) == counted + 1, f"direct={direct}: counted once"

            refused_before = _requests_counted(client, produce_route, 413)
            big = {"messages": [{"value": "x" * 3000}]}
            too_big = client.post("/v1/topics/mine/messages", json=big, headers=app)
            assert (too_big.status_code, too_big.json()["error"]["code"]) == (413, "MESSAGE_TOO_LARGE")
            assert _requests_counted(client, produce_route, 413) == refused_before + 1
            # Refused on its headers: a bad token is 401 whatever the body, which is never read.
            unknown = client.post("/v1/topics/mine/messages", json=big, headers={"Authorization": "Bearer nope"})
            assert (unknown.status_code, unknown.json()["error"]["code"]) == (401, "UNAUTHENTICATED")
            long_path = client.post("/v1/topics/" + "t" * 5000 + "/messages", json=small, headers=app)
            assert (long_path.status_code, long_path.json()["error"]["code"]) == (414, "URI_TOO_LONG")

            listed = client.get("/v1/topics", headers={**app, "accept-encoding": "identity"})
            assert [t["name"] for t in listed.json()["topics"]] == ["mine"]
            assert listed.headers["content-length"] == str(len(listed.content))
            many = {"messages": [{"value": n} for n in range(60)]}
            assert client.post("/v1/topics/mine/messages", json=many, headers=app).status_code == 200
            fetch = "/v1/topics/mine/partitions/0/messages"
            with client.stream("GET", fetch, headers={**admin, "accept-encoding": "gzip"}) as packed:
                assert packed.headers["content-encoding"] == "gzip"
                assert "accept-encoding" in packed.headers["vary"].lower()
                raw = b"".join(packed.iter_raw())
            assert packed.headers["content-length"] == str(len(raw))
            assert [m["value"] for m in orjson.loads(gzip.decompress(raw))["messages"]][-60:] == list(range(60))
