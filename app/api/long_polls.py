"""Long-poll slots shared fairly between principals.

The core limits how many requests may wait at once (``HALFMQ_MAX_LONG_POLL_WAITERS``, then
429). Without a share per principal, one principal could take every slot and every other
principal's long poll would be refused. Each principal may hold at most
``HALFMQ_MAX_LONG_POLL_WAITERS_PER_PRINCIPAL`` waiting requests in a front process (default:
a quarter of the global limit); beyond that its own long polls get 429, and the others keep
theirs. With authentication off everybody is one anonymous caller and only the global limit
applies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from fastapi import Request

from app.api.authorize import principal_of
from app.metrics import LONG_POLL_QUOTA_REFUSALS
from half_store.domain.errors import TooManyRequests


class LongPollQuota:
    def __init__(self, per_principal: int) -> None:
        self.per_principal = per_principal
        self._held: Counter[str] = Counter()

    @contextmanager
    def slot(self, principal: str | None, max_wait_ms: int) -> Iterator[None]:
        """Hold one of ``principal``'s slots while a request that may wait runs (no slot for one that won't)."""
        if principal is None or max_wait_ms <= 0:
            yield
            return
        if self._held[principal] >= self.per_principal:
            LONG_POLL_QUOTA_REFUSALS.inc()
            raise TooManyRequests(f"this principal already has {self.per_principal} long-polling requests waiting")
        self._held[principal] += 1
        try:
            yield
        finally:
            self._held[principal] -= 1
            if not self._held[principal]:
                del self._held[principal]


def long_poll_slot(request: Request, max_wait_ms: int) -> AbstractContextManager[None]:
    """The slot a route holds while its call to the core may wait for ``max_wait_ms``."""
    quota: LongPollQuota = request.app.state.long_polls
    return quota.slot(principal_of(request), max_wait_ms)
