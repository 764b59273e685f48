"""SQL for Kafka-mode transactions: the coordinator's log (Kafka's ``__transaction_state``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, delete, select, update

from half_store.domain.records import now_ms
from half_store.domain.txn_state import UNFINISHED_STATES, TxnState, TxnTransition
from half_store.storage.schema import (
    producers,
    topics,
    transaction_offsets,
    transaction_partitions,
    transactions,
)
from half_store.storage.upsert import insert_many, update_rows, upsert


@dataclass(frozen=True, slots=True)
class TransactionRow:
    txn_id: str
    producer_id: int | None
    producer_epoch: int | None
    state: TxnState
    timeout_ms: int
    timed_out: bool
    started_at: int
    expires_at: int


@dataclass(frozen=True, slots=True)
class TxnPartition:
    topic_id: int
    partition: int
    first_offset: int
    marker_offset: int | None


_COLUMNS = (
    transactions.c.txn_id,
    transactions.c.producer_id,
    transactions.c.producer_epoch,
    transactions.c.state,
    transactions.c.timeout_ms,
    transactions.c.timed_out,
    transactions.c.started_at,
    transactions.c.expires_at,
)


def _row(values: Sequence[object]) -> TransactionRow:
    txn_id, pid, epoch, state, timeout_ms, timed_out, started, expires = values
    return TransactionRow(
        str(txn_id),
        None if pid is None else int(pid),  # type: ignore[call-overload]
        None if epoch is None else int(epoch),  # type: ignore[call-overload]
        TxnState(str(state)),
        int(timeout_ms),  # type: ignore[call-overload]
        bool(timed_out),
        int(started),  # type: ignore[call-overload]
        int(expires),  # type: ignore[call-overload]
    )


def insert_transactions(conn: Connection, rows: Sequence[TransactionRow]) -> None:
    insert_many(
        conn,
        transactions,
        [
            {
                "txn_id": row.txn_id,
                "producer_id": row.producer_id,
                "producer_epoch": row.producer_epoch,
                "state": row.state.value,
                "timeout_ms": row.timeout_ms,
                "timed_out": row.timed_out,
                "started_at": row.started_at,
                "expires_at": row.expires_at,
                "updated_at": row.started_at,
            }
            for row in rows
        ],
    )


def get(conn: Connection, txn_id: str) -> TransactionRow | None:
    return get_many(conn, [txn_id]).get(txn_id)


# Statements of a transaction's writes and end are built once (as _LOCK_OPEN below):
# constructing one and its cache key on every call was the writer's own CPU, once per
# statement of every group commit.
_BY_IDS = select(*_COLUMNS).where(transactions.c.txn_id.in_(bindparam("ids", expanding=True)))
# A transaction's producer's epoch now: what a check for fencing compares the transaction's with.
_PRODUCER_EPOCH = select(producers.c.epoch).where(producers.c.producer_id == transactions.c.producer_id).scalar_subquery()
_BY_IDS_WITH_EPOCHS = _BY_IDS.add_columns(_PRODUCER_EPOCH)


def get_many(conn: Connection, txn_ids: Sequence[str]) -> dict[str, TransactionRow]:
    rows = conn.execute(_BY_IDS, {"ids": list(txn_ids)})
    return {found.txn_id: found for found in map(_row, rows)}


def get_many_with_epochs(conn: Connection, txn_ids: Sequence[str]) -> tuple[dict[str, TransactionRow], dict[int, int]]:
    """:func:`get_many`, and the current epochs of the transactions' producers, by producer id, in one read."""
    return _with_epochs(conn.execute(_BY_IDS_WITH_EPOCHS, {"ids": list(txn_ids)}).all())


_LOCK_OPEN = (
    update(transactions)
    .where(
        transactions.c.txn_id.in_(bindparam("ids", expanding=True)),
        transactions.c.state == TxnState.OPEN.value,
        transactions.c.expires_at > bindparam("now"),
    )
    .values(updated_at=bindparam("now"))
    .returning(*_COLUMNS)
)
# The same, answering with each transaction's producer's epoch now, as a read of it would.
_LOCK_OPEN_WITH_EPOCHS = _LOCK_OPEN.returning(_PRODUCER_EPOCH)


def lock_open(conn: Connection, txn_ids: Sequence[str]) -> dict[str, TransactionRow]:
    """Lock the OPEN, unexpired ones of ``txn_ids`` for this database transaction; the others are left out."""
    rows = conn.execute(_LOCK_OPEN, {"ids": list(txn_ids), "now": now_ms()})
    return {locked.txn_id: locked for locked in map(_row, rows)}


