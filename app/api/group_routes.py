"""Routes for consumer groups with members (KIP-848 style): validate and delegate to the group coordinator.

The group offset routes (``/v1/groups/{group}/offsets``) stay with the log's routes.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Request
from pydantic import Field
from starlette.responses import Response
from typing_extensions import TypedDict

from app.api.encoding import JsonResponse
from app.api.log_routes import ERRORS, GroupPath, broker_of
from app.api.models import Epoch, MemberId, Partition, Strict, TopicName, answer_shape
from app.api.rights import DESCRIBE, GROUP, READ, TOPIC, body_names, listing, path, require, rights
from half_store.domain.group_records import MemberAnswer, MemberView, NamedPartition

router = APIRouter(prefix="/v1/groups", tags=["groups"], responses=ERRORS)
MemberPath = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[^\x00]*$")]
Topics = Annotated[list[TopicName], Field(min_length=1, max_length=1000)]


class TopicPartitionIn(Strict):
    topic: TopicName
    partition: Partition


@answer_shape
class TopicPartitionOut(TypedDict):
    topic: str
    partition: int


class MemberJoin(Strict):
    topics: Topics
    session_timeout_ms: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = Field(
        None, description="The broker's default (30000 ms) when absent; outside the broker's range: 422"
    )
    member_id: MemberId | None = Field(
        None,
        description="Chosen by the client (a UUID) so a join whose answer was lost can be sent again: "
        "the same id answers the same member instead of adding a second one. The broker picks one when absent.",
    )


class MemberHeartbeat(Strict):
    member_epoch: Epoch
    owned: Annotated[list[TopicPartitionIn], Field(max_length=100_000)] = Field(
        default_factory=list, description="The partitions the member still holds: a revoked one it omits is released"
    )
    topics: Topics | None = Field(None, description="A new subscription, when it changes")


@answer_shape
class MemberAssignment(TypedDict):
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: list[TopicPartitionOut]
    state: Annotated[str, Field(description="STABLE, UNREVOKED_PARTITIONS or UNRELEASED_PARTITIONS")]


@answer_shape
class GroupSummaryOut(TypedDict):
    group: str
    state: str
    members: int
    lag: Annotated[int, Field(description="Committed records still to read in all its partitions (markers not counted)")]


@answer_shape
class GroupList(TypedDict):
    groups: list[GroupSummaryOut]


@answer_shape
class MemberOut(TypedDict):
    member_id: str
    member_epoch: int
    state: str
    assignment: list[TopicPartitionOut]
    revoking: list[TopicPartitionOut]
    target: list[TopicPartitionOut]
    topics: list[str]
    session_timeout_ms: int
    joined_ms: int
    last_heartbeat_ms: int


@answer_shape
class DescribedGroupOffset(TypedDict):
    """A committed offset as a group's description shows it (``GET /v1/groups/{group}/offsets`` says more)."""

    topic: str
    partition: int
    offset: int
    metadata: str | None
    lag: int | None


@answer_shape
class GroupDescription(TypedDict):
    group: str
    state: str
    group_epoch: int
    members: list[MemberOut]
    offsets: list[DescribedGroupOffset]


def _partitions(partitions: tuple[NamedPartition, ...]) -> list[TopicPartitionOut]:
    return [{"topic": t, "partition": p} for t, p in partitions]


def _assignment(answer: MemberAnswer) -> Response:
    body: MemberAssignment = {
        "member_id": answer.member_id,
        "member_epoch": answer.member_epoch,
        "heartbeat_interval_ms": answer.heartbeat_interval_ms,
        "assignment": _partitions(answer.assignment),
        "state": answer.state.value,
    }
    return JsonResponse(body)


def _member(view: MemberView) -> MemberOut:
    return {
        "member_id": view.member_id,
        "member_epoch": view.member_epoch,
        "state": view.state.value,
        "assignment": _partitions(view.assignment),
        "revoking": _partitions(view.revoking),
        "target": _partitions(view.target),
        "topics": list(view.topics),
        "session_timeout_ms": view.session_timeout_ms,
        "joined_ms": view.joined_ms,
        "last_heartbeat_ms": view.last_heartbeat_ms,
    }


@router.get("", response_model=GroupList)
@rights(listing("groups", {GROUP: "group"}))
async def list_groups(request: Request) -> Response:
    found = await broker_of(request).groups.list_groups()
    answer: GroupList = {
        "groups": [{"group": g.group, "state": g.state.value, "members": g.members, "lag": g.lag} for g in found]
    }
    return JsonResponse(answer)


@router.get("/{group}", response_model=GroupDescription)
# The offsets of topics the caller may not describe are left out, as GET /v1/groups/{group}/offsets leaves them.
@rights(require(GROUP, DESCRIBE, path("group")), listing("offsets", {TOPIC: "topic"}))
async def describe_group(group: GroupPath, request: Request) -> Response:
    view = await broker_of(request).groups.describe(group)
    answer: GroupDescription = {
        "group": view.group,
        "state": view.state.value,
        "group_epoch": view.group_epoch,
        "members": [_member(m) for m in view.members],
        "offsets": [
            {"topic": o.topic, "partition": o.partition, "offset": o.offset, "metadata": o.metadata, "lag": o.lag}
            for o in view.offsets
        ],
    }
    return JsonResponse(answer)


@router.post("/{group}/members", response_model=MemberAssignment)
@rights(require(GROUP, READ, path("group")), require(TOPIC, READ, body_names("topics")))
async def join_group(group: GroupPath, body: MemberJoin, request: Request) -> Response:
    member_id = body.member_id or uuid.uuid4().hex
    answer = await broker_of(request).groups.join(group, member_id, body.topics, body.session_timeout_ms)
    return _assignment(answer)


@router.post("/{group}/members/{member_id}/heartbeat", response_model=MemberAssignment)
@rights(require(GROUP, READ, path("group")), require(TOPIC, READ, body_names("topics", optional=True)))
async def heartbeat(group: GroupPath, member_id: MemberPath, body: MemberHeartbeat, request: Request) -> Response:
    owned = [(o.topic, o.partition) for o in body.owned]
    answer = await broker_of(request).groups.heartbeat(group, member_id, body.member_epoch, owned, body.topics)
    return _assignment(answer)


@router.delete("/{group}/members/{member_id}", status_code=204, response_class=Response)
@rights(require(GROUP, READ, path("group")))
async def leave_group(group: GroupPath, member_id: MemberPath, request: Request) -> Response:
    await broker_of(request).groups.leave(group, member_id)
    return Response(status_code=204)
