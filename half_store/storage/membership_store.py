"""SQL for consumer groups with members: the group row lock, members, partition ownership.

A change to a group runs in one group-commit unit: :func:`lock_group` first (on
PostgreSQL ``SELECT … FOR UPDATE`` of the group's row, so broker processes sharing the
database apply one group's changes one at a time), then :func:`load_group`, the domain's
rules on the loaded :class:`ConsumerGroup`, and :func:`save_group` with what changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import orjson
from sqlalchemy import Connection, and_, bindparam, delete, func, or_, select, update

from half_store.domain.consumer_group import ConsumerGroup, Member, SubscribedTopic
from half_store.domain.group_assignor import TopicPartition
from half_store.domain.group_state import Ownership, OwnershipState
from half_store.storage.schema import (
    consumer_groups,
    group_members,
    group_offsets,
    group_partitions,
    topics,
)
from half_store.storage.upsert import insert_many, upsert

PartitionRow = tuple[str, str | None, int | None, str | None]
"""``(state, owner, granted epoch, target)`` of one group partition."""


def lock_group(conn: Connection, group: str, now: int, *, create: bool) -> int | None:
    """Lock the group's row for the rest of this transaction (creating it if asked).

    Returns its group epoch, or None if the group has no row (and ``create`` is false).
    """
    if create:
        insert_many(
            conn,
            consumer_groups,
            [{"group_id": group, "group_epoch": 0, "created_at": now, "updated_at": now}],
            ignoring_existing=("group_id",),
        )
    query = select(consumer_groups.c.group_epoch).where(consumer_groups.c.group_id == group)
    if conn.dialect.name == "postgresql":  # SQLite: the write transaction already holds the database
        query = query.with_for_update()
    epoch = conn.execute(query).scalar_one_or_none()
    return None if epoch is None else int(epoch)


def _member(row: Sequence[object]) -> Member:
    member_id, epoch, topic_names, timeout, joined, heartbeat = row
    return Member(
        str(member_id),
        int(epoch),  # type: ignore[call-overload]
        tuple(orjson.loads(str(topic_names))),
        int(timeout),  # type: ignore[call-overload]
        int(joined),  # type: ignore[call-overload]
        int(heartbeat),  # type: ignore[call-overload]
    )


_MEMBER_COLUMNS = (
    group_members.c.member_id,
    group_members.c.member_epoch,
    group_members.c.topics,
    group_members.c.session_timeout_ms,
    group_members.c.joined_at,
    group_members.c.last_heartbeat_at,
)


def members(conn: Connection, group: str) -> dict[str, Member]:
    rows = conn.execute(select(*_MEMBER_COLUMNS).where(group_members.c.group_id == group))
    return {found.member_id: found for found in map(_member, rows)}


def load_group(conn: Connection, group: str, group_epoch: int) -> ConsumerGroup:
    """The whole group: members, partitions held, targets."""
    loaded = ConsumerGroup(group, group_epoch, members(conn, group))
    rows = conn.execute(
        select(
            group_partitions.c.topic_id,
            group_partitions.c.partition,
            group_partitions.c.state,
            group_partitions.c.owner_member_id,
            group_partitions.c.granted_epoch,
            group_partitions.c.target_member_id,
        ).where(group_partitions.c.group_id == group)
    )
    targets: dict[str, set[TopicPartition]] = {}
    for topic_id, partition, state, owner, granted, target in rows:
        tp = (int(topic_id), int(partition))
        if state != OwnershipState.FREE:
            loaded.partitions[tp] = Ownership(OwnershipState(state), owner, None if granted is None else int(granted))
        if target is not None:
            targets.setdefault(target, set()).add(tp)
    loaded.targets = {member: frozenset(tps) for member, tps in targets.items()}
    return loaded


def partition_rows(group: ConsumerGroup) -> dict[TopicPartition, PartitionRow]:
    """The ``group_partitions`` rows a group is stored as: every partition held or targeted."""
    rows: dict[TopicPartition, PartitionRow] = {}
    for tp, ownership in group.partitions.items():
        rows[tp] = (ownership.state.value, ownership.owner, ownership.granted_epoch, None)
    for member, targeted in group.targets.items():
        for tp in targeted:
            state, owner, granted, _ = rows.get(tp, (OwnershipState.FREE.value, None, None, None))
            rows[tp] = (state, owner, granted, member)
    return rows


def save_group(conn: Connection, before: ConsumerGroup, after: ConsumerGroup, now: int) -> None:
    """Write what changed from ``before`` to ``after`` (both of this group)."""
    name = after.name
    if after.group_epoch != before.group_epoch:
        conn.execute(
            update(consumer_groups)
            .where(consumer_groups.c.group_id == name)
            .values(group_epoch=after.group_epoch, updated_at=now)
        )
    gone = [m for m in before.members if m not in after.members]
    if gone:
        conn.execute(delete(group_members).where(group_members.c.group_id == name, group_members.c.member_id.in_(gone)))
    changed = [m for m in after.members.values() if before.members.get(m.member_id) != m]
    upsert(
        conn,
        group_members,
        [
            {
                "group_id": name,
                "member_id": m.member_id,
                "member_epoch": m.member_epoch,
                "topics": orjson.dumps(list(m.topics)).decode(),
                "session_timeout_ms": m.session_timeout_ms,
                "joined_at": m.joined_at,
                "last_heartbeat_at": m.last_heartbeat_at,
                "expires_at": m.expires_at,
            }
            for m in changed
        ],
        keys=("group_id", "member_id"),
    )
    old_rows, new_rows = partition_rows(before), partition_rows(after)
    removed = [tp for tp in old_rows if tp not in new_rows]
    if removed:
        conn.execute(
            delete(group_partitions).where(
                group_partitions.c.group_id == name,
                group_partitions.c.topic_id == bindparam("t"),
                group_partitions.c.partition == bindparam("p"),
            ),
            [{"t": t, "p": p} for t, p in removed],
        )
    upsert(
        conn,
        group_partitions,
        [
            {
                "group_id": name,
                "topic_id": tp[0],
                "partition": tp[1],
                "state": state,
                "owner_member_id": owner,
                "granted_epoch": granted,
                "target_member_id": target,
            }
            for tp, (state, owner, granted, target) in new_rows.items()
            if old_rows.get(tp) != (state, owner, granted, target)
        ],
        keys=("group_id", "topic_id", "partition"),
    )


def held_partitions(conn: Connection, group: str, member_id: str) -> dict[TopicPartition, Ownership]:
    """The partitions ``member_id`` holds (ASSIGNED to it or REVOKING from it)."""
    rows = conn.execute(
        select(
            group_partitions.c.topic_id,
            group_partitions.c.partition,
            group_partitions.c.state,
            group_partitions.c.granted_epoch,
        ).where(
            group_partitions.c.group_id == group,
            group_partitions.c.owner_member_id == member_id,
            group_partitions.c.state != OwnershipState.FREE.value,
        )
    )
    return {
        (int(t), int(p)): Ownership(OwnershipState(state), member_id, None if granted is None else int(granted))
        for t, p, state, granted in rows
    }


def subscribed_topics(conn: Connection, names: Iterable[str]) -> dict[str, SubscribedTopic]:
    """The named topics that exist, read fresh (their partition count may have grown)."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    rows = conn.execute(select(topics.c.name, topics.c.topic_id, topics.c.partitions).where(topics.c.name.in_(wanted)))
    return {name: SubscribedTopic(name, int(topic_id), int(count)) for name, topic_id, count in rows}


