"""SQL for topics, partitions and appending to the partitioned log (reading it: :mod:`half_store.storage.log_reads`).

Offsets are allocated under the partition row's lock
(``UPDATE partitions SET next_offset = next_offset + n ... RETURNING``): the row
lock is held until the transaction ends, so concurrent appenders to a partition,
in this process or another one on the same PostgreSQL, queue behind each other
and no offset is handed out twice or skipped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from half_store.domain.constants import MAX_INT32, VALUE_BATCH
from half_store.domain.errors import PartitionNotFound, TopicExists, ValidationFailed
from half_store.domain.records import (
    PartitionState,
    ProducerStamp,
    Record,
    Topic,
    now_ms,
)
from half_store.storage import record_batch
from half_store.storage.bulk import Row, insert_rows
from half_store.storage.database import WRITER_ISOLATION
from half_store.storage.schema import (
    deleted_topics,
    messages,
    partitions,
    topics,
    transaction_partitions,
)

# -- topics -------------------------------------------------------------------------


# SQLite gives a new row the highest id + 1, so deleting the newest topic would let the next
# one take its id: a write still holding the old id would land in the new topic. Ids of
# deleted topics are remembered, and SQLite gets an explicit id past all of them
# (PostgreSQL's sequence never goes back).
_NEXT_SQLITE_TOPIC_ID = select(
    func.max(
        func.coalesce(select(func.max(topics.c.topic_id)).scalar_subquery(), 0),
        func.coalesce(select(func.max(deleted_topics.c.topic_id)).scalar_subquery(), 0),
    )
    + 1
).scalar_subquery()


def create_topic(conn: Connection, name: str, partition_count: int) -> Topic:
    values: dict[str, object] = {"name": name, "partitions": partition_count, "created_at": now_ms()}
    if conn.dialect.name == "sqlite":
        values["topic_id"] = _NEXT_SQLITE_TOPIC_ID
    try:
        with conn.begin_nested():
            topic_id = conn.execute(insert(topics).values(**values).returning(topics.c.topic_id)).scalar_one()
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

# Built once: constructing Core statements per call showed up as a fifth of the writer's time.
_ALLOCATE = (
    update(partitions)
    .where(partitions.c.topic_id == bindparam("t_id"), partitions.c.partition == bindparam("p_id"))
    .values(next_offset=partitions.c.next_offset + bindparam("count"))
    .returning(partitions.c.next_offset)
)
# The hottest insert: message rows as positional tuples, through half_store.storage.bulk.
MESSAGE_COLUMNS = (
    "topic_id",
    "partition",
    "offset",
    "key",
    "value",
    "value_kind",
    "headers",
    "timestamp",
    "producer_id",
    "producer_epoch",
    "sequence",
    "txn_id",
    "control",
    "properties",
    "record_count",
)
MessageRow = Row


def insert_message_rows(conn: Connection, rows: list[MessageRow]) -> None:
    """Insert ``messages`` rows (tuples in ``MESSAGE_COLUMNS`` order) the fastest way the database has.

    On PostgreSQL a binary COPY: for 550 rows of 1 KiB it took 5.5 ms and 2.3 ms of the
    writer's CPU, against 12.9 and 8.1 ms for a COPY in text format.
    """
    insert_rows(conn, messages, MESSAGE_COLUMNS, rows)


UNSTAMPED = ProducerStamp()  # frozen, so one instance serves as every default


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """Records for some partitions of one topic, appended together (one produce request).

    ``stamp`` is written on every row; its ``base_sequence`` numbers each partition's
    records from there (only single-partition requests carry one). ``as_batches``: each
    partition's records are stored as one record batch row (what a producer sends);
    otherwise as a row each (the system topics, whose records are read one by one).
    """

    topic: Topic
    records: dict[int, list[Record]]
    stamp: ProducerStamp = UNSTAMPED
    as_batches: bool = False


def begin_locking(conn: Connection, keys: list[tuple[int, int]]) -> None:
    """Open a group commit's transaction and lock its partitions' rows, in one round trip (PostgreSQL only).

    psycopg sends its BEGIN on its own, a round trip before the first statement; a
    group commit is a chain of round trips (bench/results/history.md, round 10), so here the
    connection is in autocommit mode and BEGIN goes with the lock in one simple query.
    A simple query takes no parameters: the keys, integers, are written into it. Rows
    are locked as the sort emits them, in (topic id, partition) order, so writers never
    wait on each other in a cycle.
    """
    statement = f"BEGIN ISOLATION LEVEL {WRITER_ISOLATION}"
    if keys:
        topic_ids = ",".join(str(int(topic_id)) for topic_id, _ in keys)
        partition_numbers = ",".join(str(int(partition)) for _, partition in keys)
        statement += (
            "; SELECT partitions.topic_id FROM partitions"
            f" JOIN unnest('{{{topic_ids}}}'::integer[], '{{{partition_numbers}}}'::integer[]) AS k (topic_id, partition)"
            " ON partitions.topic_id = k.topic_id AND partitions.partition = k.partition"
            " ORDER BY partitions.topic_id, partitions.partition FOR UPDATE OF partitions"
        )
    conn.exec_driver_sql(statement, execution_options={"no_parameters": True})


# PostgreSQL only: every partition of a group commit in one round trip. The CTE locks the
# rows as its sort emits them (key order, as begin_locking); the UPDATE then changes rows
# this transaction already holds. A CTE that locks is always run to completion first.
_ALLOCATE_MANY = text(
    "WITH wanted AS MATERIALIZED ("
    " SELECT partitions.topic_id, partitions.partition, k.count FROM partitions"
    " JOIN unnest(CAST(:topic_ids AS INTEGER[]), CAST(:partitions AS INTEGER[]), CAST(:counts AS BIGINT[]))"
    " AS k (topic_id, partition, count)"
    " ON partitions.topic_id = k.topic_id AND partitions.partition = k.partition"
    " ORDER BY partitions.topic_id, partitions.partition FOR UPDATE OF partitions)"
    " UPDATE partitions SET next_offset = partitions.next_offset + wanted.count FROM wanted"
    " WHERE partitions.topic_id = wanted.topic_id AND partitions.partition = wanted.partition"
    " RETURNING partitions.topic_id, partitions.partition, partitions.next_offset - wanted.count"
)


def allocate_many(
    conn: Connection, counts: dict[tuple[int, int], int], topics_by_id: dict[int, Topic]
) -> dict[tuple[int, int], int]:
    """Reserve ``counts[(topic id, partition)]`` consecutive offsets in each partition, locking them in key order.

    Returns the first offset each partition got. On PostgreSQL one statement for all of
    them: a round trip per partition was a third of the writer's time in 100-message
    produce, spread over four partitions.
    """
    keys = sorted(counts)
    if conn.dialect.name == "postgresql":
        rows = conn.execute(
            _ALLOCATE_MANY,
            {"topic_ids": [t for t, _ in keys], "partitions": [p for _, p in keys], "counts": [counts[k] for k in keys]},
        ).all()
        firsts = {(topic_id, partition): int(first) for topic_id, partition, first in rows}
    else:
        firsts = {}
        for key in keys:
            next_offset = conn.execute(_ALLOCATE, {"t_id": key[0], "p_id": key[1], "count": counts[key]}).scalar_one_or_none()
            if next_offset is not None:
                firsts[key] = int(next_offset) - counts[key]
    for key in keys:
        if key not in firsts:
            raise PartitionNotFound(f"topic {topics_by_id[key[0]].name!r} has no partition {key[1]}")
    return firsts


def message_row(
    topic_id: int, partition: int, offset: int, record: Record, stamp: ProducerStamp, sequence: int | None
) -> MessageRow:
    """A messages row holding one record, in ``MESSAGE_COLUMNS`` order."""
    return (
        topic_id,
        partition,
        offset,
        record.key,
        record.value,
        record.value_kind,
        record.headers,
        record.timestamp,
        stamp.producer_id,
        stamp.producer_epoch,
        sequence,
        stamp.txn_id,
        stamp.control,
        record.properties,
        1,
    )


def batch_row(topic_id: int, partition: int, base_offset: int, records: list[Record], stamp: ProducerStamp) -> MessageRow:
    """A messages row holding a record batch (two or more records), in ``MESSAGE_COLUMNS`` order.

    The row's timestamp is the batch's latest, as Kafka's max timestamp: retention by
    time removes a batch only once every record in it is old enough. Its sequence is
    the batch's base sequence.
    """
    return (
        topic_id,
        partition,
        base_offset,
        None,
        record_batch.encode(records),
        VALUE_BATCH,
        None,
        max(r.timestamp for r in records),
        stamp.producer_id,
        stamp.producer_epoch,
        stamp.base_sequence,
        stamp.txn_id,
        stamp.control,
        None,
        len(records),
    )


def append(
    conn: Connection,
    topic: Topic,
    partition: int,
    records: Sequence[Record],
    stamp: ProducerStamp = UNSTAMPED,
    as_batch: bool = False,
) -> int:
    """Append ``records`` to one partition (as one record batch row if ``as_batch``); returns the offset of the first."""
    return append_many(conn, [AppendRequest(topic, {partition: list(records)}, stamp, as_batch)])[0][partition]


def append_many(conn: Connection, requests: list[AppendRequest]) -> list[dict[int, int]]:
    """Appends of several requests at once: one offset allocation per partition, one insert.

    Returns, per request, the first offset each of its partitions got. Partitions
    are allocated in sorted order, like every other multi-partition write.
    """
    totals: dict[tuple[int, int], int] = defaultdict(int)
    topics_by_id: dict[int, Topic] = {}
    for request in requests:
        topics_by_id[request.topic.topic_id] = request.topic
        for partition, records in request.records.items():
            totals[(request.topic.topic_id, partition)] += len(records)
    next_free = allocate_many(conn, totals, topics_by_id)
    rows: list[MessageRow] = []
    bases: list[dict[int, int]] = []
    for request in requests:
        request_bases: dict[int, int] = {}
        stamp, first_sequence = request.stamp, request.stamp.base_sequence
        for partition, records in request.records.items():
            if first_sequence is not None and first_sequence + len(records) - 1 > MAX_INT32:
                # Checked here too: binary COPY would store the next one as -2**31, silently.
                raise ValidationFailed(f"the batch's sequence numbers run past {MAX_INT32}")
            key = (request.topic.topic_id, partition)
            base = request_bases[partition] = next_free[key]
            next_free[key] = base + len(records)
            if request.as_batches and len(records) > 1:
                rows.append(batch_row(key[0], partition, base, records, stamp))
                continue
            rows.extend(
                message_row(key[0], partition, base + i, r, stamp, None if first_sequence is None else first_sequence + i)
                for i, r in enumerate(records)
            )
        bases.append(request_bases)
    insert_message_rows(conn, rows)
    return bases


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


_HELD_AT = (
    select(func.min(transaction_partitions.c.first_offset))
    .where(
        transaction_partitions.c.topic_id == partitions.c.topic_id,
        transaction_partitions.c.partition == partitions.c.partition,
        transaction_partitions.c.marker_offset.is_(None),
    )
    .scalar_subquery()
)
_PARTITION_STATE = select(partitions.c.log_start_offset, partitions.c.next_offset, _HELD_AT).where(
    partitions.c.topic_id == bindparam("t_id"), partitions.c.partition == bindparam("p_id")
)


def partition_state(conn: Connection, topic: Topic, partition: int) -> PartitionState:
    """Log start, high watermark and last stable offset of a partition, in one query."""
    row = conn.execute(_PARTITION_STATE, {"t_id": topic.topic_id, "p_id": partition}).first()
    if row is None:
        raise PartitionNotFound(f"topic {topic.name!r} has no partition {partition}")
    log_start, high_watermark, open_first = int(row[0]), int(row[1]), row[2]
    lso = high_watermark if open_first is None else min(int(open_first), high_watermark)
    return PartitionState(partition, log_start, high_watermark, lso)


def partition_states(conn: Connection, topic: Topic) -> list[PartitionState]:
    """Every partition's offsets, and the open transaction that holds its last stable offset back, if any."""
    bounds = conn.execute(
        select(partitions.c.partition, partitions.c.log_start_offset, partitions.c.next_offset)
        .where(partitions.c.topic_id == topic.topic_id)
        .order_by(partitions.c.partition)
    ).all()
    # Only open transactions' rows (a partial index): few, so the lowest per partition is found here.
    blocking: dict[int, tuple[int, str]] = {}
    for partition, txn_id, first_offset in conn.execute(
        select(
            transaction_partitions.c.partition, transaction_partitions.c.txn_id, transaction_partitions.c.first_offset
        ).where(transaction_partitions.c.topic_id == topic.topic_id, transaction_partitions.c.marker_offset.is_(None))
    ):
        held = blocking.get(int(partition))
        if held is None or int(first_offset) < held[0]:
            blocking[int(partition)] = (int(first_offset), str(txn_id))
    states = []
    for p, start, hw in bounds:
        held = blocking.get(int(p))
        lso = int(hw) if held is None else min(held[0], int(hw))
        states.append(PartitionState(int(p), int(start), int(hw), lso, None if held is None else held[1]))
    return states


