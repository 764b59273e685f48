"""The services of one broker process, wired together (what routes and jobs use)."""

from __future__ import annotations

from dataclasses import dataclass

from app.api.encoding import MessageLimits
from app.coordinator import Coordinator
from app.log_service import LogService
from app.notifier import PartitionNotifier
from app.settings import Settings
from app.storage.database import open_database
from app.storage.store import Store
from checker.polling import CheckPolling
from half_store.service import HalfMessageService


@dataclass
class Broker:
    settings: Settings
    store: Store
    log: LogService
    coordinator: Coordinator
    halves: HalfMessageService
    polling: CheckPolling
    limits: MessageLimits

    @classmethod
    def open(cls, settings: Settings) -> Broker:
        store = Store(open_database(settings.database_url, sqlite_synchronous=settings.sqlite_synchronous))
        notifier = PartitionNotifier(settings.max_long_poll_waiters)
        log = LogService(store, notifier)
        halves = HalfMessageService(log, settings.transaction_timeout_seconds)
        return cls(
            settings=settings,
            store=store,
            log=log,
            coordinator=Coordinator(log, settings),
            halves=halves,
            polling=CheckPolling(halves, settings, notifier),
            limits=MessageLimits(settings.max_message_bytes, settings.max_header_count, settings.max_header_bytes),
        )
