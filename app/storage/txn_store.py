"""SQL for Kafka-mode transactions: the coordinator's log (Kafka's ``__transaction_state``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from app.domain import now_ms
from app.storage.schema import transaction_offsets, transaction_partitions, transactions
from app.storage.upsert import upsert
from app.txn_state import UNFINISHED_STATES, TxnState


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
        TxnState(state),
        int(timeout_ms),  # type: ignore[call-overload]
        bool(timed_out),
        int(started),  # type: ignore[call-overload]
        int(expires),  # type: ignore[call-overload]
    )


def insert_transaction(
    conn: Connection, txn_id: str, producer_id: int | None, producer_epoch: int | None, timeout_ms: int
) -> TransactionRow:
    now = now_ms()
    conn.execute(
        insert(transactions).values(
            txn_id=txn_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            state=TxnState.OPEN.value,
            timeout_ms=timeout_ms,
            timed_out=False,
            started_at=now,
            expires_at=now + timeout_ms,
            updated_at=now,
        )
    )
    return TransactionRow(txn_id, producer_id, producer_epoch, TxnState.OPEN, timeout_ms, False, now, now + timeout_ms)


def get(conn: Connection, txn_id: str) -> TransactionRow | None:
    row = conn.execute(select(*_COLUMNS).where(transactions.c.txn_id == txn_id)).first()
    return _row(row) if row else None


_LOCK_OPEN = (
    update(transactions)
    .where(
        transactions.c.txn_id == bindparam("id"),
        transactions.c.state == TxnState.OPEN.value,
        transactions.c.expires_at > bindparam("now"),
    )
    .values(updated_at=bindparam("now"))
    .returning(*_COLUMNS)
)


def lock_open(conn: Connection, txn_id: str) -> TransactionRow | None:
    """Lock an OPEN, unexpired transaction's row for this database transaction; None if it is not."""
    row = conn.execute(_LOCK_OPEN, {"id": txn_id, "now": now_ms()}).first()
    return _row(row) if row else None


def transition(conn: Connection, txn_id: str, source: TxnState, target: TxnState, *, timed_out: bool = False) -> bool:
    """Compare-and-set the state; True if this caller moved it."""
    values: dict[str, object] = {"state": target.value, "updated_at": now_ms()}
    if timed_out:
        values["timed_out"] = True
    moved = conn.execute(
        update(transactions)
        .where(transactions.c.txn_id == txn_id, transactions.c.state == source.value)
        .values(**values)
    ).rowcount
    return bool(moved)


def unfinished_of_producer(conn: Connection, producer_id: int) -> list[TransactionRow]:
    rows = conn.execute(
        select(*_COLUMNS).where(
            transactions.c.producer_id == producer_id,
            transactions.c.state.in_([s.value for s in UNFINISHED_STATES]),
        )
    )
    return [_row(r) for r in rows]


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


def add_partition(conn: Connection, txn_id: str, topic_id: int, partition: int, first_offset: int) -> None:
    """Record that the transaction wrote to a partition (idempotent; keeps the first offset)."""
    exists = conn.execute(
        select(transaction_partitions.c.first_offset).where(
            transaction_partitions.c.txn_id == txn_id,
            transaction_partitions.c.topic_id == topic_id,
            transaction_partitions.c.partition == partition,
        )
    ).first()
    if exists is None:
        conn.execute(
            insert(transaction_partitions).values(
                txn_id=txn_id, topic_id=topic_id, partition=partition, first_offset=first_offset, aborted=False
            )
        )


def partitions_of(conn: Connection, txn_id: str) -> list[TxnPartition]:
    rows = conn.execute(
        select(
            transaction_partitions.c.topic_id,
            transaction_partitions.c.partition,
            transaction_partitions.c.first_offset,
            transaction_partitions.c.marker_offset,
        )
        .where(transaction_partitions.c.txn_id == txn_id)
        .order_by(transaction_partitions.c.topic_id, transaction_partitions.c.partition)
    )
    return [TxnPartition(int(t), int(p), int(f), None if m is None else int(m)) for t, p, f, m in rows]


def mark_partition_ended(
    conn: Connection, txn_id: str, topic_id: int, partition: int, marker_offset: int, aborted: bool
) -> None:
    conn.execute(
        update(transaction_partitions)
        .where(
            transaction_partitions.c.txn_id == txn_id,
            transaction_partitions.c.topic_id == topic_id,
            transaction_partitions.c.partition == partition,
        )
        .values(marker_offset=marker_offset, aborted=aborted)
    )


def put_offsets(conn: Connection, txn_id: str, group: str, offsets: Sequence[tuple[int, int, int, str | None]]) -> None:
    upsert(
        conn,
        transaction_offsets,
        [
            {"txn_id": txn_id, "group_id": group, "topic_id": t, "partition": p, "offset": o, "metadata": m}
            for t, p, o, m in offsets
        ],
        keys=("txn_id", "group_id", "topic_id", "partition"),
    )


def take_offsets(conn: Connection, txn_id: str) -> dict[str, list[tuple[int, int, int, str | None]]]:
    """The offsets staged in a transaction, by group; removes them."""
    rows = conn.execute(
        select(
            transaction_offsets.c.group_id,
            transaction_offsets.c.topic_id,
            transaction_offsets.c.partition,
            transaction_offsets.c.offset,
            transaction_offsets.c.metadata,
        ).where(transaction_offsets.c.txn_id == txn_id)
    )
    staged: dict[str, list[tuple[int, int, int, str | None]]] = {}
    for group, topic_id, partition, offset, metadata in rows:
        staged.setdefault(group, []).append((int(topic_id), int(partition), int(offset), metadata))
    conn.execute(delete(transaction_offsets).where(transaction_offsets.c.txn_id == txn_id))
    return staged


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
