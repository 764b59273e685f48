"""KIP-848 consumer groups over Kafka: ConsumerGroupHeartbeat, one call of halfmq's group coordinator.

halfmq's own groups (``/v1/groups``) are KIP-848's: members join and heartbeat, the
broker's assignor decides, and each member is reconciled towards its target, giving up
partitions before others get them. A Kafka member is such a member: member epoch 0
joins, -1 (or -2, a static member's leave) leaves, any other heartbeats with the
partitions it owns; topics are named by their Kafka topic ids on the wire.
"""

from __future__ import annotations

import contextlib
import datetime
import re
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from app.kafka.errors import kafka_code
from app.kafka.handlers.cluster import topic_uuid
from app.kafka.protocol import NO_THROTTLE, api, build, response_module
from app.kafka.session import Session
from half_store.domain.access import Need, Operation, ResourceType
from half_store.domain.errors import BrokerError, UnknownMember
from half_store.domain.group_records import MemberAnswer, NamedPartition

JOIN_EPOCH = 0
LEAVE_EPOCHS = (-1, -2)  # -2: a static member leaving for now (halfmq has no static members: the same as -1)


@api(68, 0, 1)
async def consumer_group_heartbeat(session: Session, request: Any) -> Any:
    m = response_module(request)
    member_id = request.member_id or uuid.uuid4().hex  # v0: the broker names a joining member

    def answer(
        error: ErrorCode, message: str | None = None, epoch: int = -1, interval_ms: int = 0, assignment: Any = None
    ) -> Any:
        return build(
            m.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=message,
            member_id=member_id, member_epoch=epoch, heartbeat_interval=datetime.timedelta(milliseconds=interval_ms),
            assignment=assignment,
        )

    if not session.allows(Need(ResourceType.GROUP, request.group_id, Operation.READ)):
        return answer(ErrorCode.group_authorization_failed)
    groups = session.broker.groups
    try:
        if request.member_epoch in LEAVE_EPOCHS:
            with contextlib.suppress(UnknownMember):  # gone already (expired): leaving is done
                await groups.leave(request.group_id, member_id)
            return answer(ErrorCode.none, epoch=request.member_epoch)
        by_id = {topic_uuid(t): t.name for t in await session.broker.log.list_topics(include_system=False)}
        topics = _subscription(session, request, set(by_id.values()))
        if request.member_epoch == JOIN_EPOCH:
            found = await groups.join(request.group_id, member_id, topics or [], None)
        else:
            owned = _owned(request.topic_partitions, by_id)
            found = await groups.heartbeat(request.group_id, member_id, request.member_epoch, owned, topics)
    except BrokerError as error:
        return answer(kafka_code(error), str(error))
    changed = found.member_epoch != request.member_epoch or _owned(request.topic_partitions, by_id) not in (
        None, sorted(found.assignment),
    )
    return answer(
        ErrorCode.none, epoch=found.member_epoch, interval_ms=found.heartbeat_interval_ms,
        assignment=_assignment(m, found, by_id) if changed else None,
    )


def _subscription(session: Session, request: Any, known: set[str]) -> list[str] | None:
    """The topics the member subscribes to now (None: unchanged); by regex (v1) matched against the topics there
    are. Topics that do not exist (yet) or the principal may not read are left out, as Kafka leaves them unassigned."""
    regex = getattr(request, "subscribed_topic_regex", None)
    if regex:  # librdkafka sends "" for no regex
        try:
            pattern = re.compile(regex)
        except re.error:
            return []
        names = [name for name in known if pattern.fullmatch(name)]
    elif request.subscribed_topic_names is not None:
        names = list(request.subscribed_topic_names)
    else:
        return None
    return sorted(
        name for name in set(names) & known if session.allows(Need(ResourceType.TOPIC, name, Operation.READ))
    )


def _owned(owned: Any, by_id: dict[uuid.UUID, str]) -> list[NamedPartition] | None:
    if owned is None:
        return None
    return sorted((by_id[t.topic_id], int(p)) for t in owned if t.topic_id in by_id for p in t.partitions)


def _assignment(m: Any, found: MemberAnswer, by_id: dict[uuid.UUID, str]) -> Any:
    ids = {name: topic_id for topic_id, name in by_id.items()}
    partitions: dict[str, list[int]] = {}
    for name, partition in found.assignment:
        partitions.setdefault(name, []).append(partition)
    return m.Assignment(
        topic_partitions=tuple(
            m.TopicPartitions(topic_id=ids[name], partitions=tuple(sorted(parts)))
            for name, parts in sorted(partitions.items())
            if name in ids
        )
    )
