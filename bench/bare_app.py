"""The bare ceiling: the broker's hot endpoints as a plain ASGI app, no framework, no storage.

What Python HTTP can carry on this machine (issue 37). The same paths and answer shapes
as the broker's hot routes (single and batched produce, partition produce inside a
mode-2 transaction, producers, half prepare + commit, transaction begin + commit,
``read_committed`` fetch), bodies parsed with orjson and each message's value looked
at (present, and written back as the JSON text to store), served by uvicorn with
httptools and uvloop and one worker per core. Offsets and ids are made up per process.

Run: ``python -m bench.bare_app --port 18200 [--workers N]``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from bench.payloads import RAW_VALUE

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Answer = tuple[int, Any]

_JSON_HEADERS = [(b"content-type", b"application/json")]
_TOPIC_MESSAGES = re.compile(r"^/v1/topics/([A-Za-z0-9._-]{1,249})/messages$")
_PARTITION_MESSAGES = re.compile(r"^/v1/topics/([A-Za-z0-9._-]{1,249})/partitions/([0-9]{1,10})/messages$")
_HALF_COMMIT = re.compile(r"^/v1/half-messages/([^/]{1,64})/commit$")
_TXN_COMMIT = re.compile(r"^/v1/transactions/([^/]{1,64})/commit$")
_BAD_REQUEST: Answer = (422, {"error": {"code": "VALIDATION_FAILED", "message": "bad body"}})
_NOT_FOUND: Answer = (404, {"detail": "Not Found"})


def _values(messages: Any) -> list[bytes] | None:
    """Each message's value as the JSON text to store; None if a message has none."""
    if not isinstance(messages, list) or not messages:
        return None
    stored = []
    for message in messages:
        if not isinstance(message, dict) or "value" not in message:
            return None
        stored.append(orjson.dumps(message["value"]))
    return stored


class BareBroker:
    """The answers, made up in memory: per-process counters stand in for offsets and ids."""

    def __init__(self) -> None:
        self._offsets = itertools.count()
        self._round_robin = itertools.count()
        self._partitions: dict[str, int] = {}

    def produce(self, topic: str, body: Any) -> Answer:
        values = _values(body.get("messages") if isinstance(body, dict) else None)
        if values is None:
            return _BAD_REQUEST
        count = self._partitions.get(topic, 4)
        return 200, {
            "offsets": [{"partition": next(self._round_robin) % count, "offset": next(self._offsets)} for _ in values]
        }

    def produce_to_partition(self, partition: int, body: Any) -> Answer:
        values = _values(body.get("messages") if isinstance(body, dict) else None)
        if values is None:
            return _BAD_REQUEST
        answer: dict[str, Any] = {
            "offsets": [{"partition": partition, "offset": next(self._offsets)} for _ in values],
            "duplicate": False,
        }
        if body.get("txn_id") is not None or body.get("transactional"):
            answer["txn_id"] = body.get("txn_id") or f"txn-{os.urandom(12).hex()}"
        return 200, answer

    def prepare(self, body: Any) -> Answer:
        if not isinstance(body, dict) or _values([body]) is None or not isinstance(body.get("topic"), str):
            return _BAD_REQUEST
        message_id = uuid.uuid4().hex
        return 201, {"message_id": message_id, "transaction_id": body.get("transaction_id") or message_id, "state": "PREPARED"}

    def commit_half(self, message_id: str) -> Answer:
        return 200, {"message_id": message_id, "state": "COMMITTED", "topic": "bench", "partition": 0,
                     "offset": next(self._offsets)}

    def fetch(self, topic: str, partition: int, query: dict[str, str]) -> Answer:
        try:
            offset = int(query.get("offset", "0"))
            count = int(query.get("max_messages", "500"))
        except ValueError:
            return _BAD_REQUEST
        value = orjson.Fragment(RAW_VALUE)
        messages: list[dict[str, Any]] = [
            {"topic": topic, "partition": partition, "offset": offset + i, "timestamp": 0, "key": None, "headers": {},
             "value": value}
            for i in range(count)
        ]
        end = offset + count
        return 200, {"messages": messages, "next_offset": end, "high_watermark": end, "last_stable_offset": end}

    def route(self, method: str, path: str, query: bytes, body: bytes) -> Answer:
        """The answer to one request; a body that orjson refuses is a 422, as the broker's."""
        parsed: Any = None
        if body:
            try:
                parsed = orjson.loads(body)
            except orjson.JSONDecodeError:
                return _BAD_REQUEST
        if method == "POST":
            if path == "/v1/half-messages":
                return self.prepare(parsed)
            if (matched := _TOPIC_MESSAGES.match(path)) is not None:
                return self.produce(matched[1], parsed)
            if (matched := _PARTITION_MESSAGES.match(path)) is not None:
                return self.produce_to_partition(int(matched[2]), parsed or {})
            if (matched := _HALF_COMMIT.match(path)) is not None:
                return self.commit_half(matched[1])
            if path == "/v1/transactions":
                return 201, {"txn_id": f"txn-{os.urandom(12).hex()}", "state": "OPEN", "timeout_ms": 60000}
            if (matched := _TXN_COMMIT.match(path)) is not None:
                return 200, {"txn_id": matched[1], "state": "COMMITTED"}
            if path == "/v1/producers":
                return 200, {"producer_id": next(self._offsets), "producer_epoch": 0}
            if path == "/v1/topics" and isinstance(parsed, dict):
                self._partitions[str(parsed.get("name"))] = int(parsed.get("partitions", 1))
                return 201, {"name": parsed.get("name"), "partitions": parsed.get("partitions", 1)}
        elif method == "GET":
            if (matched := _PARTITION_MESSAGES.match(path)) is not None:
                pairs = (item.split("=", 1) for item in query.decode("latin-1").split("&") if "=" in item)
                return self.fetch(matched[1], int(matched[2]), dict(pairs))
            if path in ("/healthz", "/readyz"):
                return 200, {"status": "ready" if path == "/readyz" else "ok"}
        return _NOT_FOUND


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def create_app() -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    broker = BareBroker()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = await _read_body(receive) if scope["method"] == "POST" else b""
        status, answer = broker.route(scope["method"], scope["path"], scope["query_string"], body)
        encoded = orjson.dumps(answer)
        headers = [*_JSON_HEADERS, (b"content-length", str(len(encoded)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": encoded})

    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18200)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: one per core)")
    args = parser.parse_args()
    uvicorn.run(
        "bench.bare_app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level="warning",
        loop="uvloop",
        http="httptools",
        access_log=False,
        lifespan="on",
    )


if __name__ == "__main__":
    main()