def topic_names(conn: Connection, topic_ids: Iterable[int]) -> dict[int, str]:
    wanted = sorted(set(topic_ids))
    if not wanted:
        return {}
    rows = conn.execute(select(topics.c.topic_id, topics.c.name).where(topics.c.topic_id.in_(wanted)))
    return {int(topic_id): str(name) for topic_id, name in rows}


def groups_with_expired_members(conn: Connection, now: int, limit: int) -> list[str]:
    rows = conn.execute(
        select(group_members.c.group_id).distinct().where(group_members.c.expires_at < now).limit(limit)
    )
    return [str(row[0]) for row in rows]


def group_exists(conn: Connection, group: str) -> tuple[int | None, bool]:
    """(group epoch, or None without a members' row; whether it has committed offsets)."""
    epoch = conn.execute(select(consumer_groups.c.group_epoch).where(consumer_groups.c.group_id == group)).scalar()
    any_offset = select(group_offsets.c.group_id).where(group_offsets.c.group_id == group).limit(1)
    has_offsets = conn.execute(any_offset).first()
    return (None if epoch is None else int(epoch)), has_offsets is not None


def group_summaries(conn: Connection, now: int) -> list[tuple[str, int, bool]]:
    """``(group, live members, reconciling)`` of every group with a members' row or committed offsets."""
    live = live_member_counts(conn, now)
    unsettled = or_(
        group_partitions.c.state == OwnershipState.REVOKING.value,
        and_(
            group_partitions.c.target_member_id.is_not(None),
            or_(
                group_partitions.c.owner_member_id.is_(None),
                group_partitions.c.owner_member_id != group_partitions.c.target_member_id,
            ),
        ),
    )
    reconciling = {row[0] for row in conn.execute(select(group_partitions.c.group_id).distinct().where(unsettled))}
    names = {row[0] for row in conn.execute(select(consumer_groups.c.group_id))}
    names |= {row[0] for row in conn.execute(select(group_offsets.c.group_id).distinct())}
    return [(name, int(live.get(name, 0)), name in reconciling) for name in sorted(names)]


def live_member_counts(conn: Connection, now: int) -> dict[str, int]:
    rows = conn.execute(
        select(group_members.c.group_id, func.count())
        .where(group_members.c.expires_at >= now)
        .group_by(group_members.c.group_id)
    )
    return {str(group): int(count) for group, count in rows}