def existing_topics_locked(conn: Connection, topic_ids: Sequence[int]) -> set[int]:
    """Which of ``topic_ids`` still exist, their rows share-locked until the transaction ends.

    A write that refers to a topic without appending to it (a half message's prepare)
    takes this, so a topic deletion either waits for it, and then sees what it wrote, or
    has gone first, and then the write finds the topic gone. ``FOR KEY SHARE`` does not
    block appends; SQLite has one writer at a time anyway.
    """
    found = conn.execute(
        select(topics.c.topic_id)
        .where(topics.c.topic_id.in_(list(topic_ids)))
        .with_for_update(read=True, key_share=True)
    )
    return {int(row[0]) for row in found}


# -- retention --------------------------------------------------------------------------


def truncate_before(conn: Connection, topic: Topic, partition: int, offset: int, log_start: int = 0) -> int:
    """Drop messages below ``offset`` and advance the log start offset; returns messages removed.

    ``offset`` is a batch boundary: a record batch is removed whole or not at all.
    ``log_start``: where the partition starts now, if known. The delete then scans only
    [log_start, offset): on PostgreSQL the index still holds the rows deleted by earlier
    truncations until vacuum, and a scan from offset 0 would step over all of them.
    """
    below = (
        messages.c.topic_id == topic.topic_id,
        messages.c.partition == partition,
        messages.c.offset >= log_start,
        messages.c.offset < offset,
    )
    removed = sum(conn.execute(messages.delete().where(*below).returning(messages.c.record_count)).scalars())
    conn.execute(
        update(partitions)
        .where(
            partitions.c.topic_id == topic.topic_id,
            partitions.c.partition == partition,
            partitions.c.log_start_offset < offset,
        )
        .values(log_start_offset=offset)
    )
    return int(removed)
