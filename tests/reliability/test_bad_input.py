"""Bad input never causes a server error, on SQLite and on PostgreSQL.

Each request below is something a client can send; the contract says "never a
500 for bad input": the answer must be a 4xx in the contract's error shape, or a
success where the input is merely unusual, and the broker must stay up. These
are the cases found by fuzzing and probing (schemathesis generates JSON from the
schema; these go beyond it: NUL characters, which PostgreSQL text columns reject,
lone surrogates, integers past 64 bits, deep nesting, invalid UTF-8).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.databases import PostgresDatabases

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    path = tmp_path_factory.mktemp(f"bad-input-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite:///{path}/broker.db"
    else:
        databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
        url = databases.new()
    process = BrokerProcess(url, log_path=Path(path) / "broker.log")
    process.start()
    with httpx.Client(base_url=process.url) as client:
        assert client.post("/v1/topics", json={"name": "bad", "partitions": 1}).status_code == 201
        assert client.post("/v1/producers", json={}).status_code == 200  # producer id 1
    try:
        yield process
    finally:
        process.stop()


# (label, method, path, raw body or None). Bodies are raw JSON text: "\\u0000" is a JSON escape.
CASES = [
    ("NUL in key", "POST", "/v1/topics/bad/messages", '{"messages": [{"key": "a\\u0000b", "value": 1}]}'),
    ("NUL in header", "POST", "/v1/topics/bad/messages", '{"messages": [{"value": 1, "headers": {"h\\u0000": "v\\u0000"}}]}'),
    ("NUL in value", "POST", "/v1/topics/bad/messages", '{"messages": [{"value": "a\\u0000b"}]}'),
    ("lone surrogate in key", "POST", "/v1/topics/bad/messages", '{"messages": [{"key": "\\ud800", "value": 1}]}'),
    ("lone surrogate in header", "POST", "/v1/topics/bad/messages", '{"messages": [{"value": 1, "headers": {"h": "\\ud800"}}]}'),
    ("lone surrogate in header name", "POST", "/v1/topics/bad/messages",
     '{"messages": [{"value": 1, "headers": {"\\udfff": "v"}}]}'),
    ("lone surrogate in value", "POST", "/v1/topics/bad/messages", '{"messages": [{"value": "\\ud800"}]}'),
    ("lone surrogate in half key", "POST", "/v1/half-messages",
     '{"topic": "bad", "producer_group": "g", "key": "\\ud800", "value": 1}'),
    ("NUL in producer_group", "POST", "/v1/half-messages", '{"topic": "bad", "producer_group": "g\\u0000", "value": 1}'),
    ("NUL in transaction_id", "POST", "/v1/half-messages",
     '{"topic": "bad", "producer_group": "g", "transaction_id": "t\\u0000", "value": 1}'),
    ("NUL in transactional_id", "POST", "/v1/producers", '{"transactional_id": "a\\u0000"}'),
    ("transaction timeout past 32 bits", "POST", "/v1/producers", '{"transaction_timeout_ms": 99999999999}'),
    ("producer_id past 64 bits", "POST", "/v1/topics/bad/partitions/0/messages",
     '{"messages": [{"value": 1}], "producer_id": 99999999999999999999999, "producer_epoch": 0}'),
    ("producer_id past 64 bits, begin", "POST", "/v1/transactions", '{"producer_id": 99999999999999999999, "producer_epoch": 0}'),
    ("NUL in txn_id of a produce", "POST", "/v1/topics/bad/partitions/0/messages",
     '{"messages": [{"value": 1}], "txn_id": "\\u0000"}'),
    ("NUL in group offset metadata", "POST", "/v1/groups/g/offsets",
     '{"offsets": [{"topic": "bad", "partition": 0, "offset": 0, "metadata": "\\u0000"}]}'),
    ("NUL in listener secret", "PUT", "/v1/producer-groups/g/listeners/i",
     '{"callback_url": "http://127.0.0.1:9/", "secret": "\\u0000"}'),
    ("NUL in group path", "GET", "/v1/groups/%00/offsets", None),
    ("NUL in listener path", "PUT", "/v1/producer-groups/g/listeners/%00", '{"callback_url": "http://127.0.0.1:9/"}'),
    ("NUL in half message id path", "GET", "/v1/half-messages/%00", None),
    ("NUL in half message commit path", "POST", "/v1/half-messages/%00/commit", None),
    ("NUL in transaction path", "GET", "/v1/transactions/%00", None),
    ("NUL in transaction commit path", "POST", "/v1/transactions/%00/commit", None),
    ("NUL in producer_group query", "GET", "/v1/half-messages?producer_group=%00", None),
    ("NUL in checks path", "GET", "/v1/producer-groups/%00/checks", None),
    ("invalid UTF-8 in path", "GET", "/v1/transactions/%FF%FE", None),
    ("invalid UTF-8 in group path", "GET", "/v1/groups/%C3%28/offsets", None),
    ("deeply nested body", "POST", "/v1/topics/bad/messages", "[" * 100_000),
    ("deeply nested value", "POST", "/v1/topics/bad/messages", '{"messages": [{"value": ' + "[" * 3000 + "]" * 3000 + "}]}"),
    ("body that is not JSON", "POST", "/v1/topics/bad/messages", "\xff\xfe not json"),
    ("JSON null body", "POST", "/v1/topics/bad/messages", "null"),
    ("JSON null body, optional model", "POST", "/v1/producers", "null"),
]


@pytest.mark.parametrize(("label", "method", "path", "body"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_never_a_server_error(broker: BrokerProcess, label: str, method: str, path: str, body: str | None) -> None:
    content = None if body is None else body.encode("utf-8", "surrogateescape")
    # A fresh connection each time: after a 500 the server closes the connection it came on.
    with httpx.Client(base_url=broker.url, timeout=30, headers={"connection": "close"}) as client:
        answer = client.request(method, path, content=content, headers={"content-type": "application/json"})
        assert answer.status_code < 500, f"{label}: {method} {path} {body!r:.200} -> {answer.status_code} {answer.text}"
        if answer.status_code >= 400:
            error = answer.json()["error"]
            assert set(error) == {"code", "message"} and error["code"].isupper(), answer.text
        assert client.get("/healthz").status_code == 200
