"""SQL for consumer-group offsets."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, select

from half_store.domain.records import GroupOffset, now_ms
from half_store.storage.schema import group_offsets, partitions, topics
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


def group_offsets_with_lag(conn: Connection, group: str) -> list[GroupOffset]:
    """The group's committed offsets; lag is measured to the high watermark, as Kafka's tools do.

    An offset that retention has left behind (below the log start offset) lags by what is
    still there to read: from the log start, where a consumer resuming has to start.
    """
    rows = conn.execute(
        select(
            topics.c.name,
            group_offsets.c.partition,
            group_offsets.c.offset,
            group_offsets.c.metadata,
            partitions.c.next_offset,
            partitions.c.log_start_offset,
        )
        .join(topics, topics.c.topic_id == group_offsets.c.topic_id)
        .join(
            partitions,
            (partitions.c.topic_id == group_offsets.c.topic_id) & (partitions.c.partition == group_offsets.c.partition),
        )
        .where(group_offsets.c.group_id == group)
        .order_by(topics.c.name, group_offsets.c.partition)
    )
    return [
        GroupOffset(name, int(p), int(o), meta, max(int(hw) - max(int(o), int(start)), 0), int(start))
        for name, p, o, meta, hw, start in rows
    ]
