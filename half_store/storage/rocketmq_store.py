"""SQL of the RocketMQ listener registry (``rocketmq_listeners``)."""

from __future__ import annotations

import orjson
from sqlalchemy import Connection, delete, select

from half_store.domain.rocketmq_records import ClientSessionRecord, ListenerRecord
from half_store.storage.schema import rocketmq_listeners
from half_store.storage.upsert import upsert

_t = rocketmq_listeners.c


def put(conn: Connection, listener: ListenerRecord) -> None:
    sessions = [
        {
            "client_id": s.client_id, "client_type": s.client_type, "language": s.language, "version": s.version,
            "principal": s.principal, "topics": list(s.topics), "group": s.group,
            "subscriptions": [list(pair) for pair in s.subscriptions], "streaming": s.streaming,
            "connected_ms": s.connected_ms, "last_seen_ms": s.last_seen_ms,
        }
        for s in listener.sessions
    ]
    row: dict[str, object] = {
        "instance_id": listener.instance_id, "advertised_address": listener.advertised_address,
        "sessions": orjson.dumps(sessions).decode(), "started_at": listener.started_ms,
        "heartbeat_at": listener.heartbeat_ms, "expires_at": listener.expires_ms,
    }
    upsert(conn, rocketmq_listeners, [row], keys=("instance_id",))


def remove(conn: Connection, instance_id: str) -> None:
    conn.execute(delete(rocketmq_listeners).where(_t.instance_id == instance_id))


def live(conn: Connection, now: int) -> list[ListenerRecord]:
    """The listeners whose last heartbeat has not expired, by address; expired rows are ignored (and purged)."""
    rows = conn.execute(select(rocketmq_listeners).where(_t.expires_at > now).order_by(_t.advertised_address, _t.instance_id))
    return [
        ListenerRecord(
            str(r.instance_id), str(r.advertised_address), int(r.started_at), int(r.heartbeat_at), int(r.expires_at),
            tuple(
                ClientSessionRecord(
                    s["client_id"], s["client_type"], s["language"], s["version"], s["principal"], tuple(s["topics"]),
                    s["group"], tuple((t, e) for t, e in s["subscriptions"]), bool(s["streaming"]),
                    int(s["connected_ms"]), int(s["last_seen_ms"]),
                )
                for s in orjson.loads(r.sessions)
            ),
        )
        for r in rows
    ]


def purge_expired(conn: Connection, before: int) -> int:
    return int(conn.execute(delete(rocketmq_listeners).where(_t.expires_at <= before)).rowcount or 0)
