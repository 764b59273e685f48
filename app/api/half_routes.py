"""Routes for RocketMQ-style half messages and producer-group listeners: validate and delegate."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from pydantic import AnyHttpUrl, BaseModel, Field
from starlette.responses import Response

from app.api.encoding import JsonResponse, to_record
from app.api.log_routes import ERRORS, broker_of, limits_of
from app.api.models import NO_NUL, GroupName, Identifier, MessageFields, TopicName
from half_store.domain.errors import InvalidRequest
from half_store.domain.half_records import HalfMessage, Listener
from half_store.domain.half_state import HalfState
from half_store.domain.records import now_ms

router = APIRouter(prefix="/v1", responses=ERRORS)  # type: ignore[arg-type]
MessageIdPath = Annotated[str, Path(min_length=1, max_length=64, pattern=NO_NUL)]
GroupPath = Annotated[str, Path(min_length=1, max_length=255, pattern=NO_NUL)]


class HalfMessageIn(MessageFields):
    # No timestamp of the producer's: the born time decides when the checker may ask.
    topic: TopicName
    producer_group: GroupName
    transaction_id: Identifier | None = None
    check_immunity_seconds: Annotated[float, Field(ge=0, le=7 * 24 * 3600)] | None = None


class HalfPrepared(BaseModel):
    message_id: str
    transaction_id: str
    state: str


class HalfResolved(BaseModel):
    message_id: str
    state: str
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


class HalfDescription(BaseModel):
    message_id: str
    transaction_id: str
    producer_group: str
    topic: str
    partition: int
    state: str
    check_times: int
    born_timestamp: int


class HalfList(BaseModel):
    half_messages: list[HalfDescription]


class ListenerIn(BaseModel):
    callback_url: AnyHttpUrl
    ttl_seconds: Annotated[int, Field(ge=1, le=86400)] = 30
    secret: Annotated[str, Field(min_length=1, max_length=1024, pattern=NO_NUL)] | None = None


class CheckList(BaseModel):
    checks: list[dict[str, Any]]


def describe(half: HalfMessage) -> dict[str, Any]:
    body: dict[str, Any] = {
        "message_id": half.message_id,
        "transaction_id": half.transaction_id,
        "producer_group": half.producer_group,
        "topic": half.topic,
        "partition": half.partition,
        "state": half.state.value,
        "check_times": half.check_times,
        "born_timestamp": half.born_timestamp,
    }
    if half.resolution is not None:
        body["resolved_by"] = half.resolution.resolved_by
        body["resolved_at"] = half.resolution.resolved_at
        if half.resolution.offset is not None:
            body["offset"] = half.resolution.offset
    return body


def resolved(half: HalfMessage) -> dict[str, Any]:
    body: dict[str, Any] = {"message_id": half.message_id, "state": half.state.value}
    if half.state is HalfState.COMMITTED and half.resolution is not None:
        body.update(topic=half.resolution.topic, partition=half.resolution.partition, offset=half.resolution.offset)
    return body


@router.post("/half-messages", status_code=201, response_model=HalfPrepared, tags=["half messages"])
async def prepare(body: HalfMessageIn, request: Request) -> Response:
    broker = broker_of(request)
    prepared = await broker.halves.prepare(
        body.topic,
        body.producer_group,
        to_record(body, limits_of(request)),
        partition=body.partition,
        transaction_id=body.transaction_id,
        check_immunity_seconds=body.check_immunity_seconds,
    )
    half = prepared.half
    return JsonResponse(
        {"message_id": half.message_id, "transaction_id": half.transaction_id, "state": half.state.value},
        status_code=201 if prepared.created else 200,
    )


@router.post("/half-messages/{message_id}/commit", response_model=HalfResolved, tags=["half messages"])
async def commit(message_id: MessageIdPath, request: Request) -> Response:
    return JsonResponse(resolved(await broker_of(request).halves.commit(message_id)))


@router.post("/half-messages/{message_id}/rollback", response_model=HalfResolved, tags=["half messages"])
async def rollback(message_id: MessageIdPath, request: Request) -> Response:
    return JsonResponse(resolved(await broker_of(request).halves.rollback(message_id)))


@router.get("/half-messages/{message_id}", response_model=HalfDescription, tags=["half messages"])
async def get_half(message_id: MessageIdPath, request: Request) -> Response:
    return JsonResponse(describe(await broker_of(request).halves.get(message_id)))


@router.get("/half-messages", response_model=HalfList, tags=["half messages"])
async def list_halves(
    request: Request,
    producer_group: Annotated[str | None, Query(max_length=255, pattern=NO_NUL, description="empty: any")] = None,
    state: Annotated[HalfState | Literal[""] | None, Query(description="empty: any")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> Response:
    # An empty filter (`?producer_group=&state=`) means no filter, as in the contract's own example.
    found = await broker_of(request).halves.list_messages(producer_group or None, state or None, limit)
    return JsonResponse({"half_messages": [describe(h) for h in found]})


@router.put("/producer-groups/{group}/listeners/{instance_id}", tags=["back-check"])
async def register_listener(group: GroupPath, instance_id: GroupPath, body: ListenerIn, request: Request) -> Response:
    listener = Listener(group, instance_id, str(body.callback_url), body.secret, body.ttl_seconds, now_ms())
    await broker_of(request).halves.register_listener(listener)
    return JsonResponse({"producer_group": group, "instance_id": instance_id, "ttl_seconds": body.ttl_seconds})


@router.delete("/producer-groups/{group}/listeners/{instance_id}", status_code=204, tags=["back-check"])
async def remove_listener(group: GroupPath, instance_id: GroupPath, request: Request) -> Response:
    await broker_of(request).halves.remove_listener(group, instance_id)
    return Response(status_code=204)


@router.get("/producer-groups/{group}/checks", response_model=CheckList, tags=["back-check"])
async def poll_checks(
    group: GroupPath,
    request: Request,
    max_wait_ms: Annotated[int, Query(ge=0)] = 0,
    max_checks: Annotated[int, Query(ge=1, le=1000)] = 100,
    instance_id: Annotated[str, Query(min_length=1, max_length=200, pattern=NO_NUL)] = "default",
) -> Response:
    broker = broker_of(request)
    if max_wait_ms > broker.settings.max_fetch_wait_ms:
        raise InvalidRequest(f"max_wait_ms is limited to {broker.settings.max_fetch_wait_ms}")
    checks = await broker.polling.poll(group, instance_id, max_wait_ms, max_checks, client_gone=request.is_disconnected)
    return JsonResponse({"checks": checks})
