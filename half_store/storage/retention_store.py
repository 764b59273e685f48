"""SQL for retention of user topics: whole messages deleted from the head of a partition.

One call of :func:`retain_partition` does a bounded amount of work (at most
``batch`` offsets counted and ``batch`` rows deleted) under the partition's row lock,
so it never holds the group-commit writer long; the job calls it again while it
reports more to do. It never deletes at or past the last stable offset, so an open
transaction's messages, and everything after them, stay.

Retention removes whole rows, so a record batch goes whole, once its newest record is
old enough (Kafka deletes whole segments); the log start offset always lands on a
batch boundary.

Size: a message's size is the length of its value plus its key and headers (the
bytes a fetch returns, near enough; a record batch's stored form, for a batch). A partition's size is kept incrementally in
``retention_cursors`` (each message is measured once when counted and once when
deleted), rather than summed over the whole partition every round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from sqlalchemy import ColumnElement, Connection, case, func, select

from half_store.domain.admin_records import TopicConfig
from half_store.domain.constants import VALUE_BATCH
from half_store.domain.records import Topic
from half_store.storage import log_store, record_batch
from half_store.storage.schema import messages, partitions, retention_cursors
from half_store.storage.upsert import upsert

MESSAGE_SIZE = (
    func.length(messages.c.value)
    + func.coalesce(func.length(messages.c.key), 0)
    + func.coalesce(func.length(messages.c.headers), 0)
    # A record batch: its records' bytes, without the layout's own.
    - case(
        (
            messages.c.value_kind == VALUE_BATCH,
            record_batch.HEADER_BYTES + record_batch.BYTES_PER_RECORD * messages.c.record_count,
        ),
        else_=0,
    )
)


@dataclass(frozen=True, slots=True)
class PartitionRetained:
    """What one call did to a partition."""

    deleted_messages: int
    deleted_bytes: int
    log_start_offset: int  # after the call
    more: bool  # the call stopped at its batch bound: call again


@dataclass(frozen=True, slots=True)
class PartitionHead:
    """Enough to tell, without a write, whether a partition has anything for retention to do."""

    partition: int
    log_start_offset: int
    high_watermark: int
    head_timestamp: int | None  # of the message at the log start offset
    counted_to: int | None
    counted_bytes: int


def heads(conn: Connection, topic: Topic) -> list[PartitionHead]:
    """Per partition: offsets, the first message's timestamp and the size count, in one query."""
    head_timestamp = (
        select(messages.c.timestamp)
        .where(
            messages.c.topic_id == partitions.c.topic_id,
            messages.c.partition == partitions.c.partition,
            messages.c.offset == partitions.c.log_start_offset,
        )
        .scalar_subquery()
    )
    rows = conn.execute(
        select(
            partitions.c.partition,
            partitions.c.log_start_offset,
            partitions.c.next_offset,
            head_timestamp,
            retention_cursors.c.counted_to,
            retention_cursors.c.counted_bytes,
        )
        .outerjoin(
            retention_cursors,
            (retention_cursors.c.topic_id == partitions.c.topic_id)
            & (retention_cursors.c.partition == partitions.c.partition),
        )
        .where(partitions.c.topic_id == topic.topic_id)
        .order_by(partitions.c.partition)
    )
    return [
        PartitionHead(int(p), int(start), int(hw), _int(ts), _int(counted_to), int(size or 0))
        for p, start, hw, ts, counted_to, size in rows
    ]


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def needs_work(head: PartitionHead, limits: TopicConfig, now: int) -> bool:
    """Whether :func:`retain_partition` could delete or count anything in this partition now."""
    if head.log_start_offset >= head.high_watermark:
        return False
    cutoff = None if limits.retention_ms is None else now - limits.retention_ms
    if cutoff is not None and head.head_timestamp is not None and head.head_timestamp < cutoff:
        return True
    if limits.retention_bytes is not None:
        counted_to = head.log_start_offset if head.counted_to is None else max(head.counted_to, head.log_start_offset)
        return counted_to < head.high_watermark or head.counted_bytes > limits.retention_bytes
    return False


