"""Classic consumer groups and their offsets: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, DescribeGroups, ListGroups."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from app.kafka.errors import kafka_code
from app.kafka.protocol import NO_THROTTLE, api, build, response_module
from app.kafka.session import Session
from half_store.domain.access import Need, Operation, ResourceType
from half_store.domain.classic_groups import JoinRequest
from half_store.domain.errors import BrokerError
from half_store.domain.group_records import MemberRef
from half_store.domain.records import GroupOffset, OffsetCommit

CONSUMER = "consumer"


def named(error: str | None) -> ErrorCode:
    return ErrorCode.none if error is None else ErrorCode[error.lower()]


def _group_refusal(session: Session, group: str) -> ErrorCode | None:
    if not session.allows(Need(ResourceType.GROUP, group, Operation.READ)):
        return ErrorCode.group_authorization_failed
    if not session.cluster.coordinates(group):
        return ErrorCode.not_coordinator
    return None


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000)


@api(11, 0, 7)
async def join_group(session: Session, request: Any) -> Any:
    m = response_module(request)
    refusal = _group_refusal(session, request.group_id)
    if refusal is not None:
        return build(m.JoinGroupResponse, throttle_time=NO_THROTTLE, error_code=refusal, generation_id=-1, protocol_type=None,
                     protocol_name=None, leader="", member_id=request.member_id, members=())
    session_ms = _ms(request.session_timeout)
    rebalance_ms = _ms(getattr(request, "rebalance_timeout", request.session_timeout))
    answer = await session.broker.classic.join(
        JoinRequest(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            session.client_id or "",
            session.peer,
            request.protocol_type,
            tuple((p.name, p.metadata) for p in request.protocols),
            session_ms,
            rebalance_ms,
            request.__version__ >= 4,
        )
    )
    members = tuple(
        build(m.JoinGroupResponseMember, member_id=member_id, group_instance_id=instance, metadata=metadata)
        for member_id, instance, metadata in answer.members
    )
    return build(
        m.JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=named(answer.error),
        generation_id=answer.generation_id,
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name or ("" if request.__version__ < 7 else None),
        leader=answer.leader,
        member_id=answer.member_id,
        members=members,
        skip_assignment=False,
    )


@api(14, 0, 5)
async def sync_group(session: Session, request: Any) -> Any:
    m = response_module(request)
    refusal = _group_refusal(session, request.group_id)
    if refusal is not None:
        return build(m.SyncGroupResponse, throttle_time=NO_THROTTLE, error_code=refusal, protocol_type=None, protocol_name=None,
                     assignment=b"")
    assignments = {a.member_id: a.assignment for a in request.assignments}
    answer = await session.broker.classic.sync(request.group_id, request.generation_id, request.member_id, assignments)
    return build(
        m.SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=named(answer.error),
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name,
        assignment=answer.assignment,
    )


@api(12, 0, 4)
async def heartbeat(session: Session, request: Any) -> Any:
    m = response_module(request)
    error = _group_refusal(session, request.group_id)
    if error is None:
        error = named(await session.broker.classic.heartbeat(request.group_id, request.generation_id, request.member_id))
    return build(m.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error)


@api(13, 0, 5)
async def leave_group(session: Session, request: Any) -> Any:
    m = response_module(request)
    members = list(getattr(request, "members", ())) or []
    ids = [member.member_id for member in members] or [getattr(request, "member_id", "")]
    error = _group_refusal(session, request.group_id)
    answers: dict[str, str | None] = {}
    if error is None:
        answers = await session.broker.classic.leave(request.group_id, ids)
        error = ErrorCode.none if request.__version__ >= 3 else named(answers.get(ids[0]))
    described = tuple(
        build(m.MemberResponse, member_id=member.member_id, group_instance_id=member.group_instance_id,
              error_code=named(answers.get(member.member_id)) if answers else error)
        for member in members
    )
    return build(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error, members=described)


@api(8, 2, 8)
async def offset_commit(session: Session, request: Any) -> Any:
    m = response_module(request)
    error = _group_refusal(session, request.group_id)
    commits = [
        OffsetCommit(topic.name, p.partition_index, p.committed_offset, p.committed_metadata)
        for topic in request.topics
        for p in topic.partitions
    ]
    refused_topics = {c.topic for c in commits if not session.allows(Need(ResourceType.TOPIC, c.topic, Operation.READ))}
    allowed = [c for c in commits if c.topic not in refused_topics]
    if error is None and allowed:
        generation = getattr(request, "generation_id_or_member_epoch", getattr(request, "generation_id", -1))
        try:
            member = await commit_member(session, request.group_id, generation, getattr(request, "member_id", ""))
            await session.broker.log.commit_group_offsets(request.group_id, allowed, member)
            error = ErrorCode.none
        except BrokerError as failure:
            error = _commit_code(failure)
    topics = tuple(
        m.OffsetCommitResponseTopic(
            name=topic.name,
            partitions=tuple(
                m.OffsetCommitResponsePartition(
                    partition_index=p.partition_index,
                    error_code=ErrorCode.topic_authorization_failed if topic.name in refused_topics else error or ErrorCode.none,
                )
                for p in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return build(m.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=topics)


async def commit_member(session: Session, group: str, generation: int, member_id: str) -> MemberRef | None:
    """Who commits: a classic member is checked against its group's generation here (None after); a member of
    a KIP-848 group (one the classic coordinator does not know) is named with its member epoch, for the
    group coordinator's fencing (half_store/services/group_fencing.py)."""
    if member_id and generation >= 0 and (await session.broker.classic.describe([group]))[0] is None:
        return MemberRef(member_id, generation)
    await session.broker.classic.check_commit(group, generation, member_id)
    return None


