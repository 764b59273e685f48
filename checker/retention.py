"""Bounded growth: forget resolved half messages after the retention and truncate the system logs.

Resolved half messages stay answerable (a retried commit gets the same body) for
``resolved_retention_seconds``; after that their index rows go, and the half and
op-half topics are truncated below the lowest offset still indexed, so both stay
bounded by the resolution rate times the retention however long the broker runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection

from half_store.domain.constants import HALF_TOPIC, OP_HALF_TOPIC
from half_store.domain.records import now_ms
from half_store.settings import Settings
from half_store.storage import half_message_store as half_index
from half_store.storage import log_store, producer_store, txn_store
from half_store.storage.store import Store

BATCH = 5000


@dataclass(frozen=True, slots=True)
class RetentionReport:
    purged_half_messages: int
    truncated_log_rows: int
    expired_listeners: int
    expired_producers: int
    purged_transactions: int


class Retention:
    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings

    async def run_once(self) -> RetentionReport:
        return await self.store.write(self.unit)

    def unit(self, conn: Connection) -> RetentionReport:
        now = now_ms()
        cutoff = now - int(self.settings.resolved_retention_seconds * 1000)
        purged = half_index.purge_resolved(conn, cutoff, BATCH)
        truncated = self._truncate_system_logs(conn)
        listeners = half_index.delete_expired_listeners(conn, now)
        producers = producer_store.expire_transactional_ids(conn, now - self.settings.transactional_id_expiration_ms)
        transactions = txn_store.purge_finished(conn, cutoff, BATCH)
        return RetentionReport(purged, truncated, listeners, producers, transactions)

    def _truncate_system_logs(self, conn: Connection) -> int:
        half_topic = self.store.topic_sync(conn, HALF_TOPIC)
        op_topic = self.store.topic_sync(conn, OP_HALF_TOPIC)
        lowest_half, lowest_op = half_index.oldest_retained_offsets(conn)
        _, half_end = log_store.partition_bounds(conn, half_topic, 0)
        _, op_end = log_store.partition_bounds(conn, op_topic, 0)
        removed = log_store.truncate_before(conn, half_topic, 0, half_end if lowest_half is None else lowest_half)
        removed += log_store.truncate_before(conn, op_topic, 0, op_end if lowest_op is None else lowest_op)
        return removed