def lock_open_with_epochs(conn: Connection, txn_ids: Sequence[str]) -> tuple[dict[str, TransactionRow], dict[int, int]]:
    """:func:`lock_open`, and the current epochs of the locked transactions' producers, by producer id.

    A write into a transaction checks its producer's epoch: read with the lock, one round trip less.
    """
    return _with_epochs(conn.execute(_LOCK_OPEN_WITH_EPOCHS, {"ids": list(txn_ids), "now": now_ms()}).all())


def _with_epochs(rows: Sequence[Sequence[object]]) -> tuple[dict[str, TransactionRow], dict[int, int]]:
    """Rows of _COLUMNS and then _PRODUCER_EPOCH: the transactions by id, their producers' epochs by producer id."""
    found: dict[str, TransactionRow] = {}
    epochs: dict[int, int] = {}
    for row in rows:
        txn = found[str(row[0])] = _row(row[:-1])
        if txn.producer_id is not None and row[-1] is not None:
            epochs[txn.producer_id] = int(row[-1])  # type: ignore[call-overload]
    return found, epochs


def transition(conn: Connection, txn_id: str, move: TxnTransition, *, timed_out: bool = False) -> bool:
    """Compare-and-set the state along ``move`` (an edge of the table); True if this caller moved it."""
    return bool(transition_many(conn, [txn_id], move, timed_out=timed_out))


# By whether the move also marks the transaction timed out (otherwise that column is left as it is).
_TRANSITION = {
    timed_out: update(transactions)
    .where(transactions.c.txn_id.in_(bindparam("ids", expanding=True)), transactions.c.state == bindparam("source"))
    .values(state=bindparam("target"), updated_at=bindparam("now"), **({"timed_out": True} if timed_out else {}))
    .returning(transactions.c.txn_id)
    for timed_out in (False, True)
}


def transition_many(
    conn: Connection, txn_ids: Sequence[str], move: TxnTransition, *, timed_out: bool = False
) -> set[str]:
    """Compare-and-set the state of several transactions along ``move``; returns the ids this caller moved.

    A transaction left out was not in ``move.source`` any more: another process moved it first.
    """
    moved = conn.execute(
        _TRANSITION[timed_out],
        {"ids": list(txn_ids), "source": move.source.value, "target": move.target.value, "now": now_ms()},
    )
    return {row[0] for row in moved}


def unfinished_of_producer(conn: Connection, producer_id: int) -> list[TransactionRow]:
    return unfinished_of_producers(conn, [producer_id]).get(producer_id, [])


_UNFINISHED_OF_PRODUCERS = select(*_COLUMNS).where(
    transactions.c.producer_id.in_(bindparam("ids", expanding=True)),
    transactions.c.state.in_([s.value for s in UNFINISHED_STATES]),
)
_UNFINISHED_OF_PRODUCERS_LOCKED = _UNFINISHED_OF_PRODUCERS.with_for_update()


def unfinished_of_producers(
    conn: Connection, producer_ids: Sequence[int], *, locking: bool = False
) -> dict[int, list[TransactionRow]]:
    """Each producer's transactions that are not final yet (at most one, unless something went wrong).

    ``locking``: the rows stay locked for this database transaction, as :func:`lock_open` locks them.
    """
    rows = conn.execute(_UNFINISHED_OF_PRODUCERS_LOCKED if locking else _UNFINISHED_OF_PRODUCERS, {"ids": list(producer_ids)})
    found: dict[int, list[TransactionRow]] = {}
    for txn in map(_row, rows):
        assert txn.producer_id is not None
        found.setdefault(txn.producer_id, []).append(txn)
    return found


def expired_open(conn: Connection, now: int, limit: int) -> list[TransactionRow]:
    rows = conn.execute(
        select(*_COLUMNS)
        .where(transactions.c.state == TxnState.OPEN.value, transactions.c.expires_at <= now)
        .order_by(transactions.c.expires_at)
        .limit(limit)
    )
    return [_row(r) for r in rows]


def preparing(conn: Connection, limit: int) -> list[TransactionRow]:
    rows = conn.execute(
        select(*_COLUMNS)
        .where(transactions.c.state.in_([TxnState.PREPARE_COMMIT.value, TxnState.PREPARE_ABORT.value]))
        .limit(limit)
    )
    return [_row(r) for r in rows]


