"""Wakes long-polling fetches when their partition gets new readable data.

Writes in this process notify directly. Writes from other broker processes on the
same database cannot, so a waiter also re-reads the database now and then
(``recheck_seconds``); that bounds the cost of a waiting fetch to a few cheap
queries per second instead of a tight polling loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable

from half_store.domain.errors import TooManyRequests

PartitionKey = tuple[int, int]  # (topic_id, partition)


class PartitionNotifier:
    def __init__(self, max_waiters: int, recheck_seconds: float = 0.5) -> None:
        self._waiters: dict[PartitionKey, set[asyncio.Event]] = defaultdict(set)
        self._count = 0
        self._max_waiters = max_waiters
        self.recheck_seconds = recheck_seconds

    @property
    def waiting(self) -> int:
        return self._count

    @contextlib.asynccontextmanager
    async def admitted(self) -> AsyncIterator[None]:
        """Hold one of the ``max_waiters`` long-poll places for a whole request (429 when none is free)."""
        if self._count >= self._max_waiters:
            raise TooManyRequests(f"too many long-polling requests waiting (limit {self._max_waiters})")
        self._count += 1
        try:
            yield
        finally:
            self._count -= 1

    def notify(self, keys: Iterable[PartitionKey]) -> None:
        for key in keys:
            for event in self._waiters.get(key, ()):
                event.set()

    async def wait(self, keys: Iterable[PartitionKey], timeout: float) -> None:
        """Return when one of ``keys`` is notified, or after ``min(timeout, recheck_seconds)``.

        Call it inside :meth:`admitted`: the place is taken once per request, not per wait.
        """
        event = asyncio.Event()
        keys = list(keys)
        for key in keys:
            self._waiters[key].add(event)
        try:
            await asyncio.wait_for(event.wait(), min(timeout, self.recheck_seconds))
        except TimeoutError:
            pass
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._waiters[key]
