"""Routes for share groups (queue consumption) and acknowledgements inside transactions: validate and delegate."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from fastapi import APIRouter, Path, Request
from pydantic import Field
from starlette.responses import Response
from typing_extensions import TypedDict

from app.api.encoding import JsonResponse, message_json
from app.api.log_routes import ERRORS, broker_of, check_batch_size
from app.api.long_polls import long_poll_slot
from app.api.models import MessageOut, Strict, TopicName, answer_shape
from app.api.rights import (
    ALTER,
    DESCRIBE,
    GROUP,
    ITEM_ITSELF,
    READ,
    TOPIC,
    WRITE,
    body,
    body_list,
    body_names,
    listing,
    path,
    receipt_topics,
    require,
    rights,
    transaction,
)
from app.api.txn_routes import TxnPath
from app.handle import BrokerHandle
from app.metrics import MESSAGES_OUT
from half_store.domain.constants import SHARE_GROUP_PATTERN
from half_store.domain.errors import ValidationFailed
from half_store.domain.share_records import Acknowledgement, ReceiptResult
from half_store.domain.share_state import AckType
from half_store.settings import Settings

router = APIRouter(prefix="/v1", responses=ERRORS)

ShareGroupPath = Annotated[
    str, Path(pattern=SHARE_GROUP_PATTERN, description="^[A-Za-z0-9._-]{1,245}$ (its dead letters go to DLQ.{group})")
]
ShareGroupName = Annotated[str, Field(pattern=SHARE_GROUP_PATTERN)]
# A receipt is any string: one the broker did not sign is answered per ack (UNKNOWN_RECEIPT), not refused.
ReceiptIn = str
DEFAULT_RECEIVE_MESSAGES = 100
DEFAULT_LOCK_MS = 30_000


class AckIn(Strict):
    receipt: ReceiptIn
    type: Literal["ACCEPT", "RELEASE", "REJECT"]
    delay_ms: Annotated[int, Field(ge=0)] | None = Field(None, description="RELEASE only: deliverable again after this")


class ShareReceive(Strict):
    topic: TopicName
    max_messages: Annotated[int, Field(ge=1)] = DEFAULT_RECEIVE_MESSAGES
    lock_ms: Annotated[int, Field(ge=1)] = DEFAULT_LOCK_MS
    max_wait_ms: Annotated[int, Field(ge=0)] = 0
    ordered: bool = Field(
        False,
        description="Per-key order: while a message of a key is locked (or waits to be redelivered), no later "
        "message of that key is handed out. Use it on every consumer of the group.",
    )
    tag: Annotated[str, Field(max_length=4096)] | None = Field(
        None,
        description="A tag filter: '*' (everything), 'TagA' or 'TagA || TagB'. Messages whose tag "
        "(header rocketmq.tag) it refuses are passed over by the group: never delivered to it. "
        "Give every consumer of the group the same filter, as RocketMQ does.",
    )
    acks: list[AckIn] = Field(
        default_factory=list,
        description="Acknowledgements of earlier messages, applied first (KIP-932's ShareFetch carries them the "
        "same way): a consumer's loop then costs one request and one commit per batch. Answered in 'results'.",
    )


@answer_shape
class ReceivedOut(MessageOut):
    receipt: str
    delivery_count: int
    lock_expires_ms: int


@answer_shape
class ReceiptOutcome(TypedDict):
    receipt: str
    ok: bool
    error: NotRequired[Annotated[str, Field(description="RECEIPT_EXPIRED or UNKNOWN_RECEIPT, when not ok")]]
    lock_expires_ms: NotRequired[Annotated[int, Field(description="extend: when the renewed lock runs out")]]


@answer_shape
class ShareReceived(TypedDict):
    messages: list[ReceivedOut]
    results: NotRequired[Annotated[list[ReceiptOutcome], Field(description="With acks: what became of each, in order")]]


class ShareAcks(Strict):
    acks: Annotated[list[AckIn], Field(min_length=1)]


class ShareExtend(Strict):
    receipts: Annotated[list[ReceiptIn], Field(min_length=1)]
    lock_ms: Annotated[int, Field(ge=1)] = DEFAULT_LOCK_MS


class TransactionAcks(Strict):
    group: ShareGroupName
    receipts: Annotated[list[ReceiptIn], Field(min_length=1)]


@answer_shape
class ReceiptOutcomes(TypedDict):
    results: list[ReceiptOutcome]


@answer_shape
class SharePartitionOut(TypedDict):
    partition: int
    start_offset: int
    end_offset: int
    available: int
    locked: int
    accepted: int
    dlq: int


@answer_shape
class ShareTopicOut(TypedDict):
    topic: str
    available: int
    locked: int
    accepted: int
    dlq: int
    partitions: list[SharePartitionOut]


@answer_shape
class ShareGroupDescription(TypedDict):
    group: str
    topics: list[ShareTopicOut]


@answer_shape
class ShareGroupListed(TypedDict):
    group: str
    topics: Annotated[list[str], Field(description="The topics it has received from")]
    locked: Annotated[int, Field(description="Records locked now, by a consumer or a transaction")]
    accepted: int
    dlq: int


@answer_shape
class ShareGroupList(TypedDict):
    share_groups: list[ShareGroupListed]


@router.post("/share-groups/{group}/receive", response_model=ShareReceived, tags=["share groups"])
@rights(require(GROUP, READ, path("group")), require(TOPIC, READ, body("topic")))
async def receive(group: ShareGroupPath, body: ShareReceive, request: Request) -> Response:
    broker = broker_of(request)
    settings = broker.settings
    check_lock_ms(settings, body.lock_ms)
    if body.max_messages > settings.share_max_messages:
        raise ValidationFailed(f"max_messages is limited to {settings.share_max_messages}")
    if body.max_wait_ms > settings.max_fetch_wait_ms:
        raise ValidationFailed(f"max_wait_ms is limited to {settings.max_fetch_wait_ms}")
    acks = acknowledgements(broker, body.acks)
    with long_poll_slot(request, body.max_wait_ms):
        received = await broker.shares.receive(
            group, body.topic, body.max_messages, body.lock_ms, body.max_wait_ms, body.ordered, acks,
            client_gone=request.is_disconnected, tags=body.tag,
        )
    if received.messages:
        MESSAGES_OUT.labels(body.topic).inc(len(received.messages))
    messages: list[ReceivedOut] = [
        {
            **message_json(m),
            "receipt": m.receipt,
            "delivery_count": m.delivery_count,
            "lock_expires_ms": m.lock_expires_ms,
        }
        for m in received.messages
    ]
    answer: ShareReceived = {"messages": messages}
    if body.acks:
        answer["results"] = [outcome(result) for result in received.results]
    return JsonResponse(answer)


@router.post("/share-groups/{group}/acks", response_model=ReceiptOutcomes, tags=["share groups"])
@rights(require(GROUP, READ, path("group")), receipt_topics(body_list("acks", "receipt"), READ))
async def acknowledge(group: ShareGroupPath, body: ShareAcks, request: Request) -> Response:
    broker = broker_of(request)
    return outcomes(await broker.shares.acknowledge(group, acknowledgements(broker, body.acks)))


@router.post("/share-groups/{group}/extend", response_model=ReceiptOutcomes, tags=["share groups"])
@rights(require(GROUP, READ, path("group")), receipt_topics(body_names("receipts"), READ))
async def extend(group: ShareGroupPath, body: ShareExtend, request: Request) -> Response:
    broker = broker_of(request)
    check_batch_size(broker, len(body.receipts))
    check_lock_ms(broker.settings, body.lock_ms)
    return outcomes(await broker.shares.extend(group, body.receipts, body.lock_ms))


@router.get("/share-groups", response_model=ShareGroupList, tags=["share groups"])
# A group's topics the caller may not describe are left out, as the group's describe leaves them.
@rights(listing("share_groups", {GROUP: "group"}), listing("topics", {TOPIC: ITEM_ITSELF}, within="share_groups"))
async def list_share_groups(request: Request) -> Response:
    """Every share group that has received from some topic (those the caller may describe, with their topics)."""
    found = await broker_of(request).shares.list_groups()
    answer: ShareGroupList = {
        "share_groups": [
            {"group": g.group, "topics": list(g.topics), "locked": g.locked, "accepted": g.accepted, "dlq": g.dead_lettered}
            for g in found
        ]
    }
    return JsonResponse(answer)


@router.delete("/share-groups/{group}", status_code=204, tags=["share groups"])
@rights(require(GROUP, ALTER, path("group")))
async def delete_share_group(group: ShareGroupPath, request: Request) -> Response:
    """Forget the group's positions and in-flight records: 404 if it never received, 409 SHARE_GROUP_IN_USE while
    a record is locked. Its DLQ topic stays (delete it as a topic)."""
    await broker_of(request).shares.delete_group(group)
    return Response(status_code=204)


@router.get("/share-groups/{group}", response_model=ShareGroupDescription, tags=["share groups"])
@rights(require(GROUP, DESCRIBE, path("group")), listing("topics", {TOPIC: "topic"}))
async def describe(group: ShareGroupPath, request: Request) -> Response:
    views = await broker_of(request).shares.describe(group)
    answer: ShareGroupDescription = {
        "group": group,
        "topics": [
            {
                "topic": view.topic,
                "available": view.available,
                "locked": view.locked,
                "accepted": view.accepted,
                "dlq": view.dead_lettered,
                "partitions": [
                    {
                        "partition": p.partition,
                        "start_offset": p.start_offset,
                        "end_offset": p.end_offset,
                        "available": p.available,
                        "locked": p.locked,
                        "accepted": p.accepted,
                        "dlq": p.dead_lettered,
                    }
                    for p in view.partitions
                ],
            }
            for view in views
        ],
    }
    return JsonResponse(answer)


@router.post("/transactions/{txn_id}/acks", response_model=ReceiptOutcomes, tags=["transactions"])
@rights(
    transaction(path("txn_id"), WRITE),
    require(GROUP, READ, body("group")),
    receipt_topics(body_names("receipts"), READ),
)
async def acknowledge_in_transaction(txn_id: TxnPath, body: TransactionAcks, request: Request) -> Response:
    """The receipts' messages stay locked while the transaction is open; accepted if it commits, released
    (delivery counts kept) if it aborts or times out. A receipt answered ``ok: false`` is not part of it."""
    broker = broker_of(request)
    check_batch_size(broker, len(body.receipts))
    return outcomes(await broker.shares.acknowledge_in_transaction(txn_id, body.group, body.receipts))


def check_lock_ms(settings: Settings, lock_ms: int) -> None:
    if not settings.share_min_lock_ms <= lock_ms <= settings.share_max_lock_ms:
        raise ValidationFailed(f"lock_ms must lie in {settings.share_min_lock_ms}..{settings.share_max_lock_ms}")


def acknowledgements(broker: BrokerHandle, acks: list[AckIn]) -> list[Acknowledgement]:
    check_batch_size(broker, len(acks))
    checked = []
    for ack in acks:
        if ack.delay_ms is not None and ack.type != "RELEASE":
            raise ValidationFailed("delay_ms goes with RELEASE only")
        if ack.delay_ms is not None and ack.delay_ms > broker.settings.share_max_lock_ms:
            raise ValidationFailed(f"delay_ms is limited to {broker.settings.share_max_lock_ms}")
        checked.append(Acknowledgement(ack.receipt, AckType(ack.type), ack.delay_ms or 0))
    return checked


def outcome(result: ReceiptResult) -> ReceiptOutcome:
    answer: ReceiptOutcome = {"receipt": result.receipt, "ok": result.ok}
    if result.error is not None:
        answer["error"] = result.error
    if result.lock_expires_ms is not None:
        answer["lock_expires_ms"] = result.lock_expires_ms
    return answer


def outcomes(results: list[ReceiptResult]) -> Response:
    answer: ReceiptOutcomes = {"results": [outcome(result) for result in results]}
    return JsonResponse(answer)