# -- partitions and offsets of a transaction ---------------------------------------------


def add_partitions(conn: Connection, joined: Sequence[tuple[str, int, int, int]]) -> None:
    """Record ``(txn_id, topic_id, partition, first_offset)``: the transaction wrote there.

    A partition the transaction already wrote to keeps its first offset, which is the
    lowest one: offsets only grow, and within ``joined`` the first row of a key wins.
    """
    rows = {(txn_id, topic_id, partition): first for txn_id, topic_id, partition, first in reversed(joined)}
    insert_many(
        conn,
        transaction_partitions,
        [
            {"txn_id": t, "topic_id": topic_id, "partition": p, "first_offset": first, "aborted": False}
            for (t, topic_id, p), first in rows.items()
        ],
        ignoring_existing=("txn_id", "topic_id", "partition"),
    )


def partitions_of(conn: Connection, txn_id: str) -> list[TxnPartition]:
    return partitions_of_many(conn, [txn_id]).get(txn_id, [])


_PARTITIONS_OF = select(
    transaction_partitions.c.txn_id,
    transaction_partitions.c.topic_id,
    transaction_partitions.c.partition,
    transaction_partitions.c.first_offset,
    transaction_partitions.c.marker_offset,
).where(transaction_partitions.c.txn_id.in_(bindparam("ids", expanding=True)))


def partitions_of_many(conn: Connection, txn_ids: Sequence[str]) -> dict[str, list[TxnPartition]]:
    """The partitions each transaction wrote to, in (topic id, partition) order.

    Sorted here, not by the query: an ORDER BY on the topic's columns let PostgreSQL,
    before its first statistics of the table, walk the topic's whole (topic, partition)
    index instead of looking the transactions up by primary key (1.3 ms per group
    commit and growing, in a benchmark's second minute).
    """
    rows = sorted(conn.execute(_PARTITIONS_OF, {"ids": list(txn_ids)}), key=lambda row: (row.topic_id, row.partition))
    found: dict[str, list[TxnPartition]] = {}
    for txn_id, t, p, f, m in rows:
        found.setdefault(txn_id, []).append(TxnPartition(int(t), int(p), int(f), None if m is None else int(m)))
    return found


def mark_partitions_ended(conn: Connection, ended: Sequence[tuple[str, int, int, int, bool]]) -> None:
    """Record ``(txn_id, topic_id, partition, marker_offset, aborted)``: the control marker is written.

    Only partitions without a marker get one, so the rows are found through the index of
    open transactions' partitions, which holds only the transactions in flight.
    """
    update_rows(
        conn, transaction_partitions, ("txn_id", "topic_id", "partition"), ("marker_offset", "aborted"), ended,
        still_null="marker_offset",
    )


def put_offsets(
    conn: Connection,
    txn_id: str,
    group: str,
    offsets: Sequence[tuple[int, int, int, str | None]],
    member: tuple[str, int] | None = None,
) -> None:
    """Stage ``(topic_id, partition, offset, metadata)``; ``member``: who staged them, ``(member id, epoch)``."""
    member_id, member_epoch = member if member is not None else (None, None)
    upsert(
        conn,
        transaction_offsets,
        [
            {
                "txn_id": txn_id,
                "group_id": group,
                "topic_id": t,
                "partition": p,
                "offset": o,
                "metadata": m,
                "member_id": member_id,
                "member_epoch": member_epoch,
            }
            for t, p, o, m in offsets
        ],
        keys=("txn_id", "group_id", "topic_id", "partition"),
    )


@dataclass(frozen=True, slots=True)
class StagedCommit:
    """Offsets a transaction staged for one group partition, and who staged them."""

    txn_id: str
    group: str
    topic_id: int
    partition: int
    offset: int
    metadata: str | None
    member_id: str | None
    member_epoch: int | None


_STAGED_COMMITS = select(
    transaction_offsets.c.txn_id,
    transaction_offsets.c.group_id,
    transaction_offsets.c.topic_id,
    transaction_offsets.c.partition,
    transaction_offsets.c.offset,
    transaction_offsets.c.metadata,
    transaction_offsets.c.member_id,
    transaction_offsets.c.member_epoch,
).where(transaction_offsets.c.txn_id.in_(bindparam("ids", expanding=True)))


