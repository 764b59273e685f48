"""Share groups: queue consumption with per-message locks, acknowledgements and dead letters.

Many consumers of one group split a topic's committed messages message by message
(RocketMQ 5's SimpleConsumer, Kafka's KIP-932). The state lives in the database
(``share_partitions``, ``share_records``), receipts are signed and self-contained, so
any broker process on the database serves any consumer and accepts any receipt.

Every operation is a write in the group commit: they are merged per commit into one
run that locks all the share partitions it touches in key order, then runs each
operation in turn. Two broker processes therefore never work on one share partition
at once, and a record is locked by at most one delivery at a time. A receive may carry
the acknowledgements of the previous batch (as KIP-932's ShareFetch does), so a
consumer's loop costs one request and one commit per batch.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from half_store.domain.constants import is_system_topic
from half_store.domain.errors import ReservedTopic, ShareGroupInUse, ShareGroupNotFound, TopicNotFound
from half_store.domain.records import PackedList, Topic, now_ms
from half_store.domain.share_receipts import MalformedReceipt, Receipt, ReceiptCodec
from half_store.domain.share_records import (
    Acknowledgement,
    ReceiptResult,
    ReceivedMessage,
    ShareGroupSummary,
    SharePartitionView,
    ShareReceived,
    ShareTopicView,
)
from half_store.domain.share_state import UNKNOWN_RECEIPT, DeadLetterReason, InFlightRecord, SharePartitionKey
from half_store.domain.tags import TagFilter
from half_store.metrics import SHARE_DELIVERED, SHARE_LOCKED, SHARE_REDELIVERED
from half_store.services.log_service import LogService
from half_store.services.notifier import PartitionKey
from half_store.services.share_changes import ShareChanges
from half_store.services.share_delivery import Act, Acted, Cursors, DeliveryRules, act_on_receipts, deliver
from half_store.services.transaction_lookups import lock_open
from half_store.settings import Settings
from half_store.storage import log_reads, log_store, share_store
from half_store.storage.writer import MergeKind

ClientGone = Callable[[], Awaitable[bool]]
SECRET_NAME = "share-receipts"


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
class _Done:
    result: Any
    touched: set[PartitionKey]  # what the whole group commit has news for (waiters recheck; no harm)


class ShareGroupService:
    def __init__(self, log_service: LogService, settings: Settings) -> None:
        self.store = log_service.store
        self.notifier = log_service.notifier
        self.settings = settings
        self._codec: ReceiptCodec | None = None
        self._rotation: dict[tuple[str, int], itertools.count[int]] = defaultdict(itertools.count)
        self._kind: MergeKind[_ShareOp, _Done] = MergeKind("share", self._run_many)

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
        acks: Sequence[Acknowledgement] = (),
        client_gone: ClientGone | None = None,
        tags: str | None = None,
    ) -> ShareReceived:
        """Apply ``acks``, then lock and return up to ``max_messages`` committed messages;
        with ``max_wait_ms``, wait for some. The acknowledgements are applied at once, waiting or not.

        ``tags``: a tag expression (``*``, ``a || b``); the group passes over messages it refuses.
        """
        tag_filter = TagFilter.parse(tags)
        topic = await self._share_topic(topic_name)
        rules = DeliveryRules(
            lock_ms, ordered, self.settings.share_max_deliveries, self.settings.share_max_in_flight, tag_filter
        )
        received, results = await self._receive_once(group, topic, max_messages, rules, acks)
        if received or max_wait_ms <= 0:
            return ShareReceived(received, results)
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
                received, _ = await self._receive_once(group, topic, max_messages, rules, ())
                if received:
                    break
        return ShareReceived(received, results)

    async def _share_topic(self, name: str) -> Topic:
        if is_system_topic(name):
            raise ReservedTopic(f"{name!r} is a system topic; share groups do not read it")
        return await self.store.topic(name)

    async def _receive_once(
        self, group: str, topic: Topic, max_messages: int, rules: DeliveryRules, acks: Sequence[Acknowledgement]
    ) -> tuple[list[ReceivedMessage], list[ReceiptResult]]:
        first = next(self._rotation[(group, topic.topic_id)]) % topic.partitions
        order = [(group, topic.topic_id, (first + i) % topic.partitions) for i in range(topic.partitions)]
        decoded, refused = self._decode(group, [a.receipt for a in acks])
        keys = tuple(sorted(set(order) | {r.share_key for r in decoded.values()}))

        def run(
            conn: Connection, cursors: Cursors, changes: ShareChanges
        ) -> tuple[list[ReceivedMessage], dict[int, ReceiptResult]]:
            now = now_ms()
            answers: dict[int, ReceiptResult] = {}
            if decoded:
                answers = act_on_receipts(
                    conn, cursors, changes, [a.receipt for a in acks], decoded, self._acknowledging(acks), now,
                    argument=now,
                )
                changes.apply(conn, self.store, cursors, finish=False)  # what was just released may go out again
            received: PackedList[ReceivedMessage] = PackedList(ReceivedMessage)
            for key in order:
                if len(received) >= max_messages:
                    break
                received += deliver(
                    conn, cursors[key], changes, self.codec, key, topic, max_messages - len(received), rules, now
                )
            return received, answers

        received, answers = await self._write(_ShareOp(keys, run, create=(group, topic.topic_id)))
        SHARE_DELIVERED.inc(len(received))
        SHARE_REDELIVERED.inc(sum(1 for m in received if m.delivery_count > 1))
        return received, [refused.get(i) or answers[i] for i in range(len(acks))]

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
        return await self._on_receipts(group, [a.receipt for a in acks], self._acknowledging(acks))

    def _acknowledging(self, acks: Sequence[Acknowledgement]) -> Act:
        max_deliveries = self.settings.share_max_deliveries

        def act(record: InFlightRecord, index: int, now: int) -> Acted:
            ack = acks[index]
            moved, reason = record.acknowledge(ack.ack_type, now, ack.delay_ms, max_deliveries)
            return Acted(moved, reason, ReceiptResult(ack.receipt))

        return act

    async def extend(self, group: str, receipts: Sequence[str], lock_ms: int) -> list[ReceiptResult]:
        """Renew the locks the receipts hold, to ``lock_ms`` from now; the receipts stay valid."""

        def act(record: InFlightRecord, index: int, now: int) -> Acted:
            renewed = record.extend(now, lock_ms)
            return Acted(renewed, None, ReceiptResult(receipts[index], lock_expires_ms=renewed.visible_at))

        return await self._on_receipts(group, receipts, act)

    async def acknowledge_in_transaction(self, txn_id: str, group: str, receipts: Sequence[str]) -> list[ReceiptResult]:
        """Hand the receipts' locks to an open transaction: ACCEPT if it commits, released if it aborts.

        The transaction must be OPEN; repeating the request for it is harmless.
        """

        def act(record: InFlightRecord, index: int, deadline: int) -> Acted:
            return Acted(record.enlist(txn_id, deadline), None, ReceiptResult(receipts[index]))

        return await self._on_receipts(group, receipts, act, txn_id=txn_id)

    async def _on_receipts(
        self, group: str, receipts: Sequence[str], act: Act, *, txn_id: str | None = None
    ) -> list[ReceiptResult]:
        """Check each receipt, then ``act`` on the records whose locks they still hold.

        With ``txn_id`` the transaction is locked first (it must be OPEN: its errors fail
        the request) and ``act`` gets its deadline instead of the time.
        """
        decoded, refused = self._decode(group, receipts)
        if not decoded and txn_id is None:
            return [refused[i] for i in range(len(receipts))]
        keys = tuple(sorted({r.share_key for r in decoded.values()}))

        def run(conn: Connection, cursors: Cursors, changes: ShareChanges) -> dict[int, ReceiptResult]:
            now = now_ms()
            argument = now if txn_id is None else lock_open(conn, txn_id).expires_at
            return act_on_receipts(
                conn, cursors, changes, receipts, decoded, act, now, argument=argument, txn_id=txn_id
            )

        answers: dict[int, ReceiptResult] = await self._write(_ShareOp(keys, run))
        return [refused.get(i) or answers[i] for i in range(len(receipts))]

    def _decode(self, group: str, receipts: Sequence[str]) -> tuple[dict[int, Receipt], dict[int, ReceiptResult]]:
        """The receipts this broker signed for ``group``, by index; UNKNOWN_RECEIPT answers for the others."""
        decoded: dict[int, Receipt] = {}
        refused: dict[int, ReceiptResult] = {}
        for index, text in enumerate(receipts):
            try:
                receipt = self.codec.decode(text)
            except MalformedReceipt:
                receipt = None
            if receipt is None or receipt.group != group:
                refused[index] = ReceiptResult(text, UNKNOWN_RECEIPT)
            else:
                decoded[index] = receipt
        return decoded, refused

    # -- describe, jobs, metrics ------------------------------------------------------------

    async def describe(self, group: str) -> list[ShareTopicView]:
        def query(conn: Connection) -> list[ShareTopicView]:
            rows = share_store.share_partitions_of(conn, group)
            if not rows:
                raise ShareGroupNotFound(f"share group {group!r} has not received from any topic")
            counts = share_store.record_counts(conn, group, now_ms())
            views: dict[int, ShareTopicView] = {}
            for row in rows:
                try:
                    topic = self.store.topic_by_id_sync(conn, row.topic_id)
                except TopicNotFound:
                    continue  # the topic was deleted; its share state goes with it
                state = log_store.partition_state(conn, topic, row.partition)
                found = counts.get((row.topic_id, row.partition))
                unread = log_reads.count_readable(conn, topic, row.partition, row.end_offset, state.last_stable_offset)
                start = row.end_offset if found is None or found.start_offset is None else found.start_offset
                view = views.setdefault(row.topic_id, ShareTopicView(topic.name, []))
                view.partitions.append(
                    SharePartitionView(
                        row.partition, start, row.end_offset, unread + (found.waiting if found else 0),
                        found.locked if found else 0, row.accepted, row.dead_lettered,
                    )
                )
            return sorted(views.values(), key=lambda v: v.topic)

        return await self.store.read(query)

    async def list_groups(self) -> list[ShareGroupSummary]:
        return await self.store.read(lambda conn: share_store.share_groups(conn, now_ms()))

    async def delete_group(self, group: str) -> None:
        """Forget a share group: where it stands in each partition and its in-flight records.

        Refused while a record is locked (a consumer is working on it, or a transaction holds
        its acknowledgement), as Kafka refuses to delete a group that is not empty: the
        locks run out, or the transaction ends, and then it can go. Receiving again later
        starts the group afresh, from the start of each partition.
        """

        def unit(conn: Connection) -> None:
            locked = share_store.count_locked(conn, now_ms(), group)
            if locked:
                raise ShareGroupInUse(f"share group {group!r} has {locked} locked record(s); delete it once they are released")
            if not share_store.delete_share_group(conn, group):
                raise ShareGroupNotFound(f"share group {group!r} has not received from any topic")

        await self.store.write(unit)

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
                if key in cursors:
                    for record in share_store.in_flight(conn, key, visible_by=now):
                        current = record.expired(now)
                        if current.delivery_count >= max_deliveries:
                            changes.put(current.archive(), DeadLetterReason.MAX_DELIVERIES)
                            archived += 1
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
        # Each operation's records are written before the next one reads them; the share partitions'
        # end offsets and counters (kept in ``cursors`` meanwhile) once, at the end.
        changes = ShareChanges()
        results = []
        for op in ops:
            results.append(op.run(conn, cursors, changes))
            changes.apply(conn, self.store, cursors, finish=False)
        changes.apply(conn, self.store, cursors)
        return [_Done(result, changes.touched) for result in results]
