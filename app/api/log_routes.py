"""Routes for topics, produce, fetch, producer ids and consumer groups: validate and delegate."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from app.api.arrow_fetch import ARROW_STREAM, arrow_response, negotiate
from app.api.authorize import principal_of
from app.api.encoding import JsonResponse, message_json, to_record
from app.api.fast_bodies import DecodedProduce, RawBody, decode_produce, raw_records
from app.api.long_polls import long_poll_slot
from app.api.models import (
    NO_NUL,
    ErrorResponse,
    FetchResponse,
    GroupOffsetOut,
    GroupOffsets,
    GroupOffsetsCommit,
    GroupOffsetsCommitted,
    Isolation,
    MemberFields,
    PartitionProduceRequest,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    ProducerIdResponse,
    ProducerInit,
    TopicCreate,
    TopicList,
    TopicSummary,
)
from app.api.rights import (
    ALTER,
    ANONYMOUS_TRANSACTION,
    GROUP,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
    body,
    body_list,
    listing,
    path,
    producer,
    require,
    rights,
    transaction,
)
from app.api.tracing import trace_context
from app.handle import BrokerHandle
from app.metrics import FETCH_ANSWERS, MESSAGES_IN, MESSAGES_OUT
from half_store.domain.constants import MAX_INT32, TOPIC_NAME_PATTERN
from half_store.domain.errors import ValidationFailed
from half_store.domain.group_records import MemberRef
from half_store.domain.message_limits import MessageLimits
from half_store.domain.records import OffsetCommit, PackedList, ProducerStamp, Record

DEFAULT_FETCH_MESSAGES = 500
# Every error a /v1 route can answer with (401/403: no token or no right; 415: a body that is not JSON;
# 429: too many long polls waiting; 503: the database is unreachable).
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 409, 413, 415, 416, 422, 429, 500, 503)
}
router = APIRouter(prefix="/v1", responses=ERRORS)

TopicPath = Annotated[str, Path(pattern=TOPIC_NAME_PATTERN)]
PartitionPath = Annotated[int, Path(ge=0, le=2**31 - 1)]
GroupPath = Annotated[str, Path(min_length=1, max_length=255, pattern=NO_NUL)]


def broker_of(request: Request) -> BrokerHandle:
    return request.app.state.broker  # type: ignore[no-any-return]


def limits_of(request: Request) -> MessageLimits:
    return request.app.state.limits  # type: ignore[no-any-return]


@router.post("/topics", status_code=201, response_model=TopicSummary, tags=["topics"])
@rights(require(TOPIC, ALTER, body("name")))
async def create_topic(body: TopicCreate, request: Request) -> Response:
    topic = await broker_of(request).log.create_topic(body.name, body.partitions)
    answer: TopicSummary = {"name": topic.name, "partitions": topic.partitions}
    return JsonResponse(answer, status_code=201)


@router.get("/topics", response_model=TopicList, tags=["topics"])
@rights(listing("topics", {TOPIC: "name"}))
async def list_topics(request: Request, include_system: bool = False) -> Response:
    found = await broker_of(request).log.list_topics(include_system)
    answer: TopicList = {"topics": [{"name": t.name, "partitions": t.partitions} for t in found]}
    return JsonResponse(answer)


@router.post("/topics/{topic}/messages", response_model=ProduceResponse, tags=["produce"])
@rights(require(TOPIC, WRITE, path("topic")))
async def produce(topic: TopicPath, body: ProduceRequest, request: Request) -> Response:
    check_batch_size(broker_of(request), len(body.messages))
    limits, trace = limits_of(request), trace_context(request)
    records = PackedList(Record, (to_record(m, limits, timestamp=m.timestamp, trace=trace) for m in body.messages))
    return await _append(request, topic, records, [m.partition for m in body.messages])


async def produce_raw(topic: str, body: DecodedProduce, request: Request) -> Response:
    """:func:`produce` for a body the direct path decoded with app/api/fast_bodies.py: values stored as sent."""
    check_batch_size(broker_of(request), len(body.messages))
    records = raw_records(body, limits_of(request), trace_context(request))
    return await _append(request, topic, records, [m.partition for m in body.messages])


async def _append(request: Request, topic: str, records: PackedList[Record], partitions: list[int | None]) -> Response:
    offsets = await broker_of(request).log.produce(topic, records, partitions)
    MESSAGES_IN.labels(topic).inc(len(offsets))
    answer: ProduceResponse = {"offsets": [{"partition": p, "offset": o} for p, o in offsets]}
    return JsonResponse(answer)


@router.post(
    "/topics/{topic}/partitions/{partition}/messages", response_model=PartitionProduceResponse, tags=["produce"]
)
@rights(
    require(TOPIC, WRITE, path("topic")),
    transaction(body("txn_id", optional=True), WRITE),
    producer("producer_id", WRITE, when="transactional", anonymous=ANONYMOUS_TRANSACTION),
)
async def produce_to_partition(
    topic: TopicPath, partition: PartitionPath, body: PartitionProduceRequest, request: Request
) -> Response:
    broker = broker_of(request)
    check_batch_size(broker, len(body.messages))
    if any(m.partition not in (None, partition) for m in body.messages):
        raise ValidationFailed(f"a message names another partition than {partition}")
    if body.base_sequence is not None and body.producer_id is None:
        raise ValidationFailed("base_sequence needs producer_id and producer_epoch")
    if body.base_sequence is not None and body.base_sequence + len(body.messages) - 1 > MAX_INT32:
        raise ValidationFailed(f"the batch's sequence numbers run past {MAX_INT32}; start the producer again")
    if body.transactional and (body.producer_id is None or body.producer_epoch is None):
        raise ValidationFailed("transactional needs producer_id and producer_epoch")
    if body.transactional and body.txn_id is not None:
        raise ValidationFailed("give txn_id or transactional, not both")
    limits = limits_of(request)
    trace = trace_context(request)
    records = PackedList(Record, (to_record(m, limits, timestamp=m.timestamp, trace=trace) for m in body.messages))
    stamp = ProducerStamp(
        body.producer_id, body.producer_epoch, body.base_sequence, body.txn_id, transactional=body.transactional
    )
    if body.txn_id is not None or body.transactional:
        result = await broker.coordinator.produce(topic, partition, records, stamp, principal_of(request))
    else:
        result = await broker.log.produce_idempotent(topic, partition, records, stamp, principal_of(request))
    if not result.duplicate:
        MESSAGES_IN.labels(topic).inc(result.count)
    answer: PartitionProduceResponse = {
        "offsets": [{"partition": result.partition, "offset": o} for o in result.offsets],
        "duplicate": result.duplicate,
    }
    if body.transactional:  # the client learns which transaction its write began or joined
        assert result.txn_id is not None, "a transactional batch is always written into a transaction"
        answer["txn_id"] = result.txn_id
    return JsonResponse(answer)


ARROW_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {ARROW_STREAM: {}},
        "description": "JSON, or with `Accept: application/vnd.apache.arrow.stream` an Arrow IPC stream of the "
        "messages (columns topic, partition, offset, timestamp, key, value, value_base64, headers; see docs/arrow.md) "
        "with the page's positions in X-Halfmq-Next-Offset, X-Halfmq-High-Watermark and X-Halfmq-Last-Stable-Offset",
    },
}


@router.get(
    "/topics/{topic}/partitions/{partition}/messages",
    response_model=FetchResponse,
    tags=["fetch"],
    responses=ARROW_ANSWER,
)
@rights(require(TOPIC, READ, path("topic")))
async def fetch(
    topic: TopicPath,
    partition: PartitionPath,
    request: Request,
    offset: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0,
    max_messages: Annotated[int | None, Query(ge=1, description="default: 500, or the broker's limit if lower")] = None,
    max_wait_ms: Annotated[int, Query(ge=0)] = 0,
    isolation: Isolation = "read_committed",
    tag: Annotated[
        str | None,
        Query(max_length=4096, description="A tag filter ('*', 'TagA || TagB'): only messages whose tag it keeps"),
    ] = None,
) -> Response:
    broker = broker_of(request)
    settings = broker.settings
    if max_messages is None:
        max_messages = min(DEFAULT_FETCH_MESSAGES, settings.max_fetch_messages)
    elif max_messages > settings.max_fetch_messages:
        raise ValidationFailed(f"max_messages is limited to {settings.max_fetch_messages}")
    if max_wait_ms > settings.max_fetch_wait_ms:
        raise ValidationFailed(f"max_wait_ms is limited to {settings.max_fetch_wait_ms}")
    answer_format = negotiate(request.headers.get("accept"))
    with long_poll_slot(request, max_wait_ms):
        result = await broker.log.fetch(
            topic, partition, offset, max_messages, max_wait_ms, isolation, client_gone=request.is_disconnected,
            tags=tag,
        )
    if result.messages:
        MESSAGES_OUT.labels(topic).inc(len(result.messages))
    FETCH_ANSWERS.labels(answer_format).inc()
    if answer_format == "arrow":
        return arrow_response(result)
    answer: FetchResponse = {
        "messages": [message_json(m) for m in result.messages],
        "next_offset": result.next_offset,
        "high_watermark": result.state.high_watermark,
        "last_stable_offset": result.state.last_stable_offset,
    }
    return JsonResponse(answer)


@router.post("/producers", response_model=ProducerIdResponse, tags=["produce"])
@rights(require(TRANSACTIONAL_ID, WRITE, body("transactional_id", optional=True)))
async def init_producer_id(request: Request, body: ProducerInit | None = None) -> Response:
    body = body or ProducerInit()
    identity = await broker_of(request).coordinator.init_producer(
        body.transactional_id, body.transaction_timeout_ms, principal_of(request)
    )
    answer: ProducerIdResponse = {"producer_id": identity.producer_id, "producer_epoch": identity.producer_epoch}
    return JsonResponse(answer)


@router.post("/groups/{group}/offsets", response_model=GroupOffsetsCommitted, tags=["groups"])
@rights(require(GROUP, READ, path("group")), require(TOPIC, READ, body_list("offsets", "topic")))
async def commit_group_offsets(group: GroupPath, body: GroupOffsetsCommit, request: Request) -> Response:
    commits = [OffsetCommit(o.topic, o.partition, o.offset, o.metadata) for o in body.offsets]
    await broker_of(request).log.commit_group_offsets(group, commits, member_ref(body))
    answer: GroupOffsetsCommitted = {"group": group, "committed": len(commits)}
    return JsonResponse(answer)


@router.get("/groups/{group}/offsets", response_model=GroupOffsets, tags=["groups"])
@rights(require(GROUP, READ, path("group")), listing("offsets", {TOPIC: "topic"}, READ))
async def get_group_offsets(group: GroupPath, request: Request) -> Response:
    found = await broker_of(request).log.group_offsets(group)
    offsets: list[GroupOffsetOut] = [
        {
            "topic": o.topic,
            "partition": o.partition,
            "offset": o.offset,
            "metadata": o.metadata,
            "lag": o.lag,
            "log_start_offset": o.log_start_offset,
            "below_log_start": o.below_log_start,
        }
        for o in found
    ]
    answer: GroupOffsets = {"offsets": offsets}
    return JsonResponse(answer)


def member_ref(body: MemberFields) -> MemberRef | None:
    if body.member_id is None or body.member_epoch is None:
        return None
    return MemberRef(body.member_id, body.member_epoch)


def check_batch_size(broker: BrokerHandle, count: int) -> None:
    if count > broker.settings.max_batch_messages:
        raise ValidationFailed(f"{count} messages in one request is over the limit of {broker.settings.max_batch_messages}")


# Routes whose bodies the direct path may decode itself (app/api/fast_bodies.py), and the
# twin it then calls: the same route with the same answers, on the decoded body.
RAW_BODIES: dict[Any, RawBody] = {produce: RawBody(decode_produce, produce_raw)}