def staged_commits(conn: Connection, txn_ids: Sequence[str]) -> list[StagedCommit]:
    """The group offsets staged in the transactions, in no particular order."""
    rows = conn.execute(_STAGED_COMMITS, {"ids": list(txn_ids)})
    return [
        StagedCommit(str(t), str(g), int(topic), int(p), int(o), m, member, None if e is None else int(e))
        for t, g, topic, p, o, m, member, e in rows
    ]


def pending_offset_partitions(conn: Connection, group: str) -> set[tuple[str, int]]:
    """``(topic name, partition)`` of the group's offsets staged in transactions that have not ended yet."""
    rows = conn.execute(
        select(topics.c.name, transaction_offsets.c.partition)
        .select_from(
            transaction_offsets.join(transactions, transactions.c.txn_id == transaction_offsets.c.txn_id).join(
                topics, topics.c.topic_id == transaction_offsets.c.topic_id
            )
        )
        .where(
            transaction_offsets.c.group_id == group,
            transactions.c.state.in_([s.value for s in UNFINISHED_STATES]),
        )
    )
    return {(str(name), int(partition)) for name, partition in rows}


def forget_staged(conn: Connection, txn_ids: Sequence[str]) -> None:
    """Remove the offsets staged in the transactions (committed to their groups, or aborted)."""
    conn.execute(delete(transaction_offsets).where(transaction_offsets.c.txn_id.in_(list(txn_ids))))


def purge_finished(conn: Connection, ended_before: int, limit: int) -> int:
    """Forget committed transactions ended before ``ended_before``.

    Aborted ones are kept: their partition rows are the aborted-range index that
    read_committed needs for as long as their messages are in the log.
    """
    old = (
        select(transactions.c.txn_id)
        .where(transactions.c.state == TxnState.COMMITTED.value, transactions.c.updated_at < ended_before)
        .limit(limit)
    )
    ids = [row[0] for row in conn.execute(old)]
    if ids:
        conn.execute(delete(transaction_partitions).where(transaction_partitions.c.txn_id.in_(ids)))
        conn.execute(delete(transactions).where(transactions.c.txn_id.in_(ids)))
    return len(ids)


# -- listing (Kafka's kafka-transactions.sh list / find-hanging) ------------------------------------


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    row: TransactionRow
    transactional_id: str | None
    updated_at: int
    partitions: list[tuple[str, int]]


def identity(conn: Connection, txn_id: str) -> tuple[str | None, int] | None:
    """(the transactional id of the transaction's producer, if it has one; when its row last changed)."""
    found = conn.execute(
        select(producers.c.transactional_id, transactions.c.updated_at)
        .select_from(transactions)
        .outerjoin(producers, producers.c.producer_id == transactions.c.producer_id)
        .where(transactions.c.txn_id == txn_id)
    ).first()
    return None if found is None else (None if found[0] is None else str(found[0]), int(found[1]))


def list_transactions(
    conn: Connection, states: Sequence[TxnState], started_before: int | None, transactional_id: str | None, limit: int
) -> list[ListedTransaction]:
    """Transactions matching the filters, oldest first (the longest-running, most likely hanging, lead)."""
    query = (
        select(*_COLUMNS, producers.c.transactional_id, transactions.c.updated_at)
        .outerjoin(producers, producers.c.producer_id == transactions.c.producer_id)
        .order_by(transactions.c.started_at, transactions.c.txn_id)
        .limit(limit)
    )
    if states:
        query = query.where(transactions.c.state.in_([s.value for s in states]))
    if started_before is not None:
        query = query.where(transactions.c.started_at <= started_before)
    if transactional_id is not None:
        query = query.where(producers.c.transactional_id == transactional_id)
    found = [(_row(values[: len(_COLUMNS)]), values[-2], int(values[-1])) for values in conn.execute(query)]
    names: dict[str, list[tuple[str, int]]] = {}
    if found:
        rows = conn.execute(
            select(transaction_partitions.c.txn_id, topics.c.name, transaction_partitions.c.partition)
            .join(topics, topics.c.topic_id == transaction_partitions.c.topic_id)
            .where(transaction_partitions.c.txn_id.in_([txn.txn_id for txn, _, _ in found]))
            .order_by(topics.c.name, transaction_partitions.c.partition)
        )
        for txn_id, topic, partition in rows:
            names.setdefault(str(txn_id), []).append((str(topic), int(partition)))
    return [
        ListedTransaction(txn, None if tid is None else str(tid), updated, names.get(txn.txn_id, []))
        for txn, tid, updated in found
    ]
