"""Routes for RocketMQ-style half messages and producer-group listeners: validate and delegate."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal, NotRequired, cast

import orjson
from fastapi import APIRouter, Path, Query, Request
from pydantic import Field
from starlette.responses import Response
from typing_extensions import TypedDict

from app.api.encoding import JsonResponse, json_text, to_record
from app.api.log_routes import ERRORS, broker_of, limits_of
from app.api.long_polls import long_poll_slot
from app.api.models import NO_NUL, GroupName, Identifier, MessageFields, Strict, TopicName, answer_shape
from app.api.rights import (
    DESCRIBE,
    PRODUCER_GROUP,
    READ,
    TOPIC,
    WRITE,
    body,
    half_message,
    listing,
    path,
    redacted,
    require,
    rights,
)
from app.api.tracing import trace_context
from half_store.domain.constants import CHECK_HISTORY_KEPT, VALUE_BINARY
from half_store.domain.errors import ValidationFailed
from half_store.domain.half_records import CheckPayload, HalfMessage, Listener
from half_store.domain.half_state import HalfState
from half_store.domain.records import StoredMessage, now_ms

router = APIRouter(prefix="/v1", responses=ERRORS)
MessageIdPath = Annotated[str, Path(min_length=1, max_length=64, pattern=NO_NUL)]
GroupPath = Annotated[str, Path(min_length=1, max_length=255, pattern=NO_NUL)]


class HalfMessageIn(MessageFields):
    # No timestamp of the producer's: the born time decides when the checker may ask.
    topic: TopicName
    producer_group: GroupName
    transaction_id: Identifier | None = None
    check_immunity_seconds: Annotated[float, Field(ge=0, le=7 * 24 * 3600)] | None = None


@answer_shape
class HalfPrepared(TypedDict):
    message_id: str
    transaction_id: str
    state: HalfState


@answer_shape
class HalfResolved(TypedDict):
    """A commit also says where the message went."""

    message_id: str
    state: HalfState
    topic: NotRequired[str]
    partition: NotRequired[int]
    offset: NotRequired[int]


@answer_shape
class HalfDescription(TypedDict):
    message_id: str
    transaction_id: str
    producer_group: str
    topic: str
    partition: Annotated[int, Field(description="The partition of topic the message goes to when committed")]
    state: HalfState
    check_times: int
    born_timestamp: int
    offset: Annotated[int | None, Field(description="Its offset in topic/partition once COMMITTED, else null")]
    resolved_by: Annotated[
        str | None,
        Field(
            description="Who resolved it: its producer (commit, rollback), or the checker (a back-check's answer, "
            "or the discard after HALFMQ_CHECK_MAX checks); null while PREPARED"
        ),
    ]
    resolved_at: Annotated[int | None, Field(description="When it was resolved (ms since the epoch); null while PREPARED")]


@answer_shape
class HalfBody(TypedDict):
    """The message itself: ``topic:read`` on its topic, else ``body_hidden``; absent once retention deleted it."""

    key: NotRequired[str | None]
    headers: NotRequired[dict[str, str]]
    value: NotRequired[Any]
    value_base64: NotRequired[Annotated[str, Field(description="A binary value, as base64")]]
    body_hidden: NotRequired[
        Annotated[bool, Field(description="true when the caller may not read the topic: no key, value, headers")]
    ]


@answer_shape
class HalfListed(HalfDescription, HalfBody):
    """A list's item: the value cut to 256 characters (a cut JSON value as the start of its JSON text)."""

    value_truncated: NotRequired[Annotated[bool, Field(description="value or value_base64 was cut to 256 characters")]]


@answer_shape
class CheckOut(TypedDict):
    at_ms: int
    instance_id: Annotated[str | None, Field(description="The listener asked; null when none was live (answer ERROR)")]
    answer: Annotated[str | None, Field(description="COMMIT|ROLLBACK|UNKNOWN|ERROR|TIMEOUT; null while awaited")]
    latency_ms: int | None


@answer_shape
class HalfDetail(HalfDescription, HalfBody):
    checks: Annotated[list[CheckOut], Field(description=f"The last {CHECK_HISTORY_KEPT} back-checks, oldest first")]


@answer_shape
class HalfList(TypedDict):
    half_messages: list[HalfListed]


class ListenerIn(Strict):
    # Any string: whether it is an acceptable callback (scheme, host, where it resolves) is the
    # callback guard's one decision, answered 422 CALLBACK_NOT_ALLOWED whatever the reason.
    callback_url: Annotated[str, Field(min_length=1, max_length=2048, pattern=NO_NUL)]
    ttl_seconds: Annotated[int, Field(ge=1, le=86400)] = 30
    secret: Annotated[str, Field(min_length=1, max_length=1024, pattern=NO_NUL)] | None = None


