"""CPU of the broker's HTTP front per produce request, storage replaced by a stub that answers at once.

The front's app (middleware, direct path, validation, records, the link's encoding of the
call) driven in-process through ASGI, no socket and no database, so the figure does not move
with the disk or with other processes as an HTTP benchmark's does on a shared machine.
``python -m bench.front_cpu [--requests N]``; ``HALFMQ_BENCH_BROKER_ROOT`` picks the broker tree.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

root = os.environ.get("HALFMQ_BENCH_BROKER_ROOT")
if root:
    sys.path.insert(0, root)

from bench import payloads  # noqa: E402


class _StubLog:
    def __init__(self, encode: Any) -> None:
        self._encode = encode

    async def produce(self, topic: str, records: Any, partitions: Any) -> list[tuple[int, int]]:
        self._encode(("call", 0, "log", "produce", (topic, records, list(partitions)), {}, False))
        return [(0, offset) for offset in range(len(records))]


class _StubBroker:
    def __init__(self, settings: Any, encode: Any) -> None:
        self.settings = settings
        self.log = _StubLog(encode)


async def _request(app: Any, body: bytes) -> int:
    sent: list[dict[str, Any]] = []
    chunks = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return chunks.pop() if chunks else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": f"/v1/topics/{payloads.TOPIC}/messages", "raw_path": b"", "root_path": "", "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8080),
    }
    await app(scope, receive, send)
    return int(sent[0]["status"])


async def _measure(requests: int) -> None:
    from app.api.authorize import authorize  # noqa: F401 - the app's own modules, from the chosen tree
    from app.auth.authority import Authority
    from app.core.protocol import encode
    from app.main import create_app
    from half_store.settings import Settings

    settings = Settings(database_url="sqlite:///:memory:")
    app = create_app(settings)
    app.state.broker = _StubBroker(settings, encode)
    app.state.authority = Authority(False, None, None)  # type: ignore[arg-type]
    for messages in (1, 100):
        body = payloads.produce_body(messages)
        assert await _request(app, body) == 200
        best = float("inf")
        for _ in range(5):
            started = time.process_time()
            for _ in range(requests // messages * 10 if messages == 1 else requests):
                await _request(app, body)
            spent = time.process_time() - started
            best = min(best, spent / (requests // messages * 10 if messages == 1 else requests))
        print(f"produce {messages:>3} msg/request: front CPU {best * 1e3:.3f} ms per request", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(_measure(args.requests))


if __name__ == "__main__":
    main()
