"""What a share-group operation does inside its database transaction, with its share partitions locked.

:func:`deliver` hands out one share partition's records (redeliveries first, then fresh
messages read through the fetch path); :func:`act_on_receipts` checks receipts against
the records they name and moves the records whose locks they hold. Both only decide and
``put`` moves into :class:`ShareChanges`; the caller applies them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from half_store.domain.constants import ISOLATION_READ_COMMITTED
from half_store.domain.errors import OffsetOutOfRange
from half_store.domain.records import StoredMessage, Topic
from half_store.domain.share_receipts import Receipt, ReceiptCodec
from half_store.domain.share_records import ReceiptResult, ReceivedMessage
from half_store.domain.share_state import (
    RECEIPT_EXPIRED,
    DeadLetterReason,
    FreshMessage,
    InFlightRecord,
    SharePartitionKey,
    plan_delivery,
)
from half_store.domain.tags import EVERYTHING, TagFilter
from half_store.services.log_service import read_partition
from half_store.services.share_changes import ShareChanges
from half_store.storage import log_reads, log_store, share_store
from half_store.storage.share_store import ShareCursor

Cursors = dict[SharePartitionKey, ShareCursor]


@dataclass(frozen=True, slots=True)
class DeliveryRules:
    """How a receive hands records out (from the request and the settings)."""

    lock_ms: int
    ordered: bool
    max_deliveries: int
    max_in_flight: int
    # Fresh messages whose tag it refuses are not for this receive's group: they are passed
    # over (done, as if accepted), never locked or delivered.
    tags: TagFilter = EVERYTHING


def deliver(
    conn: Connection,
    cursor: ShareCursor,
    changes: ShareChanges,
    codec: ReceiptCodec,
    key: SharePartitionKey,
    topic: Topic,
    budget: int,
    rules: DeliveryRules,
    now: int,
) -> list[ReceivedMessage]:
    """Up to ``budget`` records of one share partition, locked and with their receipts."""
    group, _, partition = key
    if rules.ordered:  # every in-flight record may hold a key back
        in_flight = share_store.in_flight(conn, key)
    elif cursor.next_visible is not None and cursor.next_visible <= now:
        in_flight = share_store.in_flight(conn, key, visible_by=now, limit=budget)
    else:
        in_flight = []  # nothing released or run out: no need to look
    waiting = 0 if rules.ordered else sum(1 for r in in_flight if r.expired(now).deliverable(now))
    room = min(budget - waiting, rules.max_in_flight - cursor.in_flight)
    fresh: dict[int, StoredMessage] = {}
    new_end = cursor.end_offset
    if room > 0:
        messages, new_end = read_log(conn, topic, partition, cursor.end_offset, room)
        fresh = {m.offset: m for m in messages if rules.tags.matches(m.headers)}
    plan = plan_delivery(
        group, topic.topic_id, partition, in_flight, [FreshMessage(o, m.key) for o, m in fresh.items()],
        budget=budget, now=now, lock_ms=rules.lock_ms, max_deliveries=rules.max_deliveries, ordered=rules.ordered,
    )
    if plan.end_offset is not None:
        new_end = plan.end_offset
    if new_end != cursor.end_offset:
        cursor.end_offset = new_end
        changes.end_offsets.add(key)
    for record in plan.dead_letters:
        changes.put(record, DeadLetterReason.MAX_DELIVERIES)
    for record in plan.parked:
        changes.put(record, new=True)
    again = [r.offset for r in plan.acquired if r.offset not in plan.new]
    bodies = {o: m for o, (m, _) in log_reads.read_offsets(conn, topic, partition, again).items()} if again else {}
    bodies.update(fresh)
    received = []
    for record in plan.acquired:
        message = bodies.get(record.offset)
        if message is None:  # removed from the log by retention: nothing left to deliver
            changes.drop(record)
            continue
        changes.put(record, new=record.offset in plan.new)
        receipt = codec.encode(
            Receipt(group, topic.topic_id, partition, record.offset, record.delivery_count, record.generation)
        )
        received.append(
            ReceivedMessage(
                **message._asdict(), receipt=receipt, delivery_count=record.delivery_count, lock_expires_ms=record.visible_at
            )
        )
    return received


def read_log(conn: Connection, topic: Topic, partition: int, end: int, limit: int) -> tuple[Sequence[StoredMessage], int]:
    """Committed messages from ``end`` and where the next read starts (the fetch path: below the
    last stable offset, no aborted transaction's messages, no control markers)."""
    try:
        result = read_partition(conn, topic, partition, end, limit, ISOLATION_READ_COMMITTED)
    except OffsetOutOfRange:  # retention removed messages the group never looked at
        start, _ = log_store.partition_bounds(conn, topic, partition)
        result = read_partition(conn, topic, partition, max(end, start), limit, ISOLATION_READ_COMMITTED)
    return result.messages, result.next_offset


@dataclass(frozen=True, slots=True)
class Acted:
    """What acting on one receipt did: the record after its move, and the receipt's answer."""

    record: InFlightRecord
    reason: DeadLetterReason | None
    result: ReceiptResult


# (record, index of the receipt, the time or the transaction's deadline) -> what it did
Act = Callable[[InFlightRecord, int, int], Acted]


def act_on_receipts(
    conn: Connection,
    cursors: Cursors,
    changes: ShareChanges,
    receipts: Sequence[str],
    decoded: Mapping[int, Receipt],
    act: Act,
    now: int,
    *,
    argument: int,
    txn_id: str | None = None,
) -> dict[int, ReceiptResult]:
    """``act`` on each record whose lock its receipt still holds; RECEIPT_EXPIRED for the others.

    With ``txn_id``, a receipt already handed to that transaction counts as done (a retry).
    """
    current: dict[tuple[SharePartitionKey, int], InFlightRecord] = {}
    for key in sorted({r.share_key for r in decoded.values()}):
        if key in cursors:
            offsets = [r.offset for r in decoded.values() if r.share_key == key]
            current.update({(key, o): r for o, r in share_store.records_at(conn, key, offsets).items()})
    answers: dict[int, ReceiptResult] = {}
    for index, receipt in decoded.items():
        where = (receipt.share_key, receipt.offset)
        record = current.get(where)
        if record is not None and txn_id is not None and record.txn_id == txn_id and (
            record.generation == receipt.generation
        ):
            answers[index] = ReceiptResult(receipts[index])
        elif record is None or not record.holds(receipt.generation, now):
            answers[index] = ReceiptResult(receipts[index], RECEIPT_EXPIRED)
        else:
            acted = act(record, index, argument)
            changes.put(acted.record, acted.reason)
            current[where] = acted.record  # a second receipt for it in the same request sees the move
            answers[index] = acted.result
    return answers
