"""The broker processes on one database, where each front listens: every process heartbeats its row.

Kafka's Metadata and FindCoordinator and RocketMQ's QueryRoute list the live processes'
advertised addresses (a client keeps working when the one it talks to dies: the others
are in its metadata or route); the admin API lists every process's RocketMQ client
sessions, whichever process it asks.
"""

from __future__ import annotations

from sqlalchemy import Connection

from half_store.domain.broker_records import BrokerRecord
from half_store.domain.records import now_ms
from half_store.storage import broker_store
from half_store.storage.store import Store

# A row expired this long ago is a process that is not coming back under that instance id.
_PURGE_AFTER_MS = 3_600_000


class BrokerRegistry:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def heartbeat(self, broker: BrokerRecord) -> list[BrokerRecord]:
        """Record this process as it is now; the live processes (this one among them) in one round trip."""

        def unit(conn: Connection) -> list[BrokerRecord]:
            now = now_ms()
            broker_store.put(conn, broker)
            broker_store.purge_expired(conn, now - _PURGE_AFTER_MS)
            return broker_store.live(conn, now)

        return await self.store.write(unit)

    async def leave(self, instance_id: str) -> None:
        await self.store.write(lambda conn: broker_store.remove(conn, instance_id))

    async def live(self) -> list[BrokerRecord]:
        return await self.store.read(lambda conn: broker_store.live(conn, now_ms()))
