"""The storage-free ceiling: the broker's routes, request models, middleware and JSON, no database.

Same request bodies (the broker's own pydantic models, so validation costs the
same), the same ``to_record`` conversion, the same ASGI middleware and orjson
responses, served by uvicorn exactly as ``halfmq serve`` serves the broker (one
process, ``loop="auto"``/``http="auto"`` = uvloop/httptools, no access log, the
garbage collector tuned after start-up as the broker's is).
Offsets and ids are made up in memory. Whatever halfmq does on top of this is
the cost of storage and bookkeeping.

Run: ``python -m bench.ceiling_app --port 18100``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import FastAPI, Path, Query, Request
from starlette.responses import Response

from app.api.encoding import JsonResponse, message_json, to_record
from app.api.errors import install_error_handlers
from app.api.half_routes import HalfMessageIn
from app.api.middleware import BodyLimitMiddleware, MetricsMiddleware
from app.api.models import (
    Isolation,
    PartitionProduceRequest,
    ProduceRequest,
    ProducerInit,
    TopicCreate,
)
from app.api.txn_routes import TransactionBegin
from bench.payloads import RAW_VALUE
from half_store.domain.constants import TOPIC_NAME_PATTERN
from half_store.domain.message_limits import MessageLimits
from half_store.domain.records import FetchResult, PartitionState, StoredMessage, now_ms

try:  # a broker from before the Arrow fetch (bench --broker-root) has no Arrow answer to copy
    from app.api import arrow_fetch
except ImportError:
    arrow_fetch = None  # type: ignore[assignment]
try:  # a broker from before the start-up freeze has none to copy
    from app.memory import tune_garbage_collector
except ImportError:
    tune_garbage_collector = None  # type: ignore[assignment]
from half_store.settings import Settings

_settings = Settings()
LIMITS = MessageLimits(_settings.max_message_bytes, _settings.max_header_count, _settings.max_header_bytes)
TopicPath = Annotated[str, Path(pattern=TOPIC_NAME_PATTERN)]
PartitionPath = Annotated[int, Path(ge=0, le=2**31 - 1)]
IdPath = Annotated[str, Path(min_length=1, max_length=64)]


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    if tune_garbage_collector is not None:  # as the broker's front does once it has started
        tune_garbage_collector()
    yield


def create_app() -> FastAPI:
    app = FastAPI(title="halfmq storage-free ceiling", lifespan=_lifespan)
    install_error_handlers(app)
    offsets = itertools.count()
    round_robin = itertools.count()
    partitions: dict[str, int] = {}

    @app.get("/healthz")
    async def healthz() -> Response:
        return JsonResponse({"status": "ok"})

    @app.get("/readyz")
    async def readyz() -> Response:
        return JsonResponse({"status": "ready"})

    @app.post("/v1/topics", status_code=201)
    async def create_topic(body: TopicCreate) -> Response:
        partitions[body.name] = body.partitions
        return JsonResponse({"name": body.name, "partitions": body.partitions}, status_code=201)

    @app.post("/v1/topics/{topic}/messages")
    async def produce(topic: TopicPath, body: ProduceRequest) -> Response:
        count = partitions.get(topic, 1)
        records = [to_record(m, LIMITS) for m in body.messages]
        placed = [
            {"partition": m.partition if m.partition is not None else next(round_robin) % count, "offset": next(offsets)}
            for m in body.messages
        ]
        assert len(records) == len(placed)
        return JsonResponse({"offsets": placed})

    @app.post("/v1/topics/{topic}/partitions/{partition}/messages")
    async def produce_to_partition(topic: TopicPath, partition: PartitionPath, body: PartitionProduceRequest) -> Response:
        records = [to_record(m, LIMITS) for m in body.messages]
        answer: dict[str, object] = {
            "offsets": [{"partition": partition, "offset": next(offsets)} for _ in records],
            "duplicate": False,
        }
        if body.txn_id is not None or body.transactional:
            answer["txn_id"] = body.txn_id or f"txn-{os.urandom(12).hex()}"
        return JsonResponse(answer)

    @app.post("/v1/producers")
    async def init_producer(body: ProducerInit | None = None) -> Response:
        return JsonResponse({"producer_id": next(offsets), "producer_epoch": 0})

    @app.get("/v1/topics/{topic}/partitions/{partition}/messages")
    async def fetch(
        request: Request,
        topic: TopicPath,
        partition: PartitionPath,
        offset: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0,
        max_messages: Annotated[int, Query(ge=1)] = 500,
        max_wait_ms: Annotated[int, Query(ge=0)] = 0,
        isolation: Isolation = "read_committed",
    ) -> Response:
        timestamp = now_ms()
        found = [
            StoredMessage(topic, partition, offset + i, timestamp, None, RAW_VALUE, 0, None, None)
            for i in range(max_messages)
        ]
        end = offset + max_messages
        accept = request.headers.get("accept")
        wants_arrow = arrow_fetch is not None and arrow_fetch.negotiate(accept)
        if wants_arrow == "arrow":
            return arrow_fetch.arrow_response(FetchResult(found, end, PartitionState(partition, 0, end, end)))
        return JsonResponse(
            {
                "messages": [message_json(m) for m in found],
                "next_offset": end,
                "high_watermark": end,
                "last_stable_offset": end,
            }
        )

    @app.post("/v1/half-messages", status_code=201)
    async def prepare(body: HalfMessageIn) -> Response:
        to_record(body, LIMITS)
        message_id = uuid.uuid4().hex
        return JsonResponse(
            {"message_id": message_id, "transaction_id": body.transaction_id or message_id, "state": "PREPARED"},
            status_code=201,
        )

    @app.post("/v1/half-messages/{message_id}/commit")
    async def commit_half(message_id: IdPath) -> Response:
        return JsonResponse(
            {"message_id": message_id, "state": "COMMITTED", "topic": "bench", "partition": 0, "offset": next(offsets)}
        )

    @app.post("/v1/transactions", status_code=201)
    async def begin(request: Request, body: TransactionBegin | None = None) -> Response:
        return JsonResponse({"txn_id": f"txn-{os.urandom(12).hex()}", "state": "OPEN", "timeout_ms": 60000}, status_code=201)

    @app.post("/v1/transactions/{txn_id}/commit")
    async def commit_txn(txn_id: IdPath) -> Response:
        return JsonResponse({"txn_id": txn_id, "state": "COMMITTED"})

    app.add_middleware(BodyLimitMiddleware, max_bytes=_settings.max_request_bytes)
    app.add_middleware(MetricsMiddleware)
    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18100)
    args = parser.parse_args()
    # The same uvicorn.run call as app/cli.py's `serve`.
    uvicorn.run(
        create_app(),
        host=args.host,
        port=args.port,
        log_level="warning",
        loop="auto",
        http="auto",
        access_log=False,
        timeout_graceful_shutdown=10,
    )


if __name__ == "__main__":
    main()

