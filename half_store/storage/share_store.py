"""SQL for share groups: share partitions (end offsets, counters), in-flight records, the shared secret.

Every share-group write first locks the share-partition rows it works in, in key order
(:func:`lock_share_partitions`); the records of a partition are then read and written
by one database transaction at a time, in this process or any other on the database.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    case,
    delete,
    func,
    literal,
    or_,
    select,
    tuple_,
    update,
)

from half_store.domain.records import now_ms
from half_store.domain.share_records import ShareGroupSummary
from half_store.domain.share_state import InFlightRecord, RecordState, SharePartitionKey
from half_store.storage.bulk import insert_rows
from half_store.storage.schema import broker_secrets, partitions, share_partitions, share_records, topics
from half_store.storage.upsert import dialect_insert, update_rows

_RECORD_COLUMNS = (
    share_records.c.group_id,
    share_records.c.topic_id,
    share_records.c.partition,
    share_records.c.offset,
    share_records.c.state,
    share_records.c.delivery_count,
    share_records.c.generation,
    share_records.c.visible_at,
    share_records.c.key,
    share_records.c.txn_id,
)
_SHARE_KEY = (share_partitions.c.group_id, share_partitions.c.topic_id, share_partitions.c.partition)
_RECORD_KEY = ("group_id", "topic_id", "partition", "offset")
_RECORD_VALUES = ("state", "delivery_count", "generation", "visible_at", "txn_id")


def _record(row: Sequence[Any]) -> InFlightRecord:
    group, topic_id, partition, offset, state, count, generation, visible_at, key, txn_id = row
    return InFlightRecord(
        str(group),
        int(topic_id),
        int(partition),
        int(offset),
        RecordState(str(state)),
        int(count),
        int(generation),
        int(visible_at),
        None if key is None else str(key),
        None if txn_id is None else str(txn_id),
    )


def _in_partition(key: SharePartitionKey) -> list[ColumnElement[bool]]:
    group, topic_id, partition = key
    return [
        share_records.c.group_id == group,
        share_records.c.topic_id == topic_id,
        share_records.c.partition == partition,
    ]


# -- share partitions ---------------------------------------------------------------------


def create_share_partitions(conn: Connection, group: str, topic_id: int) -> None:
    """Start ``group`` on every partition of a topic it has no state for yet, at the log's start.

    A queue's consumers get what was sent before they came (RocketMQ's and SQS's behaviour,
    not Kafka's default of the log's end).
    """
    source = select(
        literal(group), partitions.c.topic_id, partitions.c.partition, partitions.c.log_start_offset,
        literal(0), literal(0), literal(now_ms()),
    ).where(partitions.c.topic_id == topic_id)
    columns = ["group_id", "topic_id", "partition", "end_offset", "accepted", "dead_lettered", "created_at"]
    statement = dialect_insert(conn, share_partitions).from_select(columns, source)
    conn.execute(statement.on_conflict_do_nothing(index_elements=["group_id", "topic_id", "partition"]))


@dataclass(slots=True)
class ShareCursor:
    """A locked share partition: its end offset, and hints about its records read with the lock.

    ``in_flight``: how many records it holds; ``next_visible``: the earliest ``visible_at`` of a
    record not held by a transaction (None: none), so a receive that finds it in the future
    need not look for records to deliver again. Both are as of the lock: an operation earlier
    in the same database transaction may have changed them, which only delays a redelivery.
    """

    end_offset: int
    in_flight: int
    next_visible: int | None


_IN_FLIGHT = (
    select(func.count())
    .select_from(share_records)
    .where(
        share_records.c.group_id == share_partitions.c.group_id,
        share_records.c.topic_id == share_partitions.c.topic_id,
        share_records.c.partition == share_partitions.c.partition,
    )
    .scalar_subquery()
)
_NEXT_VISIBLE = (
    select(func.min(share_records.c.visible_at))
    .where(
        share_records.c.group_id == share_partitions.c.group_id,
        share_records.c.topic_id == share_partitions.c.topic_id,
        share_records.c.partition == share_partitions.c.partition,
        share_records.c.txn_id.is_(None),
    )
    .scalar_subquery()
)


def lock_share_partitions(conn: Connection, keys: Sequence[SharePartitionKey]) -> dict[SharePartitionKey, ShareCursor]:
    """Lock the existing share partitions among ``keys`` in key order; what a receive needs to know of each."""
    if not keys:
        return {}
    rows = conn.execute(
        select(*_SHARE_KEY, share_partitions.c.end_offset, _IN_FLIGHT, _NEXT_VISIBLE)
        .where(tuple_(*_SHARE_KEY).in_(sorted(set(keys))))
        .order_by(*_SHARE_KEY)
        .with_for_update(of=share_partitions)
    )
    return {
        (str(g), int(t), int(p)): ShareCursor(int(end), int(count), None if visible is None else int(visible))
        for g, t, p, end, count, visible in rows
    }


_UPDATE_SHARE_PARTITIONS = (
    update(share_partitions)
    .where(
        share_partitions.c.group_id == bindparam("g"),
        share_partitions.c.topic_id == bindparam("t"),
        share_partitions.c.partition == bindparam("p"),
    )
    .values(
        end_offset=bindparam("end"),
        accepted=share_partitions.c.accepted + bindparam("accepted"),
        dead_lettered=share_partitions.c.dead_lettered + bindparam("dead"),
    )
)


def update_share_partitions(conn: Connection, changes: dict[SharePartitionKey, tuple[int, int, int]]) -> None:
    """Per share partition, ``(end offset, records accepted, records dead-lettered)``: the new end, counts to add."""
    if changes:
        conn.execute(
            _UPDATE_SHARE_PARTITIONS,
            [
                {"g": g, "t": t, "p": p, "end": end, "accepted": accepted, "dead": dead}
                for (g, t, p), (end, accepted, dead) in sorted(changes.items())
            ],
        )


@dataclass(frozen=True, slots=True)
class SharePartitionRow:
    topic_id: int
    partition: int
    end_offset: int
    accepted: int
    dead_lettered: int


def share_partitions_of(conn: Connection, group: str) -> list[SharePartitionRow]:
    rows = conn.execute(
        select(
            share_partitions.c.topic_id,
            share_partitions.c.partition,
            share_partitions.c.end_offset,
            share_partitions.c.accepted,
            share_partitions.c.dead_lettered,
        )
        .where(share_partitions.c.group_id == group)
        .order_by(share_partitions.c.topic_id, share_partitions.c.partition)
    )
    return [SharePartitionRow(int(t), int(p), int(e), int(a), int(d)) for t, p, e, a, d in rows]


def end_offsets(conn: Connection, group: str, topic_id: int) -> dict[int, int]:
    rows = conn.execute(
        select(share_partitions.c.partition, share_partitions.c.end_offset).where(
            share_partitions.c.group_id == group, share_partitions.c.topic_id == topic_id
        )
    )
    return {int(p): int(end) for p, end in rows}


# -- in-flight records --------------------------------------------------------------------------


def in_flight(
    conn: Connection, key: SharePartitionKey, *, visible_by: int | None = None, limit: int | None = None
) -> list[InFlightRecord]:
    """A share partition's records in offset order: all, or those that may go out at ``visible_by``
    (released or with an expired lock, not held by a transaction)."""
    query = select(*_RECORD_COLUMNS).where(*_in_partition(key))
    if visible_by is not None:
        query = query.where(share_records.c.txn_id.is_(None), share_records.c.visible_at <= visible_by)
    query = query.order_by(share_records.c.offset)
    if limit is not None:
        query = query.limit(limit)
    return [_record(tuple(row)) for row in conn.execute(query)]


def _runs(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted offsets as (first, last) runs of consecutive ones: a batch's receipts are mostly one run."""
    runs: list[tuple[int, int]] = []
    for offset in sorted(set(offsets)):
        if runs and offset == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], offset)
        else:
            runs.append((offset, offset))
    return runs


