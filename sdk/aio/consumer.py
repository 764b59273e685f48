"""Asyncio twin of :class:`sdk.Consumer` (same bookkeeping, concurrent long-polls)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable, Mapping

from sdk import _api
from sdk._api import TopicPartition
from sdk._consumer_core import MAX_BROKER_WAIT_MS, ConsumerCore
from sdk._http import DEFAULT_MAX_CONNECTIONS, DEFAULT_TIMEOUT, RetryPolicy
from sdk.aio._base import AsyncBase
from sdk.consumer import DEFAULT_LONG_POLL_SLICE
from sdk.errors import OffsetOutOfRangeError
from sdk.message import Message
from sdk.models import FetchResult

_MAX_PARKED = 8  # concurrent long-polls per AsyncConsumer, well under the pool size


class AsyncConsumer(AsyncBase):
    """Asyncio twin of :class:`sdk.Consumer`: ``await poll()``, ``async for``, ``await commit()``.

    With several partitions and nothing to read it long-polls up to eight of them
    at once (``long_poll_slice`` seconds per round) and returns as soon as one has
    data.
    """

    def __init__(
        self, url: str, group: str, topics: str | Iterable[str], isolation_level: str = "read_committed", *,
        partitions: Iterable[TopicPartition] | None = None, auto_offset_reset: str = "earliest",
        max_poll_messages: int = 500, long_poll_slice: float = DEFAULT_LONG_POLL_SLICE,
        timeout: float = DEFAULT_TIMEOUT, retry: RetryPolicy | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS, token: str | None = None, verify: bool | str = True,
    ) -> None:
        super().__init__(url, timeout, retry, max_connections, token=token, verify=verify)
        self._core = ConsumerCore(
            group, topics, partitions=partitions, isolation_level=isolation_level, auto_offset_reset=auto_offset_reset
        )
        self.max_poll_messages = max_poll_messages
        self.long_poll_slice = long_poll_slice

    @property
    def group(self) -> str:
        """The consumer group."""
        return self._core.group

    async def assignment(self) -> list[TopicPartition]:
        """The partitions this consumer reads."""
        await self._ensure_assigned()
        return list(self._core.positions)

    async def positions(self) -> dict[TopicPartition, int]:
        """Next offset to read per partition (what ``commit()`` would commit)."""
        await self._ensure_assigned()
        return dict(self._core.positions)

    async def seek(self, topic: str, partition: int, offset: int) -> None:
        """Read ``(topic, partition)`` from ``offset`` next."""
        await self._ensure_assigned()
        self._core.seek((topic, partition), offset)

    async def poll(self, timeout: float = 1.0, max_messages: int | None = None) -> list[Message]:
        """The next messages of any assigned partition, waiting up to ``timeout`` seconds.

        When several parked partitions wake at once, all their messages are
        returned, which can exceed ``max_messages`` (never dropped, never repeated).
        """
        await self._ensure_assigned()
        budget = max_messages or self.max_poll_messages
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            batch: list[Message] = []
            rotation = self._core.rotation()
            for tp in rotation:
                if len(batch) >= budget:
                    break
                batch += await self._fetch(tp, budget - len(batch), 0)
            remaining = deadline - time.monotonic()
            if batch or remaining <= 0 or not rotation:
                return batch
            batch = await self._park(rotation, budget, remaining)
            if batch:
                return batch

    async def _park(self, rotation: list[TopicPartition], budget: int, remaining: float) -> list[Message]:
        # Long-poll a bounded number of partitions concurrently (the pool is small
        # on purpose) and return once one has data. Positions advance only for
        # fetches that finished, so a cancelled long-poll loses nothing. The broker
        # keeps a cancelled long-poll waiting until its max_wait, so with several
        # partitions each wait is capped at long_poll_slice to bound that waste.
        parked = rotation[:_MAX_PARKED]
        if len(rotation) > 1:
            remaining = min(remaining, self.long_poll_slice)
        wait_ms = int(remaining * 1000)
        tasks = {asyncio.ensure_future(self._fetch_raw(tp, budget, wait_ms)): tp for tp in parked}
        pending = set(tasks)
        messages: list[Message] = []
        try:
            while pending and not messages:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    result = task.result()
                    if result is not None:
                        messages += self._core.record(tasks[task], result)
            return messages
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit everything returned by ``poll`` so far (or ``offsets``)."""
        await self._ensure_assigned()
        to_commit = dict(offsets) if offsets is not None else self._core.uncommitted()
        if to_commit:
            await self._transport.call(_api.commit_group_offsets(self._core.group, to_commit))
            self._core.mark_committed(to_commit)

    async def _fetch(self, tp: TopicPartition, max_messages: int, wait_ms: int) -> list[Message]:
        result = await self._fetch_raw(tp, max_messages, wait_ms)
        return self._core.record(tp, result) if result is not None else []

    async def _fetch_raw(self, tp: TopicPartition, max_messages: int, wait_ms: int) -> FetchResult | None:
        call = _api.fetch(
            tp[0], tp[1], self._core.positions[tp], max_messages=max_messages,
            max_wait_ms=min(wait_ms, MAX_BROKER_WAIT_MS), isolation=self._core.isolation_level,
        )
        try:
            return await self._transport.call(call)
        except OffsetOutOfRangeError:
            metadata = await self._transport.call(_api.get_topic(tp[0]))
            self._core.seek(tp, self._core.reset_offset(tp, metadata))
            return None

    async def _ensure_assigned(self) -> None:
        core = self._core
        core.check_open()
        if core.assigned:
            return
        topics = sorted(set(core.topics) | {t for t, _ in core.requested_partitions or []})
        metadata = {t: await self._transport.call(_api.get_topic(t)) for t in topics}
        partitions = core.assignment_for(list(metadata.values()))
        committed = await self._transport.call(_api.group_offsets(core.group))
        core.assign(partitions, metadata, committed)

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Message]:
        while not self._core.closed:
            for message in await self.poll(timeout=1.0):
                yield message

    async def close(self) -> None:
        """Stop consuming and release connections (does not commit)."""
        self._core.closed = True
        await super().close()
