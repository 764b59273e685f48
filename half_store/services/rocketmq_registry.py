"""Which broker processes serve RocketMQ, where, and to whom: each listener heartbeats its row.

QueryRoute lists the live listeners' advertised addresses (a client keeps working when the
one it talks to dies: the others are in its route); the admin API lists every listener's
client sessions, whichever broker process it asks.
"""

from __future__ import annotations

from sqlalchemy import Connection

from half_store.domain.records import now_ms
from half_store.domain.rocketmq_records import ListenerRecord
from half_store.storage import rocketmq_store
from half_store.storage.store import Store


class RocketMQRegistry:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def heartbeat(self, listener: ListenerRecord) -> list[ListenerRecord]:
        """Record this listener as it is now; the live listeners (this one among them) in one round trip."""

        def unit(conn: Connection) -> list[ListenerRecord]:
            now = now_ms()
            rocketmq_store.put(conn, listener)
            rocketmq_store.purge_expired(conn, now - 3_600_000)
            return rocketmq_store.live(conn, now)

        return await self.store.write(unit)

    async def leave(self, instance_id: str) -> None:
        await self.store.write(lambda conn: rocketmq_store.remove(conn, instance_id))

    async def live(self) -> list[ListenerRecord]:
        return await self.store.read(lambda conn: rocketmq_store.live(conn, now_ms()))
