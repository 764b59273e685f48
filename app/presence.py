"""This broker process in the shared broker registry: one row, heartbeated, with each front's address.

The Kafka front adds its node and advertised address, the RocketMQ front its gRPC address
and client sessions; every ``HALFMQ_BROKER_HEARTBEAT_SECONDS`` the row is written and the
live processes come back, handed to each front (Kafka's cluster view, RocketMQ's route).
A process that stops heartbeating (killed, or cut off from the database) drops out of
every other process's view after ``HALFMQ_BROKER_EXPIRY_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from app.handle import BrokerRegistryCalls
from app.metrics import LIVE_BROKERS
from half_store.domain.broker_records import BrokerRecord
from half_store.domain.errors import BrokerError
from half_store.domain.rocketmq_records import ClientSessionRecord
from half_store.settings import Settings

log = logging.getLogger("app.presence")

LiveBrokers = Callable[[list[BrokerRecord]], None]


def _no_sessions() -> tuple[ClientSessionRecord, ...]:
    return ()


class Presence:
    def __init__(self, registry: BrokerRegistryCalls, settings: Settings) -> None:
        self.registry = registry
        self.instance_id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.heartbeat_seconds = settings.broker_heartbeat_seconds
        self.expiry_ms = int(settings.broker_expiry_seconds * 1000)
        self.started_ms = time.time_ns() // 1_000_000
        self.kafka_node_id: int | None = None
        self.kafka_address: str | None = None
        self.grpc_address: str | None = None
        self.rocketmq_sessions: Callable[[], tuple[ClientSessionRecord, ...]] = _no_sessions
        self._watchers: list[LiveBrokers] = []
        self._task: asyncio.Task[None] | None = None

    def watch(self, watcher: LiveBrokers) -> None:
        """Call ``watcher`` with the live processes after every heartbeat."""
        self._watchers.append(watcher)

    async def beat(self) -> None:
        """Write this process's row as it is now; tell the watchers who is alive. BrokerError if the database is away."""
        now = time.time_ns() // 1_000_000
        record = BrokerRecord(
            self.instance_id, self.started_ms, now, now + self.expiry_ms, self.kafka_node_id, self.kafka_address,
            self.grpc_address, self.rocketmq_sessions(),
        )
        live = await self.registry.heartbeat(record)
        LIVE_BROKERS.set(len(live))
        for watcher in self._watchers:
            watcher(live)

    async def announce(self) -> None:
        """A front has just started: write the row now rather than at the next beat (the database away: later)."""
        with contextlib.suppress(BrokerError):
            await self.beat()

    def start(self) -> None:
        self._task = asyncio.create_task(self._keep_beating())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(BrokerError):  # left in place, the row expires on its own
            await self.registry.leave(self.instance_id)

    async def _keep_beating(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            try:
                await self.beat()
            except BrokerError as error:  # the row expires if this goes on; clients then go to the others
                log.warning("could not record this broker process's heartbeat: %s", error)


@asynccontextmanager
async def broker_presence(registry: BrokerRegistryCalls, settings: Settings) -> AsyncIterator[Presence]:
    presence = Presence(registry, settings)
    presence.start()
    try:
        yield presence
    finally:
        await presence.stop()
