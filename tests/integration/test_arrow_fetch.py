"""The fetch endpoint's Arrow answer, against its JSON answer, on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.ipc
import pytest
from fastapi.testclient import TestClient

from tests.integration.conftest import create_topic, error_code

# The columns as docs/arrow.md gives them, in pyarrow's terms: what a reader must find.
SCHEMA = pa.schema(
    [
        pa.field("topic", pa.utf8(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("key", pa.utf8()),
        pa.field("value", pa.utf8()),
        pa.field("value_base64", pa.binary()),
        pa.field("headers", pa.map_(pa.utf8(), pa.utf8()), nullable=False),
    ]
)

ARROW = "application/vnd.apache.arrow.stream"
FETCH = "/v1/topics/{topic}/partitions/{partition}/messages"


def arrow_rows(response: Any) -> list[dict[str, Any]]:
    """An Arrow answer's rows in the JSON answer's message shape."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == ARROW
    table = pa.ipc.open_stream(response.content).read_all()
    table.validate(full=True)
    assert table.schema.remove_metadata().equals(SCHEMA, check_metadata=True)
    rows = table.set_column(3, "timestamp", table["timestamp"].cast(pa.int64())).to_pylist()
    messages = []
    for row in rows:
        assert (row["value"] is None) != (row["value_base64"] is None), row
        message = {k: row[k] for k in ("topic", "partition", "offset", "timestamp", "key")}
        message["headers"] = dict(row["headers"])
        if row["value"] is not None:
            message["value"] = orjson.loads(row["value"])
        else:
            message["value_base64"] = base64.b64encode(row["value_base64"]).decode()
        messages.append(message)
    return messages


def arrow_positions(response: Any) -> tuple[int, int, int]:
    return (
        int(response.headers["X-Halfmq-Next-Offset"]),
        int(response.headers["X-Halfmq-High-Watermark"]),
        int(response.headers["X-Halfmq-Last-Stable-Offset"]),
    )


def pages(client: TestClient, topic: str, partition: int, isolation: str, page_size: int) -> Iterator[tuple[Any, Any]]:
    """The partition page by page, each page fetched as JSON and as Arrow from the same offset."""
    offset = 0
    while True:
        params = {"offset": offset, "max_messages": page_size, "isolation": isolation}
        path = FETCH.format(topic=topic, partition=partition)
        as_json = client.get(path, params=params)
        as_arrow = client.get(path, params=params, headers={"Accept": ARROW})
        yield as_json, as_arrow
        next_offset = as_json.json()["next_offset"]
        if next_offset == offset:
            return
        offset = next_offset


def send(client: TestClient, topic: str, partition: int, messages: list[dict[str, Any]], **extra: Any) -> None:
    response = client.post(FETCH.format(topic=topic, partition=partition), json={"messages": messages, **extra})
    assert response.status_code == 200, response.text


def begin(client: TestClient) -> str:
    return str(client.post("/v1/transactions", json={}).json()["txn_id"])


@pytest.fixture(scope="module")
def mixed_log(module_client: TestClient) -> TestClient:
    """Partition 0 of ``mixed``: every kind of value, key and header, committed, aborted and open writes.

    Written once per database kind; the tests only read it.
    """
    client = module_client
    create_topic(client, "mixed", 2)
    send(
        client,
        "mixed",
        0,
        [
            {"value": {"nested": [1, 2.5, None, True], "text": "é ✓ \u0000"}, "key": "k-1", "headers": {"h": "v"}},
            {"value_base64": base64.b64encode(b"\x00\xff\xfe binary").decode(), "headers": {"a": "1", "b": ""}},
            {"value": "a JSON string", "key": None},
            {"value": None},
            {"value": 12345678901234567},
            {"value_base64": "", "key": ""},  # empty bytes, empty key
        ],
    )
    committed, aborted = begin(client), begin(client)
    send(client, "mixed", 0, [{"value": "committed-1", "key": "c"}], txn_id=committed)
    send(client, "mixed", 0, [{"value": "aborted-1"}, {"value_base64": "AAE="}], txn_id=aborted)
    send(client, "mixed", 0, [{"value": "plain-between"}])
    send(client, "mixed", 0, [{"value": "committed-2", "headers": {"x": "y"}}], txn_id=committed)
    assert client.post(f"/v1/transactions/{aborted}/abort").status_code == 200
    assert client.post(f"/v1/transactions/{committed}/commit").status_code == 200
    half = client.post(
        "/v1/half-messages", json={"topic": "mixed", "producer_group": "g", "partition": 0, "value": "half-committed"}
    ).json()["message_id"]
    assert client.post(f"/v1/half-messages/{half}/commit").status_code == 200
    send(client, "mixed", 0, [{"value": "after"}])
    open_txn = begin(client)  # holds the last stable offset of partition 0 from here on
    send(client, "mixed", 0, [{"value": "open-1"}], txn_id=open_txn)
    send(client, "mixed", 0, [{"value": "after-open"}])
    return client


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
@pytest.mark.parametrize("page_size", [3, 500])
def test_the_arrow_answer_is_the_json_answer_message_for_message(
    mixed_log: TestClient, isolation: str, page_size: int
) -> None:
    seen: list[dict[str, Any]] = []
    for as_json, as_arrow in pages(mixed_log, "mixed", 0, isolation, page_size):
        body = as_json.json()
        assert arrow_rows(as_arrow) == body["messages"]
        assert arrow_positions(as_arrow) == (body["next_offset"], body["high_watermark"], body["last_stable_offset"])
        seen.extend(body["messages"])
    # Offsets 7-8 are the aborted writes, 11-12 the transactions' markers, 15 the open one's write.
    if isolation == "read_committed":  # aborted writes skipped; stops at the open transaction
        assert [m["offset"] for m in seen] == [0, 1, 2, 3, 4, 5, 6, 9, 10, 13, 14]
        last = ["committed-1", "plain-between", "committed-2", "half-committed", "after"]
        assert [m["value"] for m in seen[-5:]] == last
    else:  # everything written, aborted and open included; never the control markers
        assert [m["offset"] for m in seen] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 14, 15, 16]
        assert [m.get("value") for m in seen[-3:]] == ["after", "open-1", "after-open"]


