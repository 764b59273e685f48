"""Routes for operations: describe, alter and delete topics, list transactions, the checker's status."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import Field
from starlette.responses import Response
from typing_extensions import TypedDict

from app.api.encoding import JsonResponse
from app.api.log_routes import ERRORS, TopicPath, broker_of
from app.api.models import NO_NUL, Isolation, PartitionDescription, TopicAlter, TopicDescription, answer_shape
from app.api.rights import ALTER, DESCRIBE, TOPIC, cluster, path, require, rights
from half_store.domain.admin_records import (
    RETENTION_KEYS,
    TopicAlteration,
    TopicDetails,
    TransactionFilter,
    TransactionListing,
)
from half_store.domain.errors import ValidationFailed
from half_store.domain.log_batches import LATEST_TIMESTAMP, OffsetQuery
from half_store.domain.txn_state import TxnState

router = APIRouter(prefix="/v1", responses=ERRORS)


@answer_shape
class TransactionPartitionOut(TypedDict):
    topic: str
    partition: int


@answer_shape
class TransactionListed(TypedDict):
    txn_id: str
    transactional_id: str | None
    producer_id: int | None
    producer_epoch: int | None
    state: TxnState
    partitions: list[TransactionPartitionOut]
    started_ms: int
    last_state_change_ms: int
    timeout_ms: int


@answer_shape
class TransactionList(TypedDict):
    transactions: list[TransactionListed]


@answer_shape
class ProducerGroupOut(TypedDict):
    producer_group: str
    prepared: int
    oldest_born_ms: int | None
    live_listeners: int


@answer_shape
class CheckerStatusOut(TypedDict):
    leader: str | None
    lease_expires_ms: int | None
    last_round_ms: int | None
    last_retention_ms: int | None
    prepared: int
    groups: list[ProducerGroupOut]


def topic_json(details: TopicDetails) -> TopicDescription:
    config, effective = details.config, details.effective
    partitions: list[PartitionDescription] = [
        {
            "partition": s.partition,
            "log_start_offset": s.log_start_offset,
            "high_watermark": s.high_watermark,
            "last_stable_offset": s.last_stable_offset,
            "blocking_txn_id": s.blocking_txn_id,
        }
        for s in details.partitions
    ]
    return {
        "name": details.topic.name,
        "partitions": partitions,
        "config": {
            "retention_ms": config.retention_ms,
            "retention_bytes": config.retention_bytes,
            "effective_retention_ms": effective.retention_ms,
            "effective_retention_bytes": effective.retention_bytes,
        },
    }


def transaction_json(txn: TransactionListing) -> TransactionListed:
    return {
        "txn_id": txn.txn_id,
        "transactional_id": txn.transactional_id,
        "producer_id": txn.producer_id,
        "producer_epoch": txn.producer_epoch,
        "state": txn.state,
        "partitions": [{"topic": t, "partition": p} for t, p in txn.partitions],
        "started_ms": txn.started_ms,
        "last_state_change_ms": txn.last_state_change_ms,
        "timeout_ms": txn.timeout_ms,
    }


@router.get("/topics/{topic}", response_model=TopicDescription, tags=["topics"])
@rights(require(TOPIC, DESCRIBE, path("topic")))
async def describe_topic(topic: TopicPath, request: Request) -> Response:
    return JsonResponse(topic_json(await broker_of(request).admin.describe_topic(topic)))


@answer_shape
class OffsetForTime(TypedDict):
    partition: int
    offset: Annotated[int, Field(description="The first offset whose message's timestamp is at or after the time; "
                                             "the end (LSO or high watermark) when none is yet")]
    timestamp: Annotated[int | None, Field(description="That message's timestamp; null when there is none")]


@answer_shape
class OffsetsForTime(TypedDict):
    topic: str
    timestamp: int
    partitions: list[OffsetForTime]


@router.get("/topics/{topic}/offsets", response_model=OffsetsForTime, tags=["topics"])
@rights(require(TOPIC, DESCRIBE, path("topic")))
async def offsets_for_time(
    topic: TopicPath,
    request: Request,
    timestamp: Annotated[int, Query(ge=0, le=253_402_300_799_999, description="ms since the epoch")],
    isolation: Isolation = "read_committed",
) -> Response:
    """Where to start reading to see what was written from ``timestamp`` on (Kafka's offsets-for-times).

    Per partition, the first offset whose message has a timestamp at or after it; a
    partition with none (yet) answers its end, so a reader started there waits for new
    messages. Fetch from these offsets, or commit them as a group's (a reset by time).
    """
    broker = broker_of(request)
    described = await broker.admin.describe_topic(topic)
    queries = [OffsetQuery(topic, p.partition, timestamp) for p in described.partitions]
    ends = [OffsetQuery(topic, p.partition, LATEST_TIMESTAMP) for p in described.partitions]
    found = await broker.batches.list_offsets([*queries, *ends], isolation)
    at, end = found[: len(queries)], found[len(queries) :]
    answer: OffsetsForTime = {
        "topic": topic,
        "timestamp": timestamp,
        "partitions": [
            {"partition": a.partition, "offset": a.offset, "timestamp": a.timestamp}
            if a.offset >= 0
            else {"partition": a.partition, "offset": e.offset, "timestamp": None}
            for a, e in zip(at, end, strict=True)
        ],
    }
    return JsonResponse(answer)


@router.patch("/topics/{topic}", response_model=TopicDescription, tags=["topics"])
@rights(require(TOPIC, ALTER, path("topic")))
async def alter_topic(topic: TopicPath, body: TopicAlter, request: Request) -> Response:
    # Only the keys given change; a retention key given as null goes back to the broker's default.
    config = tuple((key, getattr(body, key)) for key in RETENTION_KEYS if key in body.model_fields_set)
    alteration = TopicAlteration(partitions=body.partitions, config=config)
    return JsonResponse(topic_json(await broker_of(request).admin.alter_topic(topic, alteration)))


@router.delete("/topics/{topic}", status_code=204, tags=["topics"])
@rights(require(TOPIC, ALTER, path("topic")))
async def delete_topic(topic: TopicPath, request: Request) -> Response:
    await broker_of(request).admin.delete_topic(topic)
    return Response(status_code=204)


@router.get("/transactions", response_model=TransactionList, tags=["transactions"])
@rights(cluster(DESCRIBE))  # every producer's transactions, anonymous ones included
async def list_transactions(
    request: Request,
    state: Annotated[
        str | None, Query(max_length=200, description="a state, or several comma-separated; empty: any")
    ] = None,
    older_than_ms: Annotated[int | None, Query(ge=0, le=2**62, description="started at least this long ago")] = None,
    transactional_id: Annotated[str | None, Query(max_length=255, pattern=NO_NUL, description="empty: any")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> Response:
    """Transactions, oldest first: the ones holding partitions back longest come first (Kafka's find-hanging)."""
    wanted = TransactionFilter(parse_states(state), older_than_ms, transactional_id or None, limit)
    found = await broker_of(request).admin.list_transactions(wanted)
    answer: TransactionList = {"transactions": [transaction_json(t) for t in found]}
    return JsonResponse(answer)


@router.get("/checker", response_model=CheckerStatusOut, tags=["back-check"])
@rights(cluster(DESCRIBE))  # every producer group's state
async def checker_status(request: Request) -> Response:
    status = await broker_of(request).admin.checker_status()
    answer: CheckerStatusOut = {
        "leader": status.leader,
        "lease_expires_ms": status.lease_expires_ms,
        "last_round_ms": status.last_round_ms,
        "last_retention_ms": status.last_retention_ms,
        "prepared": status.prepared,
        "groups": [
            {
                "producer_group": g.producer_group,
                "prepared": g.prepared,
                "oldest_born_ms": g.oldest_born_ms,
                "live_listeners": g.live_listeners,
            }
            for g in status.groups
        ],
    }
    return JsonResponse(answer)


def parse_states(given: str | None) -> tuple[TxnState, ...]:
    names = [name.strip() for name in (given or "").split(",") if name.strip()]
    try:
        return tuple(TxnState(name.upper()) for name in names)
    except ValueError:
        known = ", ".join(s.value for s in TxnState)
        raise ValidationFailed(f"state: {given!r} is not a transaction state ({known})") from None
