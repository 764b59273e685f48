"""Bounded growth: retention of user topics, and compaction of the system logs and indexes.

This service decides what goes and deletes it; ``checker/jobs.py`` only runs it on its schedule,
under the checker's lease.

User topics: every ``retention_interval_seconds`` whole messages are deleted from the
head of each partition of a topic with a time or size limit (its own, or the broker's
default), never at or past the last stable offset, and the log start offset moves up
(a fetch below it gets 416). Each write deletes at most ``TOPIC_BATCH`` messages of one
partition, so the group-commit writer is never held long; a round repeats them until
nothing is left to do. Messages of deleted topics are removed the same way.

System logs: resolved half messages stay answerable (a retried commit gets the same
body) for ``resolved_retention_seconds``; after that their index rows go, and the half
and op-half topics are truncated below the lowest offset still indexed, so both stay
bounded by the resolution rate times the retention however long the broker runs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import Connection

from half_store.domain.admin_records import TopicConfig
from half_store.domain.constants import HALF_TOPIC, OP_HALF_TOPIC, SCHEDULE_TOPIC, is_system_topic
from half_store.domain.errors import PartitionNotFound
from half_store.domain.records import Topic, now_ms
from half_store.metrics import (
    DELETED_TOPIC_MESSAGES_PURGED,
    LOG_START_MOVES,
    RETENTION_DELETED_BYTES,
    RETENTION_DELETED_MESSAGES,
)
from half_store.settings import Settings
from half_store.storage import half_message_store as half_index
from half_store.storage import (
    listener_store,
    log_store,
    producer_store,
    retention_store,
    schedule_store,
    topic_store,
    txn_store,
)
from half_store.storage.retention_store import PartitionRetained
from half_store.storage.store import Store

BATCH = 5000
# Messages of a user topic deleted by one write: about 15-25 ms of the writer's time on either
# database (docs/operations.md), so produce requests queued meanwhile wait that long at most.
TOPIC_BATCH = 1000


@dataclass(frozen=True, slots=True)
class RetentionReport:
    purged_half_messages: int
    truncated_log_rows: int
    expired_listeners: int
    expired_producers: int
    purged_transactions: int


@dataclass(frozen=True, slots=True)
class TopicRetentionReport:
    deleted_messages: int
    deleted_bytes: int
    log_start_moves: int
    purged_deleted_topic_messages: int


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
        listeners = listener_store.delete_expired_listeners(conn, now)
        producers = producer_store.expire_transactional_ids(conn, now - self.settings.transactional_id_expiration_ms)
        transactions = txn_store.purge_finished(conn, cutoff, BATCH)
        purged += schedule_store.purge_delivered(conn, cutoff, BATCH)
        return RetentionReport(purged, truncated, listeners, producers, transactions)

    def _truncate_system_logs(self, conn: Connection) -> int:
        half_topic = self.store.topic_sync(conn, HALF_TOPIC)
        op_topic = self.store.topic_sync(conn, OP_HALF_TOPIC)
        lowest_half, lowest_op = half_index.oldest_retained_offsets(conn)
        half_start, half_end = log_store.partition_bounds(conn, half_topic, 0)
        op_start, op_end = log_store.partition_bounds(conn, op_topic, 0)
        half_cut = half_end if lowest_half is None else lowest_half
        removed = log_store.truncate_before(conn, half_topic, 0, half_cut, half_start)
        removed += log_store.truncate_before(conn, op_topic, 0, op_end if lowest_op is None else lowest_op, op_start)
        # The schedule topic: everything below the oldest delay message still waiting has been moved.
        schedule_topic = self.store.topic_sync(conn, SCHEDULE_TOPIC)
        lowest_waiting = schedule_store.lowest_waiting_offset(conn)
        schedule_start, schedule_end = log_store.partition_bounds(conn, schedule_topic, 0)
        schedule_cut = schedule_end if lowest_waiting is None else lowest_waiting
        removed += log_store.truncate_before(conn, schedule_topic, 0, schedule_cut, schedule_start)
        return removed

    # -- user topics ---------------------------------------------------------------------------

    async def apply_to_topics(self) -> TopicRetentionReport:
        """One round: purge deleted topics' messages, then apply every user topic's limits."""
        purged = await self._purge_deleted_topics()
        found = [t for t in await self.store.read(log_store.list_topics) if not is_system_topic(t.name)]
        configs = await self.store.read(topic_store.all_configs)
        deleted = size = moves = 0
        for topic in found:
            limits = configs.get(topic.topic_id, TopicConfig()).effective(
                self.settings.retention_ms, self.settings.retention_bytes
            )
            if limits.retains:
                d, b, m = await self._apply_to_topic(topic, limits)
                deleted, size, moves = deleted + d, size + b, moves + m
        return TopicRetentionReport(deleted, size, moves, purged)

    async def _apply_to_topic(self, topic: Topic, limits: TopicConfig) -> tuple[int, int, int]:
        now = now_ms()
        try:
            heads = await self.store.read(lambda conn: retention_store.heads(conn, topic))
        except PartitionNotFound:
            return 0, 0, 0
        deleted = size = moves = 0
        for head in heads:
            if not retention_store.needs_work(head, limits, now):
                continue
            while True:
                try:
                    done = await self._retain(topic, head.partition, limits)
                except PartitionNotFound:  # the topic was deleted meanwhile
                    return deleted, size, moves
                if done.deleted_messages:
                    RETENTION_DELETED_MESSAGES.labels(topic.name).inc(done.deleted_messages)
                    RETENTION_DELETED_BYTES.labels(topic.name).inc(done.deleted_bytes)
                    LOG_START_MOVES.labels(topic.name).inc()
                    deleted, size, moves = deleted + done.deleted_messages, size + done.deleted_bytes, moves + 1
                if not done.more:
                    break
        return deleted, size, moves

    async def _retain(self, topic: Topic, partition: int, limits: TopicConfig) -> PartitionRetained:
        def unit(conn: Connection) -> PartitionRetained:
            return retention_store.retain_partition(conn, topic, partition, limits, now_ms(), TOPIC_BATCH)

        return await self.store.write(unit, locks=[(topic.topic_id, partition)])

    async def _purge_deleted_topics(self) -> int:
        purged = 0
        for topic_id in await self.store.read(topic_store.unpurged_deleted_topics):
            after = (0, 0)
            while True:
                purge = functools.partial(
                    topic_store.purge_deleted_messages, topic_id=topic_id, limit=TOPIC_BATCH, after=after
                )
                removed, after = await self.store.write(purge)
                if not removed:
                    break  # and it is marked purged
                purged += removed
                DELETED_TOPIC_MESSAGES_PURGED.inc(removed)
        return purged
