"""The bare ASGI ceiling answers the benchmark's requests with the broker's answer shapes."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from bench import payloads
from bench.bare_app import BareBroker, create_app


def _route(broker: BareBroker, method: str, path: str, body: bytes = b"", query: bytes = b"") -> tuple[int, Any]:
    status, answer = broker.route(method, path, query, body)
    return status, orjson.loads(orjson.dumps(answer))


def test_produce_prepare_commit_and_fetch_answer_as_the_broker_does() -> None:
    broker = BareBroker()
    status, answer = _route(broker, "POST", "/v1/topics/bench/messages", payloads.produce_body(100))
    assert status == 200 and len(answer["offsets"]) == 100 and set(answer["offsets"][0]) == {"partition", "offset"}
    status, answer = _route(broker, "POST", "/v1/half-messages", payloads.half_body())
    assert status == 201 and answer["state"] == "PREPARED"
    status, answer = _route(broker, "POST", f"/v1/half-messages/{answer['message_id']}/commit")
    assert status == 200 and answer["state"] == "COMMITTED"
    status, answer = _route(broker, "POST", "/v1/topics/bench/partitions/2/messages", payloads.partition_body(25, "t-1"))
    assert answer["txn_id"] == "t-1" and {o["partition"] for o in answer["offsets"]} == {2}
    status, answer = _route(broker, "GET", "/v1/topics/bench/partitions/1/messages", query=b"offset=7&max_messages=3")
    assert [m["offset"] for m in answer["messages"]] == [7, 8, 9] and answer["next_offset"] == 10
    assert answer["messages"][0]["value"] == payloads.VALUE


def test_a_message_without_a_value_or_a_body_orjson_refuses_is_a_422() -> None:
    broker = BareBroker()
    assert _route(broker, "POST", "/v1/topics/bench/messages", b'{"messages": [{"key": "k"}]}')[0] == 422
    assert _route(broker, "POST", "/v1/topics/bench/messages", b"{not json")[0] == 422
    assert _route(broker, "GET", "/nowhere")[0] == 404


def test_the_asgi_app_sends_a_sized_json_answer() -> None:
    sent: list[dict[str, Any]] = []
    body = iter([{"type": "http.request", "body": payloads.produce_body(1), "more_body": False}])

    async def receive() -> dict[str, Any]:
        return next(body)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/topics/bench/messages", "query_string": b""}
    asyncio.run(create_app()(scope, receive, send))
    headers = dict(sent[0]["headers"])
    assert sent[0]["status"] == 200 and int(headers[b"content-length"]) == len(sent[1]["body"])
