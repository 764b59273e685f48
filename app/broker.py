"""The services of one broker, wired together, and their lifecycle (what routes and jobs use)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from app.handle import BrokerHandle
from checker.jobs import BackgroundJobs
from half_store.domain.errors import StorageUnavailable
from half_store.metrics import CONSUMER_LAG, GROUP_MEMBERS, LONG_POLL_WAITERS, core_metrics
from half_store.services.access import AccessService
from half_store.services.admin import AdminService
from half_store.services.batch_log import BatchLog
from half_store.services.broker_registry import BrokerRegistry
from half_store.services.callback_guard import CallbackGuard
from half_store.services.check_polling import CheckPolling
from half_store.services.classic_groups import ClassicGroups
from half_store.services.coordinator import Coordinator
from half_store.services.delayed_messages import DelayedMessageService
from half_store.services.group_coordinator import GroupCoordinator
from half_store.services.half_messages import HalfMessageService
from half_store.services.log_service import LogService
from half_store.services.notifier import PartitionNotifier
from half_store.services.producer_transactions import ProducerTransactions
from half_store.services.share_groups import ShareGroupService
from half_store.settings import Settings
from half_store.storage.database import open_database
from half_store.storage.migrate import upgrade
from half_store.storage.store import Store

log = logging.getLogger(__name__)


@dataclass
class Broker(BrokerHandle):
    """The services in this process (the core, or a one-process broker), typed as the real classes.

    The fields narrow :class:`~app.handle.BrokerHandle`'s Protocols to the services that
    implement them: mypy checks each class against its Protocol here.
    """

    store: Store
    log: LogService
    coordinator: Coordinator
    halves: HalfMessageService
    polling: CheckPolling
    access: AccessService
    admin: AdminService
    groups: GroupCoordinator
    shares: ShareGroupService
    batches: BatchLog
    classic: ClassicGroups
    producer_txns: ProducerTransactions
    delays: DelayedMessageService
    brokers: BrokerRegistry

    @classmethod
    def open(cls, settings: Settings) -> Broker:
        database = open_database(settings.database_url, sqlite_synchronous=settings.sqlite_synchronous)
        store = Store(database, read_threads=settings.read_threads)
        notifier = PartitionNotifier(settings.max_long_poll_waiters)
        log_service = LogService(store, notifier)
        halves = HalfMessageService(
            log_service, settings.transaction_timeout_seconds, CallbackGuard(settings.callback_networks)
        )
        coordinator = Coordinator(log_service, settings)
        return cls(
            settings=settings,
            store=store,
            log=log_service,
            coordinator=coordinator,
            halves=halves,
            polling=CheckPolling(halves, settings, notifier),
            access=AccessService(store),
            admin=AdminService(log_service, settings),
            groups=GroupCoordinator(store, settings),
            shares=ShareGroupService(log_service, settings),
            batches=BatchLog(log_service),
            classic=ClassicGroups(settings),
            producer_txns=ProducerTransactions(coordinator),
            delays=DelayedMessageService(log_service, settings),
            brokers=BrokerRegistry(store),
        )

    async def ready(self) -> bool:
        """Whether the database answers."""
        try:
            await self.store.ping()
        except StorageUnavailable:
            return False
        return True

    async def metrics(self) -> bytes:
        """The core's metrics in Prometheus text format."""
        LONG_POLL_WAITERS.set(self.log.notifier.waiting)
        try:
            counts = await self.groups.live_member_counts()
        except StorageUnavailable:
            counts = None  # the other metrics still answer; the gauge keeps its last values
        if counts is not None:
            GROUP_MEMBERS.clear()  # a group whose members are all gone drops out instead of staying at its last count
            for group, members in counts.items():
                GROUP_MEMBERS.labels(group).set(members)
        with contextlib.suppress(StorageUnavailable):  # the gauges keep their last values; /readyz tells the outage
            lags = await self.groups.lags()
            CONSUMER_LAG.clear()  # a deleted group or topic drops out instead of staying at its last lag
            for found in lags:
                CONSUMER_LAG.labels(found.group, found.topic, str(found.partition)).set(found.lag)
        with contextlib.suppress(StorageUnavailable):  # the gauge keeps its last value; /readyz tells the outage
            await self.shares.refresh_locked_gauge()
        with contextlib.suppress(StorageUnavailable):
            await self.delays.refresh_waiting_gauge()
        return core_metrics()


@asynccontextmanager
async def running_broker(settings: Settings) -> AsyncIterator[Broker]:
    """A started broker: schema migrated, writer running, crash recovery done, background jobs on."""
    broker = Broker.open(settings)
    try:
        if settings.migrate_on_start:
            upgrade(broker.store.database.writer)
        broker.store.start()
        broker.store.ensure_system_topics()
        broker.shares.load_secret()
        recovered = await broker.coordinator.complete_prepared()
        if recovered:
            log.info("completed %d transactions left prepared by a crash", recovered)
        jobs = BackgroundJobs(
            broker.store, broker.halves, broker.coordinator, settings, broker.groups, broker.shares, broker.delays
        )
        if settings.run_checker:
            jobs.start()
        try:
            yield broker
        finally:
            if settings.run_checker:
                await jobs.close()
            await broker.classic.close()
    finally:
        broker.store.close()
