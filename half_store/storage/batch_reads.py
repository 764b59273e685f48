"""SQL that reads the log as stored batches (rows with their producer stamps and markers) for Kafka's Fetch.

Unlike :mod:`half_store.storage.log_reads`, control markers are returned (Kafka clients
see them as control batches and step past their offsets) and batches are returned whole,
from the one holding the fetch offset: a Kafka consumer skips the records below its offset.
"""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, func, select

from half_store.domain.constants import CONTROL_NONE, VALUE_BATCH
from half_store.domain.log_batches import AbortedRange, LogBatch
from half_store.domain.records import Topic
from half_store.storage import record_batch
from half_store.storage.log_reads import _FLOOR
from half_store.storage.schema import messages, transaction_partitions, transactions

# Sizes first, without the values: how many rows fit the byte budget.
_SIZES = (
    select(messages.c.offset, func.length(messages.c.value))
    .where(
        messages.c.topic_id == bindparam("t_id"),
        messages.c.partition == bindparam("p_id"),
        messages.c.offset >= func.coalesce(_FLOOR, bindparam("start")),
        messages.c.offset < bindparam("end"),
    )
    .order_by(messages.c.offset)
    .limit(bindparam("limit"))
)
_ROWS = (
    select(
        messages.c.offset,
        messages.c.record_count,
        messages.c.timestamp,
        messages.c.key,
        messages.c.value,
        messages.c.value_kind,
        messages.c.headers,
        messages.c.properties,
        messages.c.producer_id,
        messages.c.producer_epoch,
        messages.c.sequence,
        messages.c.txn_id,
        messages.c.control,
    )
    .where(
        messages.c.topic_id == bindparam("t_id"),
        messages.c.partition == bindparam("p_id"),
        messages.c.offset >= bindparam("first"),
        messages.c.offset <= bindparam("last"),
    )
    .order_by(messages.c.offset)
)
_ABORTED = (
    select(transaction_partitions.c.txn_id, transactions.c.producer_id, transaction_partitions.c.first_offset)
    .join(transactions, transactions.c.txn_id == transaction_partitions.c.txn_id)
    .where(
        transaction_partitions.c.topic_id == bindparam("t_id"),
        transaction_partitions.c.partition == bindparam("p_id"),
        transaction_partitions.c.aborted.is_(True),
        transaction_partitions.c.first_offset < bindparam("end"),
        transaction_partitions.c.marker_offset >= bindparam("start"),
    )
    .order_by(transaction_partitions.c.first_offset)
)
# Rows scanned for sizes per partition read; a page never holds more rows than this.
MAX_ROWS = 1_000


def read_batches(
    conn: Connection, topic: Topic, partition: int, start: int, end: int, max_bytes: int
) -> tuple[list[LogBatch], set[str]]:
    """Rows holding offsets ``start .. end - 1`` up to about ``max_bytes`` of values (at least one row).

    Returns the rows and the transaction ids of those written in a transaction (for the
    caller to drop the aborted ones).
    """
    if start >= end:
        return [], set()
    parameters = {"t_id": topic.topic_id, "p_id": partition, "start": start, "end": end, "limit": MAX_ROWS}
    first = last = None
    taken = 0
    for offset, size in conn.execute(_SIZES, parameters):
        if last is not None and taken + int(size or 0) > max_bytes:
            break
        if first is None:
            first = int(offset)
        last = int(offset)
        taken += int(size or 0)
    if first is None or last is None:
        return [], set()
    rows = conn.execute(_ROWS, {"t_id": topic.topic_id, "p_id": partition, "first": first, "last": last})
    found: list[LogBatch] = []
    txn_ids: set[str] = set()
    for offset, count, ts, key, value, kind, headers, properties, pid, epoch, sequence, txn_id, control in rows:
        if int(offset) + int(count) <= start:
            continue  # the floor row ends before the fetch offset
        found.append(
            LogBatch(
                int(offset), int(count), int(ts), key, bytes(value), int(kind), headers, properties,
                None if pid is None else int(pid), None if epoch is None else int(epoch),
                None if sequence is None else int(sequence), txn_id, int(control),
            )
        )
        if txn_id is not None and control == CONTROL_NONE:
            txn_ids.add(txn_id)
    return found, txn_ids


def aborted_in_range(
    conn: Connection, topic_id: int, partition: int, start: int, end: int
) -> list[tuple[str, AbortedRange | None]]:
    """Aborted transactions with records in ``[start, end)``: (txn id, Kafka's range, None without a producer)."""
    rows = conn.execute(_ABORTED, {"t_id": topic_id, "p_id": partition, "start": start, "end": end})
    return [(txn_id, None if pid is None else AbortedRange(int(pid), int(first))) for txn_id, pid, first in rows]


def offset_for_time(conn: Connection, topic: Topic, partition: int, timestamp: int, end: int) -> tuple[int, int] | None:
    """The first offset below ``end`` whose record's timestamp is at least ``timestamp``, with that timestamp.

    A batch row's timestamp is its latest record's, so the first row at or past the time
    holds the answer; within a batch the records' own timestamps pick it.
    """
    row = conn.execute(
        select(messages.c.offset, messages.c.value, messages.c.value_kind, messages.c.timestamp)
        .where(
            messages.c.topic_id == topic.topic_id,
            messages.c.partition == partition,
            messages.c.control == CONTROL_NONE,
            messages.c.timestamp >= timestamp,
            messages.c.offset < end,
        )
        .order_by(messages.c.offset)
        .limit(1)
    ).first()
    if row is None:
        return None
    offset, value, kind, ts = row
    if kind != VALUE_BATCH:
        return int(offset), int(ts)
    columns = record_batch.decode_columns(bytes(value))
    for index, record_ts in enumerate(columns.timestamps):
        if record_ts >= timestamp:
            return int(offset) + index, int(record_ts)
    return int(offset), int(ts)
