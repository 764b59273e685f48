"""Share groups: queue consumption with per-message locks, acknowledgements and dead letters.

Many consumers of one group split a topic's committed messages message by message
(RocketMQ 5's SimpleConsumer, Kafka's KIP-932). The state lives in the database
(``share_partitions``, ``share_records``), receipts are signed and self-contained, so
any broker process on the database serves any consumer and accepts any receipt.

Every operation is a write in the group commit: they are merged per commit into one
run that locks all the share partitions it touches in key order, then runs each
operation in turn. Two broker processes therefore never work on one share partition
at once, and a record is locked by at most one delivery at a time.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from half_store.domain.constants import ISOLATION_READ_COMMITTED, is_system_topic
from half_store.domain.errors import OffsetOutOfRange, ReservedTopic, ShareGroupNotFound, TopicNotFound
from half_store.domain.records import PackedList, StoredMessage, Topic, now_ms
from half_store.domain.share_receipts import MalformedReceipt, Receipt, ReceiptCodec
from half_store.domain.share_records import (
    Acknowledgement,
    ReceiptResult,
    ReceivedMessage,
    SharePartitionView,
    ShareTopicView,
)
from half_store.domain.share_state import (
    RECEIPT_EXPIRED,
    UNKNOWN_RECEIPT,
    DeadLetterReason,
    FreshMessage,
    InFlightRecord,
    SharePartitionKey,
    plan_delivery,
)
from half_store.metrics import SHARE_DELIVERED, SHARE_LOCKED, SHARE_REDELIVERED
from half_store.services.log_service import LogService, read_partition
from half_store.services.notifier import PartitionKey
from half_store.services.share_changes import ShareChanges
from half_store.services.stamped_append import lock_open
from half_store.settings import Settings
from half_store.storage import log_store, share_store
from half_store.storage.writer import MergeKind

log = logging.getLogger(__name__)

ClientGone = Callable[[], Awaitable[bool]]
SECRET_NAME = "share-receipts"

# What an operation sees while it runs: the share partitions locked for it, with their end offsets.
Cursors = dict[SharePartitionKey, int]


@dataclass(frozen=True, slots=True)
class _ShareOp:
    """One share-group operation in a group commit.

    ``keys``: the share partitions it works in (locked before it runs); ``create``: a
    (group, topic id) whose share partitions are created if the group has none yet.
    """

    keys: tuple[SharePartitionKey, ...]
    run: Callable[[Connection, Cursors, ShareChanges], Any]
    create: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class _Acted:
    """What acting on one receipt did: the record after its move, and the receipt's answer."""

    record: InFlightRecord
    reason: DeadLetterReason | None
    result: ReceiptResult


@dataclass(frozen=True, slots=True)
class _Done:
    result: Any
    touched: set[PartitionKey]