@answer_shape
class ListenerRegistered(TypedDict):
    producer_group: str
    instance_id: str
    ttl_seconds: int


@answer_shape
class CheckList(TypedDict):
    checks: list[CheckPayload]


def describe(half: HalfMessage) -> HalfDescription:
    resolution = half.resolution
    return {
        "message_id": half.message_id,
        "transaction_id": half.transaction_id,
        "producer_group": half.producer_group,
        "topic": half.topic,
        "partition": half.partition,
        "state": half.state,
        "check_times": half.check_times,
        "born_timestamp": half.born_timestamp,
        # A discarded body went to TRANS_CHECK_MAX_TIME_TOPIC: its offset there is not one in `topic`.
        "offset": resolution.offset if resolution and half.state is HalfState.COMMITTED else None,
        "resolved_by": resolution.resolved_by if resolution else None,
        "resolved_at": resolution.resolved_at if resolution else None,
    }


PREVIEW_CHARS = 256  # of a value in a list: enough to recognise a message, not a page of it
BODY_FIELDS = ("key", "headers", "value", "value_base64", "value_truncated")
# A half message's body is its topic's data: seeing it needs the read right a fetch of that topic needs.
BODY_RIGHT = (TOPIC, "topic", READ, BODY_FIELDS, "body_hidden")


def body_fields(body: StoredMessage | None, *, preview: bool) -> dict[str, Any]:
    """A half message's key, value and headers (:class:`HalfBody`; none once retention deleted them).

    A preview (a list's item) cuts the value to :data:`PREVIEW_CHARS`: a string value to
    its first characters, any other JSON value to the start of its JSON text (a string
    then), a binary one to the start of its base64; ``value_truncated`` says so.
    """
    if body is None:
        return {}
    fields: dict[str, Any] = {"key": body.key, "headers": json_text(body.headers) if body.headers else {}}
    cut = False
    if body.value_kind == VALUE_BINARY:
        encoded = base64.b64encode(body.value).decode()
        cut = preview and len(encoded) > PREVIEW_CHARS
        fields["value_base64"] = encoded[:PREVIEW_CHARS] if cut else encoded
    elif not preview or len(body.value) <= PREVIEW_CHARS:  # bytes ≥ characters: short enough either way
        fields["value"] = json_text(body.value)
    else:
        value = orjson.loads(body.value)
        text = value if isinstance(value, str) else body.value.decode()
        cut = len(text) > PREVIEW_CHARS
        fields["value"] = text[:PREVIEW_CHARS] if cut else value
    if preview:
        fields["value_truncated"] = cut
    return fields


def resolved(half: HalfMessage) -> HalfResolved:
    body: HalfResolved = {"message_id": half.message_id, "state": half.state}
    resolution = half.resolution
    if half.state is HalfState.COMMITTED and resolution is not None:
        topic, partition, offset = resolution.topic, resolution.partition, resolution.offset
        if topic is not None and partition is not None and offset is not None:  # where a committed message went
            body["topic"], body["partition"], body["offset"] = topic, partition, offset
    return body


@router.post(
    "/half-messages",
    status_code=201,
    response_model=HalfPrepared,
    responses={200: {"model": HalfPrepared, "description": "The one prepared before with this transaction_id"}},
    tags=["half messages"],
)
@rights(require(PRODUCER_GROUP, WRITE, body("producer_group")), require(TOPIC, WRITE, body("topic")))
async def prepare(body: HalfMessageIn, request: Request) -> Response:
    broker = broker_of(request)
    prepared = await broker.halves.prepare(
        body.topic,
        body.producer_group,
        to_record(body, limits_of(request), trace=trace_context(request)),
        partition=body.partition,
        transaction_id=body.transaction_id,
        check_immunity_seconds=body.check_immunity_seconds,
    )
    half = prepared.half
    answer: HalfPrepared = {"message_id": half.message_id, "transaction_id": half.transaction_id, "state": half.state}
    return JsonResponse(answer, status_code=201 if prepared.created else 200)


@router.post("/half-messages/{message_id}/commit", response_model=HalfResolved, tags=["half messages"])
@rights(half_message("message_id", WRITE))
async def commit(message_id: MessageIdPath, request: Request) -> Response:
    return JsonResponse(resolved(await broker_of(request).halves.commit(message_id)))


