"""Kafka's produce path: idempotent and transactional appends, merged per group commit.

A batch that carries a producer id is checked against that producer's epoch and, with
a base sequence, against its last sequence on the partition (a retry gets the original
offsets back). A batch with a transaction id needs that transaction OPEN and
unexpired, and its partition joins the transaction. A *transactional* batch without
one goes into its producer's open transaction, which it begins if there is none: as
with Kafka since KIP-890, beginning a transaction costs the client no request of its
own. The appends of one group commit then share one offset allocation per partition
and one insert, as plain appends do.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from sqlalchemy import Connection

from half_store.domain.errors import (
    ConcurrentTransactions,
    ValidationFailed,
)
from half_store.domain.records import AppendResult, ProducerStamp, Record, Topic, now_ms
from half_store.domain.txn_state import TxnState
from half_store.services.transaction_lookups import explain_not_open, lock_producers
from half_store.storage import log_store, producer_store, txn_store
from half_store.storage.log_store import AppendRequest
from half_store.storage.producer_store import SequenceClaim
from half_store.storage.txn_store import TransactionRow
from half_store.storage.writer import MergeKind


@dataclass(frozen=True, slots=True)
class StampedAppend:
    """One produce request to one partition, with its producer stamp.

    ``begin_timeout_ms``: the timeout of a transaction this batch begins, when its
    producer did not set one at InitProducerId.
    """

    topic: Topic
    partition: int
    records: Sequence[Record]
    stamp: ProducerStamp
    begin_timeout_ms: int | None = None


def new_transaction(producer_id: int | None, producer_epoch: int | None, timeout_ms: int) -> TransactionRow:
    """An OPEN transaction starting now (to be inserted with ``txn_store.insert_transactions``)."""
    now = now_ms()
    return TransactionRow(
        "txn-" + secrets.token_hex(12), producer_id, producer_epoch, TxnState.OPEN, timeout_ms, False, now, now + timeout_ms
    )


def append_stamped_many(conn: Connection, appends: list[StampedAppend]) -> list[AppendResult]:
    """Check and append a group commit's stamped batches together; one result each, in order.

    Every check raises the error a lone request would get; the writer then runs the
    batch's requests one by one, so only the bad one fails.
    """
    appends, checked, open_txns = _into_producer_transactions(conn, appends)
    unlocked = {a.stamp.txn_id for a in appends if a.stamp.txn_id is not None} - open_txns.keys()
    epochs: dict[int, int] = {}  # the current epochs of the producers of the transactions locked here
    if unlocked:
        locked, epochs = txn_store.lock_open_with_epochs(conn, list(unlocked))
        open_txns = open_txns | locked
    for append in appends:
        txn_id, producer_id = append.stamp.txn_id, append.stamp.producer_id
        if txn_id is not None:
            txn = open_txns.get(txn_id) or explain_not_open(conn, txn_id)
            if producer_id is not None and producer_id != txn.producer_id:
                raise ValidationFailed(f"transaction {txn_id} does not belong to producer {producer_id}")
    results = [
        None if retried is None else replace(retried, txn_id=append.stamp.txn_id)
        for append, retried in zip(appends, _retried_batches(conn, appends, checked, epochs), strict=True)
    ]
    fresh = [index for index, result in enumerate(results) if result is None]
    requests = [
        AppendRequest(appends[i].topic, {appends[i].partition: list(appends[i].records)}, appends[i].stamp, as_batches=True)
        for i in fresh
    ]
    joined: list[tuple[str, int, int, int]] = []
    for index, bases in zip(fresh, log_store.append_many(conn, requests), strict=True):
        append = appends[index]
        base = bases[append.partition]
        results[index] = AppendResult(append.partition, base, len(append.records), txn_id=append.stamp.txn_id)
        if append.stamp.txn_id is not None:
            joined.append((append.stamp.txn_id, append.topic.topic_id, append.partition, base))
    txn_store.add_partitions(conn, joined)
    answered = [result for result in results if result is not None]
    assert len(answered) == len(appends), "every append is either a retry or appended"
    return answered


STAMPED_APPEND: MergeKind[StampedAppend, AppendResult] = MergeKind("stamped-append", append_stamped_many)


def _into_producer_transactions(
    conn: Connection, appends: list[StampedAppend]
) -> tuple[list[StampedAppend], set[tuple[int, int]], dict[str, TransactionRow]]:
    """Give each transactional batch without a transaction id its producer's open transaction.

    The producers are locked and checked as for an explicit begin (:func:`lock_producers`);
    the ``(producer id, epoch)`` pairs checked here are returned with the batches, and
    the transactions they go into, locked and open, as :func:`txn_store.lock_open` would
    return them. A transaction still ending (PREPARE_*) cannot take
    writes: 409 CONCURRENT_TRANSACTIONS, which the producer retries, as in Kafka.
    """
    epochs: dict[int, int] = {}  # producer id -> epoch, for the producers of batches that begin or join
    stamped: list[tuple[int, int]] = []
    fallback_timeouts: dict[int, int | None] = {}
    for append in appends:
        producer_id, epoch = append.stamp.producer_id, append.stamp.producer_epoch
        if not append.stamp.transactional or append.stamp.txn_id is not None:
            continue
        if producer_id is None or epoch is None:
            raise ValidationFailed("a transactional batch needs producer_id and producer_epoch")
        epochs.setdefault(producer_id, epoch)
        stamped.append((producer_id, epoch))
        fallback_timeouts.setdefault(producer_id, append.begin_timeout_ms)
    if not epochs:
        return appends, set(), {}
    timeouts, unfinished = lock_producers(conn, stamped)
    chosen: dict[int, str] = {}
    begun: list[TransactionRow] = []
    open_txns: dict[str, TransactionRow] = {}
    now = now_ms()
    for producer_id, epoch in epochs.items():
        current = unfinished.get(producer_id)
        if current and current[0].state is not TxnState.OPEN:
            raise ConcurrentTransactions(f"transaction {current[0].txn_id} of producer {producer_id} is still ending; retry")
        if current:
            chosen[producer_id] = current[0].txn_id
            if current[0].expires_at > now:  # one past its timeout is refused as lock_open refuses it
                open_txns[current[0].txn_id] = current[0]
            continue
        timeout = timeouts.get(producer_id) or fallback_timeouts[producer_id]
        if timeout is None:
            raise ValidationFailed(f"producer {producer_id} has no transaction timeout")
        begun.append(new_transaction(producer_id, epoch, timeout))
        chosen[producer_id] = begun[-1].txn_id
    txn_store.insert_transactions(conn, begun)
    open_txns.update((txn.txn_id, txn) for txn in begun)
    joined = [
        replace(a, stamp=replace(a.stamp, txn_id=chosen[a.stamp.producer_id]))
        if a.stamp.txn_id is None and a.stamp.producer_id in chosen and a.stamp.transactional
        else a
        for a in appends
    ]
    return joined, set(stamped), open_txns


def _retried_batches(
    conn: Connection, appends: list[StampedAppend], checked: set[tuple[int, int]], current_epochs: Mapping[int, int]
) -> list[AppendResult | None]:
    """Kafka's idempotence checks for every batch: the original offsets of a retry, else None.

    Epochs in ``checked`` were already checked in this database transaction, under the
    producer's lock, and are not read again. ``current_epochs``: producers' epochs read
    already in this database transaction (with the lock of a transaction of theirs);
    only the other producers' are read.
    """
    epochs: list[tuple[int, int]] = []
    claims: dict[int, SequenceClaim] = {}
    for index, append in enumerate(appends):
        producer_id, epoch, base_sequence = append.stamp.producer_id, append.stamp.producer_epoch, append.stamp.base_sequence
        if producer_id is None:
            continue
        if epoch is None:
            raise ValidationFailed("producer_epoch is required with producer_id")
        if (producer_id, epoch) not in checked:
            epochs.append((producer_id, epoch))
        if base_sequence is not None:
            claims[index] = SequenceClaim(producer_id, epoch, append.topic, append.partition, base_sequence, len(append.records))
    retried: list[AppendResult | None] = [None] * len(appends)
    if epochs:
        producer_store.refuse_stale_epochs(current_epochs, [stamp for stamp in epochs if stamp[0] in current_epochs])
        producer_store.check_epochs(conn, [stamp for stamp in epochs if stamp[0] not in current_epochs])
    for index, original in zip(claims, producer_store.claim_sequences(conn, list(claims.values())), strict=True):
        retried[index] = original
    return retried
