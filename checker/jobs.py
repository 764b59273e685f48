"""The broker's background jobs on APScheduler, run by one broker process at a time.

Every broker process schedules the jobs, but a job only does work in the process
holding the ``checker`` lease in the database. The holder renews it every third of
its lifetime; if that process dies, another takes the lease over once it lapses
(three check intervals by default, between 2 and 15 seconds).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from checker.back_check import BackChecker
from checker.guarded_http import guarded_client
from half_store.domain.constants import CHECKER_LEASE, JOB_BACK_CHECK, JOB_RETENTION
from half_store.domain.records import now_ms
from half_store.metrics import CHECKER_LEADER
from half_store.services.callback_guard import CallbackGuard
from half_store.services.coordinator import Coordinator
from half_store.services.delayed_messages import DELIVER_BATCH, DelayedMessageService
from half_store.services.group_coordinator import GroupCoordinator
from half_store.services.half_messages import HalfMessageService
from half_store.services.retention import Retention
from half_store.services.share_groups import ShareGroupService
from half_store.settings import Settings
from half_store.storage import lease_store
from half_store.storage.store import Store

log = logging.getLogger(__name__)


class BackgroundJobs:
    def __init__(
        self,
        store: Store,
        halves: HalfMessageService,
        coordinator: Coordinator,
        settings: Settings,
        groups: GroupCoordinator,
        shares: ShareGroupService,
        delays: DelayedMessageService,
    ) -> None:
        self.store = store
        self.settings = settings
        self.coordinator = coordinator
        self.groups = groups
        self.shares = shares
        self.delays = delays
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        # Callbacks go only to allowed networks, checked again at every connection (SSRF; docs/security.md).
        guard = halves.callback_guard or CallbackGuard(settings.callback_networks)
        self.http = guarded_client(guard, settings.check_concurrency)
        self.back_checker = BackChecker(halves, settings, self.http)
        self.retention = Retention(store, settings)
        self._leader_until = 0.0
        self.scheduler = AsyncIOScheduler()

    def start(self) -> None:
        soon = datetime.now() + timedelta(milliseconds=100)
        lease_every = self.settings.checker_lease_seconds / 3
        self.scheduler.add_job(self.renew_lease, "interval", seconds=lease_every, next_run_time=datetime.now())
        self.scheduler.add_job(
            self.check_half_messages, "interval", seconds=self.settings.check_interval_seconds, next_run_time=soon
        )
        self.scheduler.add_job(
            self.end_transactions, "interval", seconds=min(1.0, self.settings.check_interval_seconds), next_run_time=soon
        )
        self.scheduler.add_job(self.clean_up, "interval", seconds=60, next_run_time=soon)
        self.scheduler.add_job(
            self.apply_retention, "interval", seconds=self.settings.retention_interval_seconds, next_run_time=soon
        )
        expiry_every = self.settings.group_expiry_interval_seconds
        self.scheduler.add_job(self.expire_group_members, "interval", seconds=expiry_every, next_run_time=soon)
        self.scheduler.add_job(self.dead_letter_share_records, "interval", seconds=1.0, next_run_time=soon)
        self.scheduler.add_job(
            self.deliver_delayed_messages, "interval", seconds=self.settings.delay_interval_seconds, next_run_time=soon
        )
        for job in self.scheduler.get_jobs():
            job.modify(max_instances=1, coalesce=True, misfire_grace_time=None)
        self.scheduler.start()
        CHECKER_LEADER.set_function(lambda: float(self.is_leader))  # read at scrape time, lapses on its own

    async def close(self) -> None:
        self.scheduler.shutdown(wait=False)
        CHECKER_LEADER.set_function(lambda: 0.0)
        await self.back_checker.close()
        await self.http.aclose()
        if self.is_leader:
            await self.store.write(lambda conn: lease_store.release(conn, CHECKER_LEASE, self.holder))

    @property
    def is_leader(self) -> bool:
        """Holding the lease, by this process's clock, with a margin for clock steps and slow renewals."""
        return time.monotonic() < self._leader_until

    async def renew_lease(self) -> None:
        ttl = self.settings.checker_lease_seconds
        # Measured from before the request: the lease can only have started later than this.
        asked_at = time.monotonic()
        try:
            leader = await self.store.write(
                lambda conn: lease_store.try_acquire(conn, CHECKER_LEASE, self.holder, now_ms(), int(ttl * 1000))
            )
        except Exception:  # a database hiccup: the lease lapses on its own, retry next time
            log.warning("could not renew the checker lease", exc_info=True)
            leader = False
        was_leader = self.is_leader
        self._leader_until = asked_at + ttl * 0.8 if leader else 0.0
        if leader != was_leader:
            log.info("%s the checker lease", "took" if leader else "lost")

    async def check_half_messages(self) -> None:
        if await self._guarded("back-check", self.back_checker.run_once):
            await self._record_round(JOB_BACK_CHECK)

    async def end_transactions(self) -> None:
        await self._guarded("transaction timeouts", self.coordinator.abort_expired)
        await self._guarded("prepared transactions", self.coordinator.complete_prepared)

    async def expire_group_members(self) -> None:
        """Members whose session lapsed leave their group, so their partitions go to the others."""
        await self._guarded("group session expiry", self.groups.expire_sessions)

    async def dead_letter_share_records(self) -> None:
        """Share-group records whose last allowed lock ran out go to their dead-letter topic,
        even when nobody receives from the group any more."""
        await self._guarded("share-group dead letters", self.shares.dead_letter_expired)

    async def deliver_delayed_messages(self) -> None:
        """Delay messages whose time has come move into their topics (at most once each)."""

        async def deliver_all() -> None:
            while await self.delays.deliver_due() == DELIVER_BATCH:
                pass  # a full batch: more may be due

        await self._guarded("delay messages", deliver_all)

    async def clean_up(self) -> None:
        await self._guarded("system retention", self.retention.run_once)

    async def apply_retention(self) -> None:
        if await self._guarded("retention", self.retention.apply_to_topics):
            await self._record_round(JOB_RETENTION)

    async def _guarded(self, name: str, job: Callable[[], Awaitable[object]]) -> bool:
        """Run ``job`` if this process holds the lease; True if it ran and finished."""
        if not self.is_leader:
            return False
        try:
            await job()
        except Exception:  # a failed round is retried next interval
            log.exception("%s job failed", name)
            return False
        return True

    async def _record_round(self, job: str) -> None:
        """When the job last finished a round, for ``GET /v1/checker`` in any broker process."""
        try:
            await self.store.write(lambda conn: lease_store.record_round(conn, job, self.holder, now_ms()))
        except Exception:  # only the status report misses this round
            log.warning("could not record the %s round", job, exc_info=True)
