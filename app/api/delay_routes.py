"""Routes for delay messages: schedule them, and see what waits (validate and delegate)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import Field, model_validator
from starlette.responses import Response
from typing_extensions import TypedDict

from app.api.encoding import JsonResponse, to_record
from app.api.log_routes import ERRORS, TopicPath, broker_of, check_batch_size, limits_of
from app.api.models import NO_NUL, MessageFields, Strict, answer_shape
from app.api.rights import TOPIC, WRITE, listing, path, require, rights
from app.api.tracing import trace_context
from half_store.domain.delay_records import ScheduledMessage
from half_store.domain.records import now_ms

router = APIRouter(prefix="/v1", responses=ERRORS)


class DelayedMessageIn(MessageFields):
    """A message and when it may be read: ``deliver_at`` (ms since the epoch) or ``delay_ms`` from now."""

    deliver_at: Annotated[int, Field(ge=0)] | None = None
    delay_ms: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _one_time(self) -> DelayedMessageIn:
        if (self.deliver_at is None) == (self.delay_ms is None):
            raise ValueError("give exactly one of 'deliver_at' and 'delay_ms'")
        return self


class DelayedProduce(Strict):
    messages: Annotated[list[DelayedMessageIn], Field(min_length=1)]


@answer_shape
class ScheduledOut(TypedDict):
    message_id: str
    topic: str
    partition: int
    deliver_at: int
    created_at: int
    state: str
    offset: int | None


@answer_shape
class ScheduledList(TypedDict):
    scheduled: list[ScheduledOut]


@answer_shape
class DelayedList(TypedDict):
    delayed_messages: list[ScheduledOut]


def describe(message: ScheduledMessage) -> ScheduledOut:
    return {
        "message_id": message.message_id,
        "topic": message.topic,
        "partition": message.partition,
        "deliver_at": message.deliver_at,
        "created_at": message.created_at,
        "state": message.state.value,
        "offset": message.offset,
    }


@router.post("/topics/{topic}/delayed-messages", status_code=201, response_model=ScheduledList, tags=["delay messages"])
@rights(require(TOPIC, WRITE, path("topic")))
async def schedule(topic: TopicPath, body: DelayedProduce, request: Request) -> Response:
    """Messages no reader sees before their time; all or nothing. A time more than
    HALFMQ_MAX_DELAY_SECONDS ahead → 422 DELIVERY_TIME_TOO_FAR; one already past is delivered at once."""
    broker = broker_of(request)
    check_batch_size(broker, len(body.messages))
    limits = limits_of(request)
    now = now_ms()
    trace = trace_context(request)
    records = [to_record(m, limits, trace=trace) for m in body.messages]
    times = [m.deliver_at if m.deliver_at is not None else now + (m.delay_ms or 0) for m in body.messages]
    scheduled = await broker.delays.schedule(topic, records, times, [m.partition for m in body.messages])
    answer: ScheduledList = {"scheduled": [describe(s) for s in scheduled]}
    return JsonResponse(answer, status_code=201)


@router.get("/delayed-messages", response_model=DelayedList, tags=["delay messages"])
@rights(listing("delayed_messages", {TOPIC: "topic"}))
async def list_waiting(
    request: Request,
    topic: Annotated[str | None, Query(max_length=249, pattern=NO_NUL, description="empty: every topic")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> Response:
    """The delay messages still waiting, soonest first."""
    found = await broker_of(request).delays.list_waiting(topic or None, limit)
    answer: DelayedList = {"delayed_messages": [describe(m) for m in found]}
    return JsonResponse(answer)