def _in_runs(runs: list[tuple[int, int]]) -> ColumnElement[bool]:
    """``offset`` in the runs: a range each, which the primary key index answers better than a long IN list."""
    return or_(*(share_records.c.offset.between(first, last) for first, last in runs))


def records_at(conn: Connection, key: SharePartitionKey, offsets: Iterable[int]) -> dict[int, InFlightRecord]:
    runs = _runs(offsets)
    if not runs:
        return {}
    rows = conn.execute(select(*_RECORD_COLUMNS).where(*_in_partition(key), _in_runs(runs)))
    return {found.offset: found for found in map(_record, rows)}


def records_of_transactions(conn: Connection, txn_ids: Sequence[str]) -> list[InFlightRecord]:
    """The records whose locks the transactions hold (their acknowledgements wait for them)."""
    if not txn_ids:
        return []
    rows = conn.execute(
        select(*_RECORD_COLUMNS).where(share_records.c.txn_id.in_(list(txn_ids))).order_by(*_RECORD_COLUMNS[:4])
    )
    return [_record(row) for row in rows]


_INSERTED_COLUMNS = (*_RECORD_KEY, *_RECORD_VALUES, "key")


def insert_records(conn: Connection, records: Sequence[InFlightRecord]) -> None:
    """New records (a receive's fresh messages): by COPY on PostgreSQL, a hundred at a time."""
    insert_rows(
        conn, share_records, _INSERTED_COLUMNS,
        [
            (r.group, r.topic_id, r.partition, r.offset, r.state.value, r.delivery_count, r.generation, r.visible_at,
             r.txn_id, r.key)
            for r in records
        ],
    )


def update_records(conn: Connection, records: Sequence[InFlightRecord]) -> None:
    """Write the state, counts, deadline and transaction of records already in the table."""
    update_rows(
        conn, share_records, _RECORD_KEY, _RECORD_VALUES,
        [
            (r.group, r.topic_id, r.partition, r.offset, r.state.value, r.delivery_count, r.generation, r.visible_at,
             r.txn_id)
            for r in records
        ],
    )


