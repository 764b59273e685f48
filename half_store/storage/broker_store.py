"""SQL of the registry of broker processes (``brokers``)."""

from __future__ import annotations

import orjson
from sqlalchemy import Connection, delete, select

from half_store.domain.broker_records import BrokerRecord
from half_store.domain.rocketmq_records import ClientSessionRecord
from half_store.storage.schema import brokers
from half_store.storage.upsert import upsert

_t = brokers.c


def put(conn: Connection, broker: BrokerRecord) -> None:
    sessions = [
        {
            "client_id": s.client_id, "client_type": s.client_type, "language": s.language, "version": s.version,
            "principal": s.principal, "topics": list(s.topics), "group": s.group,
            "subscriptions": [list(pair) for pair in s.subscriptions], "streaming": s.streaming,
            "connected_ms": s.connected_ms, "last_seen_ms": s.last_seen_ms,
        }
        for s in broker.rocketmq_sessions
    ]
    row: dict[str, object] = {
        "instance_id": broker.instance_id, "kafka_node_id": broker.kafka_node_id, "kafka_address": broker.kafka_address,
        "grpc_address": broker.grpc_address, "rocketmq_sessions": orjson.dumps(sessions).decode(),
        "started_at": broker.started_ms, "heartbeat_at": broker.heartbeat_ms, "expires_at": broker.expires_ms,
    }
    upsert(conn, brokers, [row], keys=("instance_id",))


def remove(conn: Connection, instance_id: str) -> None:
    conn.execute(delete(brokers).where(_t.instance_id == instance_id))


def live(conn: Connection, now: int) -> list[BrokerRecord]:
    """The processes whose last heartbeat has not expired, by instance id; expired rows are ignored (and purged)."""
    rows = conn.execute(select(brokers).where(_t.expires_at > now).order_by(_t.instance_id))
    return [
        BrokerRecord(
            str(r.instance_id), int(r.started_at), int(r.heartbeat_at), int(r.expires_at),
            None if r.kafka_node_id is None else int(r.kafka_node_id), r.kafka_address, r.grpc_address,
            tuple(
                ClientSessionRecord(
                    s["client_id"], s["client_type"], s["language"], s["version"], s["principal"], tuple(s["topics"]),
                    s["group"], tuple((t, e) for t, e in s["subscriptions"]), bool(s["streaming"]),
                    int(s["connected_ms"]), int(s["last_seen_ms"]),
                )
                for s in orjson.loads(r.rocketmq_sessions)
            ),
        )
        for r in rows
    ]


def purge_expired(conn: Connection, before: int) -> int:
    return int(conn.execute(delete(brokers).where(_t.expires_at <= before)).rowcount or 0)
