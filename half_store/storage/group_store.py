"""SQL for consumer-group offsets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, case, func, select

from half_store.domain.constants import CONTROL_NONE
from half_store.domain.records import GroupLag, GroupOffset, now_ms
from half_store.storage.schema import group_offsets, messages, partitions, topics
from half_store.storage.upsert import upsert


def commit_offsets(conn: Connection, group: str, offsets: Sequence[tuple[int, int, int, str | None]]) -> None:
    """Store ``(topic_id, partition, offset, metadata)`` as the group's next offsets to read."""
    now = now_ms()
    upsert(
        conn,
        group_offsets,
        [
            {"group_id": group, "topic_id": t, "partition": p, "offset": o, "metadata": m, "updated_at": now}
            for t, p, o, m in offsets
        ],
        keys=("group_id", "topic_id", "partition"),
    )


# How far behind the high watermark a partition's control markers are counted out of its lag.
# A caught-up group's lag (what an operator and an alert look at) is exact; one further behind
# counts the markers older than this, a small error on a large number, so the cost of a
# /metrics scrape stays bounded by this many rows per partition however far a group lags.
MARKER_WINDOW = 10_000


def _lags(where: ColumnElement[bool] | None) -> Select[tuple[Any, ...]]:
    """Committed offsets with their lag: the records between the offset and the high watermark.

    Transaction markers take offsets (Kafka's control records) and are never read, so they
    are not lag: a group that read everything before a commit marker has lag 0, not 1. An
    offset that retention has left behind (below the log start offset) lags by what is
    still there to read: from the log start, where a consumer resuming has to start.
    """
    hw, log_start, committed = partitions.c.next_offset, partitions.c.log_start_offset, group_offsets.c.offset
    start = case((committed > log_start, committed), else_=log_start)
    window_start = case((start > hw - MARKER_WINDOW, start), else_=hw - MARKER_WINDOW)
    markers = (
        select(func.count())
        .where(
            messages.c.topic_id == group_offsets.c.topic_id,
            messages.c.partition == group_offsets.c.partition,
            messages.c.offset >= window_start,
            messages.c.offset < hw,
            messages.c.control != CONTROL_NONE,
        )
        .scalar_subquery()
    )
    behind = case((hw > start, hw - start), else_=0)
    query = (
        select(
            group_offsets.c.group_id,
            topics.c.name,
            group_offsets.c.partition,
            committed,
            group_offsets.c.metadata,
            log_start,
            case((hw > start, behind - markers), else_=0),
        )
        .join(topics, topics.c.topic_id == group_offsets.c.topic_id)
        .join(
            partitions,
            (partitions.c.topic_id == group_offsets.c.topic_id) & (partitions.c.partition == group_offsets.c.partition),
        )
        .order_by(group_offsets.c.group_id, topics.c.name, group_offsets.c.partition)
    )
    return query if where is None else query.where(where)


def group_offsets_with_lag(conn: Connection, group: str) -> list[GroupOffset]:
    """The group's committed offsets, each with its lag (:func:`_lags`)."""
    return [
        GroupOffset(name, int(p), int(o), meta, max(int(lag), 0), int(start))
        for _group, name, p, o, meta, start, lag in conn.execute(_lags(group_offsets.c.group_id == group))
    ]


def all_lags(conn: Connection) -> list[GroupLag]:
    """Every group's lag per partition (the /metrics gauge and the group list's totals)."""
    return [
        GroupLag(str(group), str(name), int(p), max(int(lag), 0))
        for group, name, p, _o, _meta, _start, lag in conn.execute(_lags(None))
    ]
