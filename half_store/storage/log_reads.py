"""SQL that reads messages out of the log: fetch ranges, single offsets, and what read_committed may see.

A row is one record, or a record batch (``value_kind`` VALUE_BATCH, see
:mod:`half_store.storage.record_batch`) covering ``record_count`` offsets from its
``offset``: every reader here turns rows back into messages, cut to the offsets asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, bindparam, func, select

from half_store.domain.constants import CONTROL_NONE, VALUE_BATCH
from half_store.domain.message_page import MessagePage, PageBuilder
from half_store.domain.records import StoredMessage, Topic
from half_store.storage import record_batch
from half_store.storage.schema import messages, transaction_partitions

# The row holding ``start``: the last row at or before it (a batch may cover ``start`` from below).
_FLOOR = (
    select(messages.c.offset)
    .where(
        messages.c.topic_id == bindparam("t_id"),
        messages.c.partition == bindparam("p_id"),
        messages.c.offset <= bindparam("start"),
    )
    .order_by(messages.c.offset.desc())
    .limit(1)
    .scalar_subquery()
)
# What every read turns back into a message, the offset first.
_MESSAGE_FIELDS = (
    messages.c.offset,
    messages.c.timestamp,
    messages.c.key,
    messages.c.value,
    messages.c.value_kind,
    messages.c.headers,
)
_READ_RANGE = (
    select(*_MESSAGE_FIELDS, messages.c.txn_id, messages.c.record_count)
    .where(
        messages.c.topic_id == bindparam("t_id"),
        messages.c.partition == bindparam("p_id"),
        messages.c.offset >= func.coalesce(_FLOOR, bindparam("start")),
        messages.c.offset < bindparam("end"),
        messages.c.control == CONTROL_NONE,
    )
    .order_by(messages.c.offset)
    .limit(bindparam("limit"))
)


def read_range(conn: Connection, topic: Topic, partition: int, start: int, end: int, limit: int) -> MessagePage:
    """Messages with ``start <= offset < end``, in offset order, at most ``limit``; control markers skipped.

    Record batches are cut to the range and go into the page as slices of their columns.
    Callers pass ``end <= start + limit``: rows are fetched whole (PostgreSQL sends the
    whole result), so the offset range, not a row count, is what bounds the bytes read.
    """
    # One row more than ``limit``: the first may be a batch that ends before ``start``.
    rows = conn.execute(
        _READ_RANGE, {"t_id": topic.topic_id, "p_id": partition, "start": start, "end": end, "limit": limit + 1}
    )
    page = PageBuilder(topic.name, partition)
    for offset, timestamp, key, value, kind, headers, txn_id, count in rows:
        if kind != VALUE_BATCH:
            if offset >= start:
                page.add(int(offset), int(timestamp), key, bytes(value), int(kind), headers, txn_id)
        else:
            first = max(start - offset, 0)
            stop = min(count, end - offset, first + limit - len(page))
            if first < stop:
                c = record_batch.decode_columns(bytes(value), first, stop)
                page.add_columns(int(offset) + first, c.timestamps, c.keys, c.values, c.value_lengths, c.kinds, c.headers,
                                 txn_id)
        if len(page) >= limit:
            break
    return page.page()  # never past ``limit``: each row's records are cut to what is left


_READ_AT_OFFSETS = select(*_MESSAGE_FIELDS, messages.c.properties).where(
    messages.c.topic_id == bindparam("t_id"),
    messages.c.partition == bindparam("p_id"),
    # The range as well as the list: PostgreSQL, planning with the statistics of an emptier
    # table, used the primary key for the partition alone and filtered the list over every
    # row of it (5 ms per group commit of half-message commits at 9,500 half messages, and
    # growing with the topic). A range it always takes into the index scan.
    messages.c.offset.between(bindparam("lowest"), bindparam("highest")),
    messages.c.offset.in_(bindparam("offsets", expanding=True)),
)


# The record batches that may hold some of the wanted offsets: those from the one holding the lowest to the highest.
_BATCHES_IN_RANGE = select(messages.c.offset, messages.c.record_count).where(
    messages.c.topic_id == bindparam("t_id"),
    messages.c.partition == bindparam("p_id"),
    messages.c.offset >= func.coalesce(_FLOOR, bindparam("start")),
    messages.c.offset <= bindparam("last"),
    messages.c.value_kind == VALUE_BATCH,
)


def read_offsets(
    conn: Connection, topic: Topic, partition: int, offsets: Sequence[int], *, in_rows_of_their_own: bool = False
) -> dict[int, tuple[StoredMessage, str | None]]:
    """The messages at ``offsets`` with their system properties, by offset (missing ones left out).

    An offset inside a record batch is found through the batch's base offset: a read of
    the batches in the offsets' range comes first. ``in_rows_of_their_own``: the caller
    expects a row per offset (the half topic's messages are appended one per row), so the
    rows are read at once, one round trip instead of two, and batches are looked for
    only for the offsets not found that way.
    """
    wanted = set(offsets)
    found: dict[int, tuple[StoredMessage, str | None]] = {}
    if wanted and in_rows_of_their_own:
        _read_at(conn, topic, partition, wanted, wanted, found)
        wanted -= found.keys()
    if not wanted:
        return found
    batches = conn.execute(
        _BATCHES_IN_RANGE, {"t_id": topic.topic_id, "p_id": partition, "start": min(wanted), "last": max(wanted)}
    )
    bases = {int(base) for base, count in batches if any(base <= o < base + count for o in wanted)}
    _read_at(conn, topic, partition, wanted, wanted | bases, found)
    return found


def _read_at(
    conn: Connection,
    topic: Topic,
    partition: int,
    wanted: set[int],
    rows_at: set[int],
    found: dict[int, tuple[StoredMessage, str | None]],
) -> None:
    """Read the rows at ``rows_at`` into ``found``: the wanted offsets among their messages."""
    looked_up = sorted(rows_at)
    parameters = {
        "t_id": topic.topic_id, "p_id": partition, "offsets": looked_up, "lowest": looked_up[0], "highest": looked_up[-1]
    }
    for offset, ts, key, value, kind, headers, properties in conn.execute(_READ_AT_OFFSETS, parameters):
        if kind != VALUE_BATCH:
            if offset in wanted:
                message = StoredMessage(topic.name, partition, int(offset), int(ts), key, bytes(value), int(kind), headers)
                found[int(offset)] = (message, properties)
            continue
        for index, record in enumerate(record_batch.decode(bytes(value))):
            if offset + index in wanted:
                key, value, kind, headers, ts, properties = record
                message = StoredMessage(topic.name, partition, int(offset) + index, ts, key, value, kind, headers)
                found[int(offset) + index] = (message, properties)


# Built once: a read_committed fetch over transactional data asks this for every page.
# ``aborted IS true`` is, as written, the predicate of ix_transaction_partitions_aborted:
# SQLite uses a partial index only for a condition that repeats its predicate.
_ABORTED_IN_RANGE = select(transaction_partitions.c.txn_id).where(
    transaction_partitions.c.topic_id == bindparam("t_id"),
    transaction_partitions.c.partition == bindparam("p_id"),
    transaction_partitions.c.aborted.is_(True),
    transaction_partitions.c.first_offset < bindparam("end"),
    transaction_partitions.c.marker_offset >= bindparam("start"),
)


def aborted_transactions(conn: Connection, topic_id: int, partition: int, start: int, end: int) -> set[str]:
    """Ids of aborted transactions with messages in ``[start, end)`` of a partition."""
    rows = conn.execute(_ABORTED_IN_RANGE, {"t_id": topic_id, "p_id": partition, "start": start, "end": end})
    return {row[0] for row in rows}


def count_readable(conn: Connection, topic: Topic, partition: int, start: int, end: int) -> int:
    """How many messages ``read_committed`` would return from ``[start, end)``: no markers, no aborted ones.

    ``end`` is a batch boundary (a last stable offset or high watermark); ``start`` may
    fall inside a batch, whose records from ``start`` on then count.
    """
    if start >= end:
        return 0
    readable = [
        messages.c.topic_id == topic.topic_id,
        messages.c.partition == partition,
        messages.c.control == CONTROL_NONE,
    ]
    aborted = aborted_transactions(conn, topic.topic_id, partition, start, end)
    if aborted:
        readable.append(messages.c.txn_id.is_(None) | messages.c.txn_id.notin_(sorted(aborted)))
    whole = select(func.coalesce(func.sum(messages.c.record_count), 0)).where(
        *readable, messages.c.offset >= start, messages.c.offset < end
    )
    total = int(conn.execute(whole).scalar_one())
    # The readable row just below ``start`` (not the last batch below it: that search could
    # walk back over a whole partition of single records).
    below = conn.execute(
        select(messages.c.offset, messages.c.record_count)
        .where(*readable, messages.c.offset < start)
        .order_by(messages.c.offset.desc())
        .limit(1)
    ).first()
    if below is not None:
        total += max(0, min(int(below[0]) + int(below[1]), end) - start)
    return total
