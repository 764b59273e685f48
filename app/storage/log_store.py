"""SQL for topics, partitions and the messages of the partitioned log.

Offsets are allocated under the partition row's lock
(``UPDATE partitions SET next_offset = next_offset + n ... RETURNING``): the row
lock is held until the transaction ends, so concurrent appenders to a partition,
in this process or another one on the same PostgreSQL, queue behind each other
and no offset is handed out twice or skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import Connection, and_, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from app.domain import PartitionState, ProducerStamp, Record, StoredMessage, Topic, now_ms
from app.errors import PartitionNotFound, TopicExists
from app.storage.schema import (
    CONTROL_NONE,
    messages,
    partitions,
    topics,
    transaction_partitions,
)

# -- topics -------------------------------------------------------------------------


def create_topic(conn: Connection, name: str, partition_count: int) -> Topic:
    try:
        with conn.begin_nested():
            topic_id = conn.execute(
                insert(topics).values(name=name, partitions=partition_count, created_at=now_ms()).returning(
                    topics.c.topic_id
                )
            ).scalar_one()
    except IntegrityError as error:
        raise TopicExists(f"topic {name!r} already exists") from error
    conn.execute(
        insert(partitions),
        [{"topic_id": topic_id, "partition": p, "next_offset": 0, "log_start_offset": 0} for p in range(partition_count)],
    )
    return Topic(topic_id, name, partition_count)


def find_topic(conn: Connection, name: str) -> Topic | None:
    row = conn.execute(select(topics.c.topic_id, topics.c.name, topics.c.partitions).where(topics.c.name == name)).first()
    return Topic(*row) if row else None


def find_topic_by_id(conn: Connection, topic_id: int) -> Topic | None:
    row = conn.execute(
        select(topics.c.topic_id, topics.c.name, topics.c.partitions).where(topics.c.topic_id == topic_id)
    ).first()
    return Topic(*row) if row else None


def list_topics(conn: Connection) -> list[Topic]:
    rows = conn.execute(select(topics.c.topic_id, topics.c.name, topics.c.partitions).order_by(topics.c.name))
    return [Topic(*row) for row in rows]


# -- appending ------------------------------------------------------------------------


def allocate_offsets(conn: Connection, topic: Topic, partition: int, count: int) -> int:
    """Reserve ``count`` consecutive offsets in a partition; returns the first."""
    next_offset = conn.execute(
        update(partitions)
        .where(partitions.c.topic_id == topic.topic_id, partitions.c.partition == partition)
        .values(next_offset=partitions.c.next_offset + count)
        .returning(partitions.c.next_offset)
    ).scalar_one_or_none()
    if next_offset is None:
        raise PartitionNotFound(f"topic {topic.name!r} has no partition {partition}")
    return int(next_offset) - count


def append(
    conn: Connection,
    topic: Topic,
    partition: int,
    records: Sequence[Record],
    stamp: ProducerStamp = ProducerStamp(),
) -> int:
    """Append ``records`` to one partition; returns the offset of the first."""
    base = allocate_offsets(conn, topic, partition, len(records))
    sequence = stamp.base_sequence
    rows = [
        {
            "topic_id": topic.topic_id,
            "partition": partition,
            "offset": base + i,
            "key": r.key,
            "value": r.value,
            "value_kind": r.value_kind,
            "headers": r.headers,
            "timestamp": r.timestamp,
            "producer_id": stamp.producer_id,
            "producer_epoch": stamp.producer_epoch,
            "sequence": None if sequence is None else sequence + i,
            "txn_id": stamp.txn_id,
            "control": stamp.control,
            "properties": r.properties,
        }
        for i, r in enumerate(records)
    ]
    conn.execute(insert(messages), rows)
    return base


# -- reading --------------------------------------------------------------------------


def partition_bounds(conn: Connection, topic: Topic, partition: int) -> tuple[int, int]:
    """(log start offset, high watermark) of a partition."""
    row = conn.execute(
        select(partitions.c.log_start_offset, partitions.c.next_offset).where(
            partitions.c.topic_id == topic.topic_id, partitions.c.partition == partition
        )
    ).first()
    if row is None:
        raise PartitionNotFound(f"topic {topic.name!r} has no partition {partition}")
    return int(row[0]), int(row[1])


def first_open_transaction_offset(conn: Connection, topic_id: int, partition: int) -> int | None:
    """The first offset written by a still-open transaction (what holds the LSO back)."""
    value = conn.execute(
        select(func.min(transaction_partitions.c.first_offset)).where(
            transaction_partitions.c.topic_id == topic_id,
            transaction_partitions.c.partition == partition,
            transaction_partitions.c.marker_offset.is_(None),
        )
    ).scalar()
    return None if value is None else int(value)


def partition_state(conn: Connection, topic: Topic, partition: int) -> PartitionState:
    log_start, high_watermark = partition_bounds(conn, topic, partition)
    open_first = first_open_transaction_offset(conn, topic.topic_id, partition)
    lso = high_watermark if open_first is None else min(open_first, high_watermark)
    return PartitionState(partition, log_start, high_watermark, lso)


def partition_states(conn: Connection, topic: Topic) -> list[PartitionState]:
    bounds = conn.execute(
        select(partitions.c.partition, partitions.c.log_start_offset, partitions.c.next_offset)
        .where(partitions.c.topic_id == topic.topic_id)
        .order_by(partitions.c.partition)
    ).all()
    held = dict(
        conn.execute(
            select(transaction_partitions.c.partition, func.min(transaction_partitions.c.first_offset))
            .where(transaction_partitions.c.topic_id == topic.topic_id, transaction_partitions.c.marker_offset.is_(None))
            .group_by(transaction_partitions.c.partition)
        ).all()
    )
    return [
        PartitionState(int(p), int(start), int(hw), min(int(held.get(p, hw)), int(hw))) for p, start, hw in bounds
    ]


def read_range(
    conn: Connection, topic: Topic, partition: int, start: int, end: int, limit: int, *, include_control: bool = False
) -> list[StoredMessage]:
    """Messages with ``start <= offset < end``, in offset order, at most ``limit`` (control rows skipped)."""
    condition = and_(
        messages.c.topic_id == topic.topic_id,
        messages.c.partition == partition,
        messages.c.offset >= start,
        messages.c.offset < end,
    )
    if not include_control:
        condition = and_(condition, messages.c.control == CONTROL_NONE)
    rows = conn.execute(
        select(
            messages.c.offset,
            messages.c.timestamp,
            messages.c.key,
            messages.c.value,
            messages.c.value_kind,
            messages.c.headers,
            messages.c.txn_id,
        )
        .where(condition)
        .order_by(messages.c.offset)
        .limit(limit)
    )
    return [
        StoredMessage(topic.name, partition, int(o), int(ts), k, bytes(v), int(kind), h, txn)
        for o, ts, k, v, kind, h, txn in rows
    ]


def read_one(conn: Connection, topic: Topic, partition: int, offset: int) -> tuple[StoredMessage, str | None] | None:
    """One message and its system properties (used by the half store)."""
    row = conn.execute(
        select(
            messages.c.timestamp,
            messages.c.key,
            messages.c.value,
            messages.c.value_kind,
            messages.c.headers,
            messages.c.properties,
        ).where(messages.c.topic_id == topic.topic_id, messages.c.partition == partition, messages.c.offset == offset)
    ).first()
    if row is None:
        return None
    ts, key, value, kind, headers, properties = row
    return StoredMessage(topic.name, partition, offset, int(ts), key, bytes(value), int(kind), headers), properties


def aborted_transactions(conn: Connection, topic_id: int, partition: int, start: int, end: int) -> set[str]:
    """Ids of aborted transactions with messages in ``[start, end)`` of a partition."""
    rows = conn.execute(
        select(transaction_partitions.c.txn_id).where(
            transaction_partitions.c.topic_id == topic_id,
            transaction_partitions.c.partition == partition,
            transaction_partitions.c.aborted.is_(True),
            transaction_partitions.c.first_offset < end,
            transaction_partitions.c.marker_offset >= start,
        )
    )
    return {row[0] for row in rows}


# -- retention --------------------------------------------------------------------------


def truncate_before(conn: Connection, topic: Topic, partition: int, offset: int) -> int:
    """Drop messages below ``offset`` and advance the log start offset; returns rows removed."""
    removed = conn.execute(
        messages.delete().where(
            messages.c.topic_id == topic.topic_id, messages.c.partition == partition, messages.c.offset < offset
        )
    ).rowcount
    conn.execute(
        update(partitions)
        .where(
            partitions.c.topic_id == topic.topic_id,
            partitions.c.partition == partition,
            partitions.c.log_start_offset < offset,
        )
        .values(log_start_offset=offset)
    )
    return int(removed or 0)


def topic_ids(conn: Connection, names: Iterable[str]) -> dict[str, int]:
    rows = conn.execute(select(topics.c.name, topics.c.topic_id).where(topics.c.name.in_(list(names))))
    return {name: int(topic_id) for name, topic_id in rows}