class ShareGroupService:
    def __init__(self, log_service: LogService, settings: Settings) -> None:
        self.log = log_service
        self.store = log_service.store
        self.notifier = log_service.notifier
        self.settings = settings
        self._codec: ReceiptCodec | None = None
        self._rotation: dict[tuple[str, int], itertools.count[int]] = defaultdict(itertools.count)
        self._kind: MergeKind[_ShareOp, _Done] = MergeKind("share", self._run_many)

    # -- set-up -----------------------------------------------------------------------------

    def load_secret(self) -> None:
        """Take the receipt secret from the settings, or the one every broker process on the database shares."""
        configured = self.settings.share_receipt_secret
        if configured is not None:
            self._codec = ReceiptCodec(configured.encode())
            return
        stored = self.store.writer.run_sync(lambda conn: share_store.secret(conn, SECRET_NAME, secrets.token_hex(32)))
        self._codec = ReceiptCodec(stored.encode())

    @property
    def codec(self) -> ReceiptCodec:
        if self._codec is None:
            self.load_secret()
        assert self._codec is not None
        return self._codec

    # -- receive -----------------------------------------------------------------------------

    async def receive(
        self,
        group: str,
        topic_name: str,
        max_messages: int,
        lock_ms: int,
        max_wait_ms: int,
        ordered: bool = False,
        client_gone: ClientGone | None = None,
    ) -> list[ReceivedMessage]:
        """Lock and return up to ``max_messages`` committed messages; with ``max_wait_ms``, wait for some."""
        topic = await self._share_topic(topic_name)
        received = await self._receive_once(group, topic, max_messages, lock_ms, ordered)
        if received or max_wait_ms <= 0:
            return received
        deadline = time.monotonic() + max_wait_ms / 1000
        keys = [(topic.topic_id, p) for p in range(topic.partitions)]
        async with self.notifier.admitted():
            while (remaining := deadline - time.monotonic()) > 0:
                # Woken by new data, a release or a commit in this process; by the recheck for
                # anything else (another process, a lock running out).
                await self.notifier.wait(keys, remaining)
                if client_gone is not None and await client_gone():
                    break
                if not await self.store.read(lambda conn: self._may_deliver(conn, group, topic)):
                    continue
                received = await self._receive_once(group, topic, max_messages, lock_ms, ordered)
                if received:
                    break
        return received

    async def _share_topic(self, name: str) -> Topic:
        if is_system_topic(name):
            raise ReservedTopic(f"{name!r} is a system topic; share groups do not read it")
        return await self.store.topic(name)

    async def _receive_once(
        self, group: str, topic: Topic, max_messages: int, lock_ms: int, ordered: bool
    ) -> list[ReceivedMessage]:
        first = next(self._rotation[(group, topic.topic_id)]) % topic.partitions
        order = [(first + i) % topic.partitions for i in range(topic.partitions)]
        keys = tuple((group, topic.topic_id, p) for p in range(topic.partitions))

        def run(conn: Connection, cursors: Cursors, changes: ShareChanges) -> list[ReceivedMessage]:
            now = now_ms()
            received: PackedList[ReceivedMessage] = PackedList(ReceivedMessage)
            for partition in order:
                if len(received) >= max_messages:
                    break
                received += self._receive_from(
                    conn, cursors, changes, topic, partition, group, max_messages - len(received), lock_ms, ordered, now
                )
            return received

        received: list[ReceivedMessage] = await self._write(_ShareOp(keys, run, create=(group, topic.topic_id)))
        SHARE_DELIVERED.inc(len(received))
        SHARE_REDELIVERED.inc(sum(1 for m in received if m.delivery_count > 1))
        return received

    def _receive_from(
        self,
        conn: Connection,
        cursors: Cursors,
        changes: ShareChanges,
        topic: Topic,
        partition: int,
        group: str,
        budget: int,
        lock_ms: int,
        ordered: bool,
        now: int,
    ) -> list[ReceivedMessage]:
        """One share partition of a receive: redeliveries first, then fresh messages from the log."""
        key = (group, topic.topic_id, partition)
        limit = self.settings.share_max_in_flight
        if ordered:  # every in-flight record may hold a key back
            in_flight = share_store.in_flight(conn, key)
            count = len(in_flight)
        else:
            in_flight = share_store.in_flight(conn, key, visible_by=now, limit=budget)
            count = share_store.count_in_flight(conn, key)
        redeliverable = sum(1 for r in in_flight if r.expired(now).deliverable(now))
        room = min(budget - redeliverable if not ordered else budget, limit - count)
        fresh: dict[int, StoredMessage] = {}
        end = cursors[key]
        new_end = end
        if room > 0:
            read = self._read_log(conn, topic, partition, end, room)
            fresh = {m.offset: m for m in read[0]}
            new_end = read[1]
        plan = plan_delivery(
            group, topic.topic_id, partition, in_flight, [FreshMessage(o, m.key) for o, m in fresh.items()],
            budget=budget, now=now, lock_ms=lock_ms, max_deliveries=self.settings.share_max_deliveries, ordered=ordered,
        )
        if plan.end_offset is not None:
            new_end = plan.end_offset
        if new_end != end:
            changes.end_offsets[key] = cursors[key] = new_end
        for record in plan.dead_letters:
            changes.put(record, DeadLetterReason.MAX_DELIVERIES)
        for record in plan.parked:
            changes.put(record, new=True)
        old = [r.offset for r in plan.acquired if r.offset not in plan.new]
        bodies = {o: m for o, (m, _) in log_store.read_offsets(conn, topic, partition, old).items()} if old else {}
        bodies.update(fresh)
        received = []
        for record in plan.acquired:
            message = bodies.get(record.offset)
            if message is None:  # removed from the log by retention: nothing left to deliver
                changes.drop(record)
                continue
            changes.put(record, new=record.offset in plan.new)
            receipt = self.codec.encode(
                Receipt(group, topic.topic_id, partition, record.offset, record.delivery_count, record.generation)
            )
            received.append(ReceivedMessage(*message[:8], receipt, record.delivery_count, record.visible_at))
        return received

    @staticmethod
    def _read_log(
        conn: Connection, topic: Topic, partition: int, end: int, limit: int
    ) -> tuple[list[StoredMessage], int]:
        """Committed messages from ``end`` (the fetch path: below the LSO, no aborted ones, no markers)."""
        try:
            result = read_partition(conn, topic, partition, end, limit, ISOLATION_READ_COMMITTED)
        except OffsetOutOfRange:  # retention removed messages the group never looked at
            start, _ = log_store.partition_bounds(conn, topic, partition)
            result = read_partition(conn, topic, partition, max(end, start), limit, ISOLATION_READ_COMMITTED)
        return result.messages, result.next_offset

    def _may_deliver(self, conn: Connection, group: str, topic: Topic) -> bool:
        """A cheap read before a waiting receive writes again: is anything there for the group?"""
        if share_store.has_visible_records(conn, group, topic.topic_id, now_ms()):
            return True
        ends = share_store.end_offsets(conn, group, topic.topic_id)
        return any(
            state.last_stable_offset > ends.get(state.partition, state.log_start_offset)
            for state in log_store.partition_states(conn, topic)
        )

    # -- acknowledgements -------------------------------------------------------------------

    async def acknowledge(self, group: str, acks: Sequence[Acknowledgement]) -> list[ReceiptResult]:
        """ACCEPT, RELEASE or REJECT each receipt; one result each, in order (never an error for the batch)."""
        max_deliveries = self.settings.share_max_deliveries

        def act(record: InFlightRecord, index: int, now: int) -> _Acted:
            ack = acks[index]
            moved, reason = record.acknowledge(ack.ack_type, now, ack.delay_ms, max_deliveries)
            return _Acted(moved, reason, ReceiptResult(ack.receipt))

        return await self._on_receipts(group, [a.receipt for a in acks], act)

    async def extend(self, group: str, receipts: Sequence[str], lock_ms: int) -> list[ReceiptResult]:
        """Renew the locks the receipts hold, to ``lock_ms`` from now; the receipts stay valid."""

        def act(record: InFlightRecord, index: int, now: int) -> _Acted:
            renewed = record.extend(now, lock_ms)
            return _Acted(renewed, None, ReceiptResult(receipts[index], lock_expires_ms=renewed.visible_at))

        return await self._on_receipts(group, receipts, act)

    async def acknowledge_in_transaction(self, txn_id: str, group: str, receipts: Sequence[str]) -> list[ReceiptResult]:
        """Hand the receipts' locks to an open transaction: ACCEPT if it commits, released if it aborts.

        The transaction must be OPEN; repeating the request for it is harmless.
        """

        def act(record: InFlightRecord, index: int, deadline: int) -> _Acted:
            return _Acted(record.enlist(txn_id, deadline), None, ReceiptResult(receipts[index]))

        return await self._on_receipts(group, receipts, act, txn_id=txn_id)

    async def _on_receipts(
        self,
        group: str,
        receipts: Sequence[str],
        act: Callable[[InFlightRecord, int, int], _Acted],
        *,
        txn_id: str | None = None,
    ) -> list[ReceiptResult]:
        """Check each receipt, then ``act`` on the records whose locks they still hold.

        A receipt this broker did not sign for this group is UNKNOWN_RECEIPT; one whose
        lock ran out, was given back or taken again is RECEIPT_EXPIRED. With ``txn_id``
        the transaction is locked first (it must be OPEN) and ``act`` gets its deadline
        instead of the time; a receipt already handed to it counts as done.
        """
        decoded: dict[int, Receipt] = {}
        results: dict[int, ReceiptResult] = {}
        for index, text in enumerate(receipts):
            receipt = self._decoded(text)
            if receipt is None or receipt.group != group:
                results[index] = ReceiptResult(text, UNKNOWN_RECEIPT)
            else:
                decoded[index] = receipt
        if not decoded and txn_id is None:
            return [results[i] for i in range(len(receipts))]
        keys = tuple(sorted({r.share_key for r in decoded.values()}))

        def run(conn: Connection, cursors: Cursors, changes: ShareChanges) -> dict[int, ReceiptResult]:
            now = now_ms()
            argument = now if txn_id is None else lock_open(conn, txn_id).expires_at
            current: dict[tuple[SharePartitionKey, int], InFlightRecord] = {}
            for key in keys:
                if key in cursors:
                    offsets = [r.offset for r in decoded.values() if r.share_key == key]
                    current.update({(key, o): r for o, r in share_store.records_at(conn, key, offsets).items()})
            answers: dict[int, ReceiptResult] = {}
            for index, receipt in decoded.items():
                where = (receipt.share_key, receipt.offset)
                record = current.get(where)
                if record is not None and txn_id is not None and _enlisted(record, receipt, txn_id):
                    answers[index] = ReceiptResult(receipts[index])  # a repeated transactional acknowledgement
                elif record is None or not record.holds(receipt.generation, now):
                    answers[index] = ReceiptResult(receipts[index], RECEIPT_EXPIRED)
                else:
                    acted = act(record, index, argument)
                    changes.put(acted.record, acted.reason)
                    current[where] = acted.record  # a second receipt for it in this request sees the move
                    answers[index] = acted.result
            return answers

        results.update(await self._write(_ShareOp(keys, run)))
        return [results[i] for i in range(len(receipts))]

    def _decoded(self, text: str) -> Receipt | None:
        try:
            return self.codec.decode(text)
        except MalformedReceipt:
            return None

    # -- describe, jobs, metrics ------------------------------------------------------------

    async def describe(self, group: str) -> list[ShareTopicView]:
        def query(conn: Connection) -> list[ShareTopicView]:
            rows = share_store.share_partitions_of(conn, group)
            if not rows:
                raise ShareGroupNotFound(f"share group {group!r} has not received from any topic")
            now = now_ms()
            counts = share_store.record_counts(conn, group, now)
            views: dict[int, ShareTopicView] = {}
            for row in rows:
                try:
                    topic = self.store.topic_by_id_sync(conn, row.topic_id)
                except TopicNotFound:
                    continue  # the topic was deleted; its share state goes with it
                state = log_store.partition_state(conn, topic, row.partition)
                found = counts.get((row.topic_id, row.partition))
                unread = log_store.count_readable(conn, topic, row.partition, row.end_offset, state.last_stable_offset)
                view = views.setdefault(row.topic_id, ShareTopicView(topic.name, []))
                view.partitions.append(
                    SharePartitionView(
                        row.partition,
                        row.end_offset if found is None or found.start_offset is None else found.start_offset,
                        row.end_offset,
                        unread + (found.waiting if found else 0),
                        found.locked if found else 0,
                        row.accepted,
                        row.dead_lettered,
                    )
                )
            return sorted(views.values(), key=lambda v: v.topic)

        return await self.store.read(query)

    async def dead_letter_expired(self, limit: int = 1000) -> int:
        """Dead-letter records whose last allowed lock ran out with nobody receiving (the checker runs this)."""
        max_deliveries = self.settings.share_max_deliveries
        keys = await self.store.read(
            lambda conn: share_store.partitions_with_expired_last_delivery(conn, now_ms(), max_deliveries, limit)
        )
        if not keys:
            return 0

        def run(conn: Connection, cursors: Cursors, changes: ShareChanges) -> int:
            now = now_ms()
            archived = 0
            for key in keys:
                if key not in cursors:
                    continue
                group, topic_id, partition = key
                due = share_store.in_flight(conn, key, visible_by=now)
                plan = plan_delivery(
                    group, topic_id, partition, due, [], budget=0, now=now, lock_ms=0,
                    max_deliveries=max_deliveries, ordered=False,
                )
                for record in plan.dead_letters:
                    changes.put(record, DeadLetterReason.MAX_DELIVERIES)
                archived += len(plan.dead_letters)
            return archived

        archived: int = await self._write(_ShareOp(tuple(keys), run))
        return archived

    async def refresh_locked_gauge(self) -> None:
        SHARE_LOCKED.set(await self.store.read(lambda conn: share_store.count_locked(conn, now_ms())))

    # -- the merged write ---------------------------------------------------------------------

    async def _write(self, op: _ShareOp) -> Any:
        done = await self.store.write_merged(self._kind, op)
        if done.touched:
            self.notifier.notify(done.touched)
        return done.result

    def _run_many(self, conn: Connection, ops: list[_ShareOp]) -> list[_Done]:
        """The share operations of one group commit: their share partitions locked in key order, then each in turn."""
        keys = sorted({key for op in ops for key in op.keys})
        cursors = share_store.lock_share_partitions(conn, keys)
        missing = {op.create for op in ops if op.create is not None and any(k not in cursors for k in op.keys)}
        for group, topic_id in sorted(missing):
            share_store.create_share_partitions(conn, group, topic_id)
        if missing:
            cursors.update(share_store.lock_share_partitions(conn, [k for k in keys if k not in cursors]))
        done = []
        for op in ops:
            changes = ShareChanges()
            result = op.run(conn, cursors, changes)
            done.append(_Done(result, changes.apply(conn, self.store)))
        return done


def _enlisted(record: InFlightRecord, receipt: Receipt, txn_id: str) -> bool:
    return record.txn_id == txn_id and record.generation == receipt.generation