@router.post("/half-messages/{message_id}/rollback", response_model=HalfResolved, tags=["half messages"])
@rights(half_message("message_id", WRITE))
async def rollback(message_id: MessageIdPath, request: Request) -> Response:
    return JsonResponse(resolved(await broker_of(request).halves.rollback(message_id)))


@router.get("/half-messages/{message_id}", response_model=HalfDetail, tags=["half messages"])
@rights(half_message("message_id", DESCRIBE), redacted(None, *BODY_RIGHT))
async def get_half(message_id: MessageIdPath, request: Request) -> Response:
    """The half message, its back-checks and its key, value and headers (these with ``topic:read`` only)."""
    halves = broker_of(request).halves
    half, checks = await halves.describe(message_id)
    bodies = await halves.bodies([half])
    history: list[CheckOut] = [
        {
            "at_ms": c.at_ms,
            "instance_id": c.instance_id,
            "answer": None if c.answer is None else c.answer.value,
            "latency_ms": c.latency_ms,
        }
        for c in checks
    ]
    answer = cast(HalfDetail, {**describe(half), **body_fields(bodies.get(message_id), preview=False), "checks": history})
    return JsonResponse(answer)


@router.post("/half-messages/{message_id}/recheck", response_model=HalfDescription, tags=["half messages"])
@rights(half_message("message_id", WRITE))
async def recheck(message_id: MessageIdPath, request: Request) -> Response:
    """DISCARDED → PREPARED with check_times 0: the checker asks the producer group again.

    409 ALREADY_RESOLVED from any other state.
    """
    return JsonResponse(describe(await broker_of(request).halves.recheck(message_id)))


@router.get("/half-messages", response_model=HalfList, tags=["half messages"])
@rights(listing("half_messages", {PRODUCER_GROUP: "producer_group", TOPIC: "topic"}), redacted("half_messages", *BODY_RIGHT))
async def list_halves(
    request: Request,
    producer_group: Annotated[str | None, Query(max_length=255, pattern=NO_NUL, description="empty: any")] = None,
    state: Annotated[HalfState | Literal[""] | None, Query(description="empty: any")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> Response:
    # An empty filter (`?producer_group=&state=`) means no filter, as in the contract's own example.
    halves = broker_of(request).halves
    found = await halves.list_messages(producer_group or None, state or None, limit)
    bodies = await halves.bodies(found)
    listed = [cast(HalfListed, {**describe(h), **body_fields(bodies.get(h.message_id), preview=True)}) for h in found]
    answer: HalfList = {"half_messages": listed}
    return JsonResponse(answer)


@router.put("/producer-groups/{group}/listeners/{instance_id}", response_model=ListenerRegistered, tags=["back-check"])
@rights(require(PRODUCER_GROUP, WRITE, path("group")))
async def register_listener(group: GroupPath, instance_id: GroupPath, body: ListenerIn, request: Request) -> Response:
    listener = Listener(group, instance_id, body.callback_url, body.secret, body.ttl_seconds, now_ms())
    await broker_of(request).halves.register_listener(listener)
    answer: ListenerRegistered = {"producer_group": group, "instance_id": instance_id, "ttl_seconds": body.ttl_seconds}
    return JsonResponse(answer)


@router.delete("/producer-groups/{group}/listeners/{instance_id}", status_code=204, tags=["back-check"])
@rights(require(PRODUCER_GROUP, WRITE, path("group")))
async def remove_listener(group: GroupPath, instance_id: GroupPath, request: Request) -> Response:
    await broker_of(request).halves.remove_listener(group, instance_id)
    return Response(status_code=204)


@router.get("/producer-groups/{group}/checks", response_model=CheckList, tags=["back-check"])
@rights(require(PRODUCER_GROUP, WRITE, path("group")))
async def poll_checks(
    group: GroupPath,
    request: Request,
    max_wait_ms: Annotated[int, Query(ge=0)] = 0,
    max_checks: Annotated[int, Query(ge=1, le=1000)] = 100,
    instance_id: Annotated[str, Query(min_length=1, max_length=200, pattern=NO_NUL)] = "default",
) -> Response:
    broker = broker_of(request)
    if max_wait_ms > broker.settings.max_fetch_wait_ms:
        raise ValidationFailed(f"max_wait_ms is limited to {broker.settings.max_fetch_wait_ms}")
    with long_poll_slot(request, max_wait_ms):
        checks = await broker.polling.poll(group, instance_id, max_wait_ms, max_checks, client_gone=request.is_disconnected)
    answer: CheckList = {"checks": checks}
    return JsonResponse(answer)
