"""Kafka's produce path: idempotent and transactional appends, merged per group commit.

A batch that carries a producer id is checked against that producer's epoch and, with
a base sequence, against its last sequence on the partition (a retry gets the original
offsets back). A batch with a transaction id needs that transaction OPEN and
unexpired, and its partition joins the transaction. The appends of one group commit
then share one offset allocation per partition and one insert, as plain appends do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from sqlalchemy import Connection

from app.domain import AppendResult, ProducerStamp, Record, Topic
from app.errors import InvalidRequest, InvalidTransactionState, ProducerFenced, TransactionNotFound
from app.storage import log_store, producer_store, txn_store
from app.storage.log_store import AppendRequest
from app.storage.txn_store import TransactionRow
from app.storage.writer import MergeKind
from app.txn_state import TxnState


@dataclass(frozen=True, slots=True)
class StampedAppend:
    """One produce request to one partition, with its producer stamp."""

    topic: Topic
    partition: int
    records: Sequence[Record]
    stamp: ProducerStamp


def append_stamped_many(conn: Connection, appends: list[StampedAppend]) -> list[AppendResult]:
    """Check and append a group commit's stamped batches together; one result each, in order.

    Every check raises the error a lone request would get; the writer then runs the
    batch's requests one by one, so only the bad one fails.
    """
    txn_ids = {a.stamp.txn_id for a in appends if a.stamp.txn_id is not None}
    open_txns = txn_store.lock_open(conn, list(txn_ids)) if txn_ids else {}
    results: list[AppendResult | None] = []
    for append in appends:
        txn_id, producer_id = append.stamp.txn_id, append.stamp.producer_id
        if txn_id is not None:
            txn = open_txns.get(txn_id) or explain_not_open(conn, txn_id)
            if producer_id is not None and producer_id != txn.producer_id:
                raise InvalidRequest(f"transaction {txn_id} does not belong to producer {producer_id}")
        results.append(_retried_batch(conn, append))
    fresh = [index for index, result in enumerate(results) if result is None]
    requests = [AppendRequest(appends[i].topic, {appends[i].partition: list(appends[i].records)}, appends[i].stamp) for i in fresh]
    joined: list[tuple[str, int, int, int]] = []
    for index, bases in zip(fresh, log_store.append_many(conn, requests), strict=True):
        append = appends[index]
        base = bases[append.partition]
        results[index] = AppendResult(append.partition, base, len(append.records))
        if append.stamp.txn_id is not None:
            joined.append((append.stamp.txn_id, append.topic.topic_id, append.partition, base))
    txn_store.add_partitions(conn, joined)
    answered = [result for result in results if result is not None]
    assert len(answered) == len(appends), "every append is either a retry or appended"
    return answered


STAMPED_APPEND: MergeKind[StampedAppend, AppendResult] = MergeKind("stamped-append", append_stamped_many)


def _retried_batch(conn: Connection, append: StampedAppend) -> AppendResult | None:
    """Kafka's idempotence checks: the original offsets if this batch was written before, else None."""
    stamp = append.stamp
    if stamp.producer_id is None:
        return None
    if stamp.producer_epoch is None:
        raise InvalidRequest("producer_epoch is required with producer_id")
    producer_store.check_epoch(conn, stamp.producer_id, stamp.producer_epoch)
    if stamp.base_sequence is None:
        return None
    return producer_store.claim_sequence(
        conn, stamp.producer_id, stamp.producer_epoch, append.topic, append.partition, stamp.base_sequence, len(append.records)
    )


# -- what a transaction must be to be written to or ended -----------------------------------


def transaction(conn: Connection, txn_id: str) -> TransactionRow:
    found = txn_store.get(conn, txn_id)
    if found is None:
        raise TransactionNotFound(f"transaction {txn_id!r} does not exist")
    return found


def lock_open(conn: Connection, txn_id: str) -> TransactionRow:
    """Lock an OPEN, unexpired transaction's row for this database transaction, or raise why it is not."""
    return txn_store.lock_open(conn, [txn_id]).get(txn_id) or explain_not_open(conn, txn_id)


def explain_not_open(conn: Connection, txn_id: str) -> NoReturn:
    txn = transaction(conn, txn_id)
    refuse_fenced(conn, txn)
    if txn.state is TxnState.OPEN:
        raise InvalidTransactionState(f"transaction {txn_id} has passed its timeout and is being aborted")
    raise InvalidTransactionState(f"transaction {txn_id} is {txn.state.value}, not OPEN")


def refuse_fenced(conn: Connection, txn: TransactionRow) -> None:
    if txn.producer_id is None or txn.producer_epoch is None:
        return
    current = producer_store.current_epoch(conn, txn.producer_id)
    if current is not None and current > txn.producer_epoch:
        raise ProducerFenced(
            f"transaction {txn.txn_id} belongs to producer epoch {txn.producer_epoch}, fenced by epoch {current}"
        )
