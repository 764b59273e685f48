"""SQL for the producer groups' listeners: the callbacks the checker asks, alive while they heartbeat."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, Connection, delete, func, select

from half_store.domain.half_records import Listener
from half_store.storage.schema import producer_listeners
from half_store.storage.upsert import upsert


def _alive(now: int) -> ColumnElement[bool]:
    """A listener whose last heartbeat is within its ttl at ``now``."""
    return producer_listeners.c.heartbeat_at + producer_listeners.c.ttl_seconds * 1000 >= now


def put_listener(conn: Connection, listener: Listener) -> None:
    upsert(
        conn,
        producer_listeners,
        [
            {
                "producer_group": listener.producer_group,
                "instance_id": listener.instance_id,
                "callback_url": listener.callback_url,
                "secret": listener.secret,
                "ttl_seconds": listener.ttl_seconds,
                "heartbeat_at": listener.heartbeat_at,
            }
        ],
        keys=("producer_group", "instance_id"),
    )


def delete_listener(conn: Connection, producer_group: str, instance_id: str) -> bool:
    return bool(
        conn.execute(
            delete(producer_listeners).where(
                producer_listeners.c.producer_group == producer_group, producer_listeners.c.instance_id == instance_id
            )
        ).rowcount
    )


def live_listeners(conn: Connection, now: int, producer_groups: Sequence[str] | None = None) -> list[Listener]:
    """Listeners whose last heartbeat is within their ttl."""
    query = select(
        producer_listeners.c.producer_group,
        producer_listeners.c.instance_id,
        producer_listeners.c.callback_url,
        producer_listeners.c.secret,
        producer_listeners.c.ttl_seconds,
        producer_listeners.c.heartbeat_at,
    ).where(_alive(now))
    if producer_groups is not None:
        query = query.where(producer_listeners.c.producer_group.in_(list(producer_groups)))
    return [Listener(g, i, u, s, int(t), int(h)) for g, i, u, s, t, h in conn.execute(query)]


def delete_expired_listeners(conn: Connection, now: int) -> int:
    return int(conn.execute(delete(producer_listeners).where(~_alive(now))).rowcount or 0)


def live_listener_counts(conn: Connection, now: int) -> dict[str, int]:
    """Per producer group: how many listeners are alive (the checker's status)."""
    rows = conn.execute(
        select(producer_listeners.c.producer_group, func.count())
        .where(_alive(now))
        .group_by(producer_listeners.c.producer_group)
    )
    return {str(group): int(count) for group, count in rows}