def delete_records(conn: Connection, records: Sequence[InFlightRecord]) -> None:
    """Remove accepted and archived records: they are done, below or above the start offset."""
    offsets: dict[SharePartitionKey, list[int]] = defaultdict(list)
    for record in records:
        offsets[record.share_key].append(record.offset)
    for key, found in sorted(offsets.items()):
        conn.execute(delete(share_records).where(*_in_partition(key), _in_runs(_runs(found))))


def partitions_with_expired_last_delivery(
    conn: Connection, now: int, max_deliveries: int, limit: int
) -> list[SharePartitionKey]:
    """Share partitions holding a record whose last allowed lock has run out (to dead-letter)."""
    rows = conn.execute(
        select(share_records.c.group_id, share_records.c.topic_id, share_records.c.partition)
        .where(
            share_records.c.delivery_count >= max_deliveries,
            share_records.c.visible_at <= now,
            share_records.c.txn_id.is_(None),
        )
        .distinct()
        .limit(limit)
    )
    return sorted((str(g), int(t), int(p)) for g, t, p in rows)


@dataclass(frozen=True, slots=True)
class RecordCounts:
    start_offset: int | None  # the lowest in-flight offset, None when nothing is in flight
    locked: int
    waiting: int  # in flight but not locked: released (perhaps with a delay) or with an expired lock


def record_counts(conn: Connection, group: str, now: int) -> dict[tuple[int, int], RecordCounts]:
    """Per (topic id, partition) of ``group``: where its in-flight records start and how many are locked."""
    locked = _locked(now)
    rows = conn.execute(
        select(
            share_records.c.topic_id,
            share_records.c.partition,
            func.min(share_records.c.offset),
            func.sum(case((locked, 1), else_=0)),
            func.count(),
        )
        .where(share_records.c.group_id == group)
        .group_by(share_records.c.topic_id, share_records.c.partition)
    )
    return {
        (int(t), int(p)): RecordCounts(int(start), int(held or 0), int(total) - int(held or 0))
        for t, p, start, held, total in rows
    }


def has_visible_records(conn: Connection, group: str, topic_id: int, now: int) -> bool:
    """Whether a record of the group's topic may go out now (released, or its lock ran out)."""
    found = conn.execute(
        select(share_records.c.offset)
        .where(
            share_records.c.group_id == group,
            share_records.c.topic_id == topic_id,
            share_records.c.txn_id.is_(None),
            share_records.c.visible_at <= now,
        )
        .limit(1)
    ).first()
    return found is not None


def _locked(now: int) -> ColumnElement[bool]:
    """A record locked now: by a delivery whose lock has not run out, or by a transaction's acknowledgement."""
    return and_(
        share_records.c.state == RecordState.ACQUIRED.value,
        (share_records.c.txn_id.isnot(None)) | (share_records.c.visible_at > now),
    )


def count_locked(conn: Connection, now: int, group: str | None = None) -> int:
    """Records locked in this database, by any group or by ``group``."""
    query = select(func.count()).select_from(share_records).where(_locked(now))
    if group is not None:
        query = query.where(share_records.c.group_id == group)
    return int(conn.execute(query).scalar_one())


def share_groups(conn: Connection, now: int) -> list[ShareGroupSummary]:
    """Every share group (one that has received from some topic), by name."""
    found: dict[str, tuple[set[str], list[int]]] = {}
    rows = conn.execute(
        select(share_partitions.c.group_id, topics.c.name, share_partitions.c.accepted, share_partitions.c.dead_lettered)
        .join(topics, topics.c.topic_id == share_partitions.c.topic_id)
    )
    for group, topic, accepted, dead in rows:
        names, counts = found.setdefault(str(group), (set(), [0, 0]))
        names.add(str(topic))
        counts[0] += int(accepted)
        counts[1] += int(dead)
    by_group = select(share_records.c.group_id, func.count()).where(_locked(now)).group_by(share_records.c.group_id)
    locked: dict[str, int] = {str(group): int(count) for group, count in conn.execute(by_group)}
    return [
        ShareGroupSummary(group, tuple(sorted(names)), accepted, dead, locked.get(group, 0))
        for group, (names, (accepted, dead)) in sorted(found.items())
    ]


def delete_share_group(conn: Connection, group: str) -> bool:
    """Forget ``group``: its share partitions and in-flight records; whether it had any."""
    conn.execute(delete(share_records).where(share_records.c.group_id == group))
    return bool(conn.execute(delete(share_partitions).where(share_partitions.c.group_id == group)).rowcount)


# -- secrets shared by every broker process on the database ------------------------------------


def secret(conn: Connection, name: str, new_value: str) -> str:
    """The secret called ``name``: ``new_value`` if this call stored it first, else the one stored earlier."""
    conn.execute(
        dialect_insert(conn, broker_secrets)
        .values(name=name, value=new_value, created_at=now_ms())
        .on_conflict_do_nothing(index_elements=["name"])
    )
    return str(conn.execute(select(broker_secrets.c.value).where(broker_secrets.c.name == name)).scalar_one())
