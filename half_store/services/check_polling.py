"""Back-checks for producers that cannot take calls: they long-poll for them instead.

A check handed to one poller is claimed (counted, and its next check pushed out by
the poll lease), so no other poller gets it until that lease runs out unanswered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from half_store.domain.constants import POLLER_PREFIX
from half_store.domain.half_records import CheckPayload, Listener
from half_store.domain.records import now_ms
from half_store.services.check_decisions import check_payload, need_discard
from half_store.services.half_messages import HalfMessageService
from half_store.services.notifier import PartitionNotifier
from half_store.settings import Settings

POLL_RECHECK_SECONDS = 0.25


class CheckPolling:
    def __init__(self, halves: HalfMessageService, settings: Settings, notifier: PartitionNotifier) -> None:
        self.halves = halves
        self.notifier = notifier  # a waiting poll takes a long-poll place, like a waiting fetch
        self.settings = settings
        self.lease_ms = int(settings.poll_check_lease_seconds * 1000)

    async def poll(
        self,
        producer_group: str,
        instance_id: str,
        max_wait_ms: int,
        max_checks: int,
        client_gone: Callable[[], Awaitable[bool]] | None = None,
    ) -> list[CheckPayload]:
        # Being polled marks the group as reachable, so the checker leaves its checks to pollers.
        ttl = int(max(30, self.settings.check_interval_seconds * 2, max_wait_ms / 1000 * 2))
        await self.halves.register_listener(
            Listener(producer_group, poller_instance(instance_id), None, None, ttl, now_ms())
        )
        checks = await self._claim(producer_group, instance_id, max_checks)
        if checks or max_wait_ms <= 0:
            return checks
        deadline = time.monotonic() + max_wait_ms / 1000
        async with self.notifier.admitted():
            while (remaining := deadline - time.monotonic()) > 0:
                await asyncio.sleep(min(POLL_RECHECK_SECONDS, remaining))
                if client_gone is not None and await client_gone():
                    break  # checks are claimed only while someone is there to take them
                checks = await self._claim(producer_group, instance_id, max_checks)
                if checks:
                    break
        return checks

    async def _claim(self, producer_group: str, instance_id: str, max_checks: int) -> list[CheckPayload]:
        due = await self.halves.due_for_check(max_checks, producer_group)
        checkable = [h for h in due if not need_discard(h, self.settings.check_max)]  # the checker discards the rest
        # In the check history as sent to this poller; its commit or rollback is the answer.
        asked: list[str | None] = [poller_instance(instance_id)] * len(checkable)
        return [check_payload(c) for c in await self.halves.claim_checks(checkable, self.lease_ms, asked)]


def poller_instance(instance_id: str) -> str:
    """How a polling producer appears among its group's listeners and in check histories."""
    return POLLER_PREFIX + instance_id