def _commit_code(failure: BrokerError) -> ErrorCode:
    """A classic member's commit refused: Kafka names the stale generation ILLEGAL_GENERATION."""
    if failure.code == "FENCED_MEMBER_EPOCH":
        return ErrorCode.illegal_generation
    return kafka_code(failure)


@api(9, 1, 7)
async def offset_fetch(session: Session, request: Any) -> Any:
    m = response_module(request)
    error = _group_refusal(session, request.group_id)
    committed: dict[tuple[str, int], GroupOffset] = {}
    pending: set[tuple[str, int]] = set()
    if error is None:
        try:
            for offset in await session.broker.log.group_offsets(request.group_id):
                committed[(offset.topic, offset.partition)] = offset
            if getattr(request, "require_stable", False):  # v7 (KIP-447): not while a transaction may change it
                pending = await session.broker.log.pending_group_offsets(request.group_id)
            error = ErrorCode.none
        except BrokerError as failure:
            error = kafka_code(failure)
    if request.topics is None:
        wanted: dict[str, list[int]] = {}
        for topic, partition in committed:
            wanted.setdefault(topic, []).append(partition)
    else:
        wanted = {t.name: list(t.partition_indexes) for t in request.topics}
    topics = []
    for name, partitions in wanted.items():
        readable = session.allows(Need(ResourceType.TOPIC, name, Operation.DESCRIBE))
        parts = []
        for partition in partitions:
            unstable = (name, partition) in pending
            found = committed.get((name, partition)) if readable and not unstable else None
            code = ErrorCode.topic_authorization_failed if not readable else ErrorCode.none
            if readable and unstable:
                code = ErrorCode.unstable_offset_commit  # retriable: the client asks again
            parts.append(
                build(
                    m.OffsetFetchResponsePartition,
                    partition_index=partition,
                    committed_offset=found.offset if found else -1,
                    committed_leader_epoch=-1,
                    metadata=(found.metadata or "") if found else "",
                    error_code=code,
                )
            )
        topics.append(m.OffsetFetchResponseTopic(name=name, partitions=tuple(parts)))
    return build(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=tuple(topics), error_code=error)


@api(15, 0, 5)
async def describe_groups(session: Session, request: Any) -> Any:
    m = response_module(request)
    views = await session.broker.classic.describe(list(request.groups))
    groups = []
    for group_id, view in zip(request.groups, views, strict=True):
        error = _group_refusal(session, group_id) or ErrorCode.none
        members = ()
        if view is not None and error is ErrorCode.none:
            members = tuple(
                build(m.DescribedGroupMember, member_id=v.member_id, group_instance_id=v.group_instance_id,
                      client_id=v.client_id, client_host=v.client_host, member_metadata=v.metadata,
                      member_assignment=v.assignment)
                for v in view.members
            )
        groups.append(
            build(
                m.DescribedGroup,
                error_code=error,
                group_id=group_id,
                group_state=view.state.value if view is not None else "Dead",
                protocol_type=view.protocol_type if view is not None else "",
                protocol_data=view.protocol_name if view is not None else "",
                members=members,
                authorized_operations=-2147483648,
            )
        )
    return build(m.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))


@api(16, 0, 4)
async def list_groups(session: Session, request: Any) -> Any:
    """The classic groups this broker coordinates, and the groups with committed offsets (as Empty)."""
    m = response_module(request)
    wanted_states = {s.lower() for s in getattr(request, "states_filter", ())}
    listed: dict[str, tuple[str, str]] = {}
    for summary in await session.broker.groups.list_groups():
        listed[summary.group] = (CONSUMER, "Empty" if summary.members == 0 else "Stable")
    for view in await session.broker.classic.list_groups():
        listed[view.group] = (view.protocol_type or CONSUMER, view.state.value)
    groups = tuple(
        build(m.ListedGroup, group_id=group, protocol_type=protocol_type, group_state=state)
        for group, (protocol_type, state) in sorted(listed.items())
        if session.allows(Need(ResourceType.GROUP, group, Operation.DESCRIBE))
        and (not wanted_states or state.lower() in wanted_states)
    )
    return build(m.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=groups)
