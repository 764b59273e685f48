"""Routes for topics, produce, fetch, producer ids and consumer groups: validate and delegate."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from app.api.encoding import JsonResponse, MessageLimits, message_json, to_record
from app.api.models import (
    NO_NUL,
    ErrorResponse,
    FetchResponse,
    GroupOffsets,
    GroupOffsetsCommit,
    Isolation,
    PartitionProduceRequest,
    ProduceRequest,
    ProduceResponse,
    ProducerIdResponse,
    ProducerInit,
    TopicCreate,
    TopicDescription,
    TopicList,
    TopicSummary,
)
from app.handle import BrokerHandle
from app.metrics import MESSAGES_IN, MESSAGES_OUT
from half_store.domain.constants import MAX_INT32, TOPIC_NAME_PATTERN
from half_store.domain.errors import InvalidRequest, ValidationFailed
from half_store.domain.records import OffsetCommit, PackedList, ProducerStamp, Record

DEFAULT_FETCH_MESSAGES = 500
ERRORS = {code: {"model": ErrorResponse} for code in (400, 403, 404, 409, 413, 416, 422)}
router = APIRouter(prefix="/v1", responses=ERRORS)  # type: ignore[arg-type]

TopicPath = Annotated[str, Path(pattern=TOPIC_NAME_PATTERN)]
PartitionPath = Annotated[int, Path(ge=0, le=2**31 - 1)]
GroupPath = Annotated[str, Path(min_length=1, max_length=255, pattern=NO_NUL)]


def broker_of(request: Request) -> BrokerHandle:
    return request.app.state.broker  # type: ignore[no-any-return]


def limits_of(request: Request) -> MessageLimits:
    return request.app.state.limits  # type: ignore[no-any-return]


@router.post("/topics", status_code=201, response_model=TopicSummary, tags=["topics"])
async def create_topic(body: TopicCreate, request: Request) -> Response:
    topic = await broker_of(request).log.create_topic(body.name, body.partitions)
    return JsonResponse({"name": topic.name, "partitions": topic.partitions}, status_code=201)


@router.get("/topics", response_model=TopicList, tags=["topics"])
async def list_topics(request: Request, include_system: bool = False) -> Response:
    found = await broker_of(request).log.list_topics(include_system)
    return JsonResponse({"topics": [{"name": t.name, "partitions": t.partitions} for t in found]})


@router.get("/topics/{topic}", response_model=TopicDescription, tags=["topics"])
async def describe_topic(topic: TopicPath, request: Request) -> Response:
    found, states = await broker_of(request).log.describe(topic)
    return JsonResponse(
        {
            "name": found.name,
            "partitions": [
                {
                    "partition": s.partition,
                    "log_start_offset": s.log_start_offset,
                    "high_watermark": s.high_watermark,
                    "last_stable_offset": s.last_stable_offset,
                }
                for s in states
            ],
        }
    )


@router.post("/topics/{topic}/messages", response_model=ProduceResponse, tags=["produce"])
async def produce(topic: TopicPath, body: ProduceRequest, request: Request) -> Response:
    broker = broker_of(request)
    check_batch_size(broker, len(body.messages))
    limits = limits_of(request)
    records = PackedList(Record, (to_record(m, limits, timestamp=m.timestamp) for m in body.messages))
    offsets = await broker.log.produce(topic, records, [m.partition for m in body.messages])
    MESSAGES_IN.labels(topic).inc(len(offsets))
    return JsonResponse({"offsets": [{"partition": p, "offset": o} for p, o in offsets]})


@router.post("/topics/{topic}/partitions/{partition}/messages", response_model=ProduceResponse, tags=["produce"])
async def produce_to_partition(
    topic: TopicPath, partition: PartitionPath, body: PartitionProduceRequest, request: Request
) -> Response:
    broker = broker_of(request)
    check_batch_size(broker, len(body.messages))
    if any(m.partition not in (None, partition) for m in body.messages):
        raise InvalidRequest(f"a message names another partition than {partition}")
    if body.base_sequence is not None and body.producer_id is None:
        raise InvalidRequest("base_sequence needs producer_id and producer_epoch")
    if body.base_sequence is not None and body.base_sequence + len(body.messages) - 1 > MAX_INT32:
        raise ValidationFailed(f"the batch's sequence numbers run past {MAX_INT32}; start the producer again")
    if body.transactional and (body.producer_id is None or body.producer_epoch is None):
        raise InvalidRequest("transactional needs producer_id and producer_epoch")
    if body.transactional and body.txn_id is not None:
        raise InvalidRequest("give txn_id or transactional, not both")
    limits = limits_of(request)
    records = PackedList(Record, (to_record(m, limits, timestamp=m.timestamp) for m in body.messages))
    stamp = ProducerStamp(
        body.producer_id, body.producer_epoch, body.base_sequence, body.txn_id, transactional=body.transactional
    )
    if body.txn_id is not None or body.transactional:
        result = await broker.coordinator.produce(topic, partition, records, stamp)
    else:
        result = await broker.log.produce_idempotent(topic, partition, records, stamp)
    if not result.duplicate:
        MESSAGES_IN.labels(topic).inc(result.count)
    answer: dict[str, object] = {
        "offsets": [{"partition": result.partition, "offset": o} for o in result.offsets],
        "duplicate": result.duplicate,
    }
    if body.transactional:  # the client learns which transaction its write began or joined
        answer["txn_id"] = result.txn_id
    return JsonResponse(answer)


@router.get("/topics/{topic}/partitions/{partition}/messages", response_model=FetchResponse, tags=["fetch"])
async def fetch(
    topic: TopicPath,
    partition: PartitionPath,
    request: Request,
    offset: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0,
    max_messages: Annotated[int | None, Query(ge=1, description="default: 500, or the broker's limit if lower")] = None,
    max_wait_ms: Annotated[int, Query(ge=0)] = 0,
    isolation: Isolation = "read_committed",
) -> Response:
    broker = broker_of(request)
    settings = broker.settings
    if max_messages is None:
        max_messages = min(DEFAULT_FETCH_MESSAGES, settings.max_fetch_messages)
    elif max_messages > settings.max_fetch_messages:
        raise InvalidRequest(f"max_messages is limited to {settings.max_fetch_messages}")
    if max_wait_ms > settings.max_fetch_wait_ms:
        raise InvalidRequest(f"max_wait_ms is limited to {settings.max_fetch_wait_ms}")
    result = await broker.log.fetch(
        topic, partition, offset, max_messages, max_wait_ms, isolation, client_gone=request.is_disconnected
    )
    if result.messages:
        MESSAGES_OUT.labels(topic).inc(len(result.messages))
    return JsonResponse(
        {
            "messages": [message_json(m) for m in result.messages],
            "next_offset": result.next_offset,
            "high_watermark": result.state.high_watermark,
            "last_stable_offset": result.state.last_stable_offset,
        }
    )


@router.post("/producers", response_model=ProducerIdResponse, tags=["produce"])
async def init_producer_id(request: Request, body: ProducerInit | None = None) -> Response:
    body = body or ProducerInit()
    identity = await broker_of(request).coordinator.init_producer(body.transactional_id, body.transaction_timeout_ms)
    return JsonResponse({"producer_id": identity.producer_id, "producer_epoch": identity.producer_epoch})


@router.post("/groups/{group}/offsets", tags=["groups"])
async def commit_group_offsets(group: GroupPath, body: GroupOffsetsCommit, request: Request) -> Response:
    commits = [OffsetCommit(o.topic, o.partition, o.offset, o.metadata) for o in body.offsets]
    await broker_of(request).log.commit_group_offsets(group, commits)
    return JsonResponse({"group": group, "committed": len(commits)})


@router.get("/groups/{group}/offsets", response_model=GroupOffsets, tags=["groups"])
async def get_group_offsets(group: GroupPath, request: Request) -> Response:
    found = await broker_of(request).log.group_offsets(group)
    return JsonResponse(
        {
            "offsets": [
                {"topic": o.topic, "partition": o.partition, "offset": o.offset, "metadata": o.metadata, "lag": o.lag}
                for o in found
            ]
        }
    )


def check_batch_size(broker: BrokerHandle, count: int) -> None:
    if count > broker.settings.max_batch_messages:
        raise InvalidRequest(f"{count} messages in one request is over the limit of {broker.settings.max_batch_messages}")
