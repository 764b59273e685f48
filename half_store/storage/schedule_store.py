"""SQL of delay messages: the index over RMQ_SYS_SCHEDULE_TOPIC (``scheduled_messages``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Row, Select, and_, delete, func, insert, select, update

from half_store.domain.delay_records import DueMessage, ScheduledMessage
from half_store.storage.schema import scheduled_messages, topics

_t = scheduled_messages.c


def insert_scheduled(conn: Connection, rows: Sequence[tuple[ScheduledMessage, int, int]]) -> None:
    """``(message, topic id, schedule offset)`` each."""
    conn.execute(
        insert(scheduled_messages),
        [
            {
                "message_id": m.message_id, "schedule_offset": offset, "topic_id": topic_id, "partition": m.partition,
                "deliver_at": m.deliver_at, "created_at": m.created_at,
            }
            for m, topic_id, offset in rows
        ],
    )


def due(conn: Connection, now: int, limit: int) -> list[DueMessage]:
    rows = conn.execute(
        select(_t.message_id, _t.schedule_offset, _t.topic_id, _t.partition)
        .where(_t.delivered_at.is_(None), _t.deliver_at <= now)
        .order_by(_t.deliver_at, _t.schedule_offset)
        .limit(limit)
    )
    return [DueMessage(str(r.message_id), int(r.schedule_offset), int(r.topic_id), int(r.partition)) for r in rows]


def claim(conn: Connection, message_ids: Sequence[str], now: int) -> set[str]:
    """Mark waiting messages delivered (a compare-and-set on ``delivered_at IS NULL``); the ids this did it for.

    In the transaction that appends them to their topics: committed together, or neither.
    """
    if not message_ids:
        return set()
    rows = conn.execute(
        update(scheduled_messages)
        .where(_t.message_id.in_(list(message_ids)), _t.delivered_at.is_(None))
        .values(delivered_at=now)
        .returning(_t.message_id)
    )
    return {str(r.message_id) for r in rows}


def set_delivered_offsets(conn: Connection, offsets: dict[str, int]) -> None:
    for message_id, offset in offsets.items():
        conn.execute(update(scheduled_messages).where(_t.message_id == message_id).values(delivered_offset=offset))


def _select() -> Select[Any]:
    return select(
        _t.message_id, topics.c.name, _t.partition, _t.deliver_at, _t.created_at, _t.delivered_at, _t.delivered_offset
    ).join(topics, topics.c.topic_id == _t.topic_id)


def _record(r: Row[Any]) -> ScheduledMessage:
    return ScheduledMessage(
        str(r.message_id), str(r.name), int(r.partition), int(r.deliver_at), int(r.created_at), r.delivered_at,
        r.delivered_offset,
    )


def get(conn: Connection, message_id: str) -> ScheduledMessage | None:
    row = conn.execute(_select().where(_t.message_id == message_id)).first()
    return None if row is None else _record(row)


def waiting(conn: Connection, topic_id: int | None, limit: int) -> list[ScheduledMessage]:
    """Messages still waiting, soonest first (of one topic, or of all)."""
    query = _select().where(_t.delivered_at.is_(None))
    if topic_id is not None:
        query = query.where(_t.topic_id == topic_id)
    return [_record(r) for r in conn.execute(query.order_by(_t.deliver_at, _t.schedule_offset).limit(limit))]


def count_waiting(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).where(_t.delivered_at.is_(None))).scalar_one())


def purge_delivered(conn: Connection, before: int, limit: int) -> int:
    """Forget delivered messages delivered before ``before`` (they stay answerable until then)."""
    ids = select(_t.message_id).where(and_(_t.delivered_at.is_not(None), _t.delivered_at < before)).limit(limit)
    return int(conn.execute(delete(scheduled_messages).where(_t.message_id.in_(ids.scalar_subquery()))).rowcount or 0)


def lowest_waiting_offset(conn: Connection) -> int | None:
    """The schedule topic below this offset holds nothing still waiting (None: nothing waits)."""
    found = conn.execute(select(func.min(_t.schedule_offset)).where(_t.delivered_at.is_(None))).scalar_one()
    return None if found is None else int(found)