def retain_partition(
    conn: Connection, topic: Topic, partition: int, limits: TopicConfig, now: int, batch: int
) -> PartitionRetained:
    """Apply the effective ``limits`` to one partition, by at most ``batch`` messages; run under its row lock."""
    state = log_store.partition_state(conn, topic, partition)
    log_start, high_watermark, lso = state.log_start_offset, state.high_watermark, state.last_stable_offset
    counted_to, counted_bytes = _cursor(conn, topic.topic_id, partition, log_start)
    more = False
    if limits.retention_bytes is not None and counted_to < high_watermark:
        upto = min(high_watermark, counted_to + batch)
        counted_bytes += _size(conn, topic.topic_id, partition, counted_to, upto)
        counted_to = upto
        more = upto < high_watermark

    # Never at or past the last stable offset (a batch boundary), and a bounded step at a time.
    head = _head(conn, topic.topic_id, partition, log_start, lso, batch) if lso > log_start else []
    keep_from = 0  # index in ``head`` of the first row that stays
    if limits.retention_ms is not None:
        cutoff = now - limits.retention_ms
        keep_from = next((i for i, row in enumerate(head) if row.timestamp >= cutoff), len(head))
    if limits.retention_bytes is not None and counted_bytes > limits.retention_bytes:
        keep_from = max(keep_from, _kept_after_removing(head, counted_bytes - limits.retention_bytes))

    if not keep_from:
        _save_cursor(conn, topic.topic_id, partition, counted_to, counted_bytes)
        return PartitionRetained(0, 0, log_start, more)
    gone = head[:keep_from]
    cut = gone[-1].offset + gone[-1].records
    deleted_bytes = sum(row.size for row in gone)
    counted_bytes -= sum(row.size for row in gone if row.offset < counted_to)
    deleted_messages = log_store.truncate_before(conn, topic, partition, cut, log_start)
    counted_to = max(counted_to, cut)
    more = more or keep_from == batch
    _save_cursor(conn, topic.topic_id, partition, counted_to, counted_bytes)
    return PartitionRetained(deleted_messages, deleted_bytes, cut, more)


class _HeadRow(NamedTuple):
    offset: int
    records: int
    timestamp: int  # a batch's newest record's
    size: int


def _head(conn: Connection, topic_id: int, partition: int, start: int, bound: int, rows: int) -> list[_HeadRow]:
    """The first ``rows`` rows in [start, bound), in order: one read for every decision."""
    found = conn.execute(
        select(messages.c.offset, messages.c.record_count, messages.c.timestamp, MESSAGE_SIZE)
        .where(*_in_range(topic_id, partition, start, bound))
        .order_by(messages.c.offset)
        .limit(rows)
    )
    return [_HeadRow(int(offset), int(count), int(timestamp), int(size)) for offset, count, timestamp, size in found]


def _kept_after_removing(head: list[_HeadRow], excess: int) -> int:
    """How many whole rows from the start of ``head`` must go for at least ``excess`` bytes to go."""
    removed = 0
    for index, (_, _, _, size) in enumerate(head):
        if removed >= excess:
            return index
        removed += size
    return len(head)


def _cursor(conn: Connection, topic_id: int, partition: int, log_start: int) -> tuple[int, int]:
    row = conn.execute(
        select(retention_cursors.c.counted_to, retention_cursors.c.counted_bytes).where(
            retention_cursors.c.topic_id == topic_id, retention_cursors.c.partition == partition
        )
    ).first()
    if row is None or int(row[0]) < log_start:
        # Nothing counted yet, or the head moved without retention (it never does today): count afresh.
        return log_start, 0
    return int(row[0]), int(row[1])


def _save_cursor(conn: Connection, topic_id: int, partition: int, counted_to: int, counted_bytes: int) -> None:
    upsert(
        conn,
        retention_cursors,
        [{"topic_id": topic_id, "partition": partition, "counted_to": counted_to, "counted_bytes": counted_bytes}],
        keys=("topic_id", "partition"),
    )


def _in_range(topic_id: int, partition: int, start: int, end: int) -> tuple[ColumnElement[bool], ...]:
    return (
        messages.c.topic_id == topic_id,
        messages.c.partition == partition,
        messages.c.offset >= start,
        messages.c.offset < end,
    )


def _size(conn: Connection, topic_id: int, partition: int, start: int, end: int) -> int:
    total = conn.execute(select(func.sum(MESSAGE_SIZE)).where(*_in_range(topic_id, partition, start, end))).scalar()
    return int(total or 0)
