"""Shared plumbing of the asyncio classes: transport ownership, metadata cache, ``async with``."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from sdk import calls
from sdk._http import AsyncTransport, RetryPolicy


class AsyncBase:
    """Transport ownership, topic metadata cache and ``async with``."""

    def __init__(
        self,
        url: str,
        timeout: float,
        retry: RetryPolicy | None,
        max_connections: int,
        *,
        token: str | None = None,
        verify: bool | str = True,
    ) -> None:
        self.url = url.rstrip("/")
        self._transport = AsyncTransport(
            self.url, timeout=timeout, retry=retry, max_connections=max_connections, token=token, verify=verify
        )
        self._partition_counts: dict[str, int] = {}

    async def partitions_for(self, topic: str) -> int:
        """Partition count of ``topic`` (cached: partitions are never added)."""
        count = self._partition_counts.get(topic)
        if count is None:
            count = (await self._transport.call(calls.get_topic(topic))).partition_count
            self._partition_counts[topic] = count
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
