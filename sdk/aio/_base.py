"""Shared plumbing of the asyncio classes: transport ownership, partition counts, ``close`` and ``async with``.

The blocking twin is :class:`sdk._base.SyncBase`; both take the same
:class:`~sdk._connection.ConnectionOptions` and keep a :class:`~sdk._metadata.PartitionCounts`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self, Unpack

from sdk import calls
from sdk._connection import ConnectionOptions, ConnectionSettings
from sdk._http import AsyncTransport
from sdk._metadata import PartitionCounts


class AsyncBase:
    """An asyncio client of one broker: its connection pool, its view of partition counts, ``async with``."""

    def __init__(self, url: str, **connection: Unpack[ConnectionOptions]) -> None:
        settings = ConnectionSettings(**connection)
        self.url = url.rstrip("/")
        self._partition_counts = PartitionCounts(settings.metadata_max_age_ms)  # checks it before opening a pool
        self._transport = AsyncTransport(self.url, **settings.transport_options())

    async def partitions_for(self, topic: str) -> int:
        """Partition count of ``topic``: cached, and read again once older than ``metadata_max_age_ms``."""
        return await self._partition_count(topic)

    async def _partition_count(self, topic: str, partition: int | None = None) -> int:
        """The count to route by; read from the broker when stale or smaller than ``partition`` needs."""
        count = self._partition_counts.lookup(topic, partition)
        if count is None:
            count = (await self._transport.call(calls.get_topic(topic))).partition_count
            self._partition_counts.learned(topic, count)
        return count

    async def close(self) -> None:
        """Release connections."""
        await self._transport.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