def test_arrow_errors_are_the_json_errors(client: TestClient) -> None:
    create_topic(client, "t")
    send(client, "t", 0, [{"value": 1}])
    arrow = {"Accept": ARROW}
    past = client.get(FETCH.format(topic="t", partition=0), params={"offset": 5}, headers=arrow)
    assert (past.status_code, error_code(past)) == (416, "OFFSET_OUT_OF_RANGE")
    assert past.headers["content-type"] == "application/json"
    no_topic = client.get(FETCH.format(topic="nope", partition=0), headers=arrow)
    assert (no_topic.status_code, error_code(no_topic)) == (404, "TOPIC_NOT_FOUND")
    no_partition = client.get(FETCH.format(topic="t", partition=3), headers=arrow)
    assert (no_partition.status_code, error_code(no_partition)) == (404, "PARTITION_NOT_FOUND")
    too_many = client.get(FETCH.format(topic="t", partition=0), params={"max_messages": 10**6}, headers=arrow)
    assert (too_many.status_code, error_code(too_many)) == (422, "VALIDATION_ERROR")
    bad_isolation = client.get(FETCH.format(topic="t", partition=0), params={"isolation": "dirty"}, headers=arrow)
    assert (bad_isolation.status_code, error_code(bad_isolation)) == (422, "VALIDATION_ERROR")


def test_an_empty_page_is_a_stream_with_no_rows_and_its_positions(client: TestClient) -> None:
    create_topic(client, "t")
    send(client, "t", 0, [{"value": 1}, {"value": 2}])
    at_end = client.get(FETCH.format(topic="t", partition=0), params={"offset": 2}, headers={"Accept": ARROW})
    assert arrow_rows(at_end) == []
    assert arrow_positions(at_end) == (2, 2, 2)


@pytest.fixture(scope="module")
def one_message(module_client: TestClient) -> TestClient:
    """Topic ``one`` with one message, written once per database kind; the tests only read it."""
    create_topic(module_client, "one")
    send(module_client, "one", 0, [{"value": 1}])
    return module_client


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, "application/json"),
        ("*/*", "application/json"),
        ("application/json", "application/json"),
        (ARROW, ARROW),
        (f"{ARROW}, application/json;q=0.5", ARROW),
        (f"application/json, {ARROW};q=0.5", "application/json"),
        (f"{ARROW};q=0", "application/json"),
        ("text/csv", "application/json"),  # what every fetch answered before Arrow
    ],
)
def test_accept_chooses_the_format(one_message: TestClient, accept: str | None, expected: str) -> None:
    headers = {"Accept": accept} if accept is not None else {}
    response = one_message.get(FETCH.format(topic="one", partition=0), headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == expected


def test_the_broker_makes_arrow_without_an_arrow_library(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    create_topic(client, "t")
    send(client, "t", 0, [{"value": 1}, {"value": "two", "key": "k", "headers": {"h": "v"}}])
    with monkeypatch.context() as installed_without_pyarrow:
        installed_without_pyarrow.setitem(sys.modules, "pyarrow", None)  # importing it fails
        answer = client.get(FETCH.format(topic="t", partition=0), headers={"Accept": ARROW})
    assert [(m["value"], m["key"], m["headers"]) for m in arrow_rows(answer)] == [(1, None, {}), ("two", "k", {"h": "v"})]
