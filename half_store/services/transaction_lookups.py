"""Transactions as writes and ends need them: found, locked while OPEN, or explained why not.

The produce path (:mod:`half_store.services.stamped_append`), the coordinator's begins and
ends, Kafka's producer transactions and transactional share acks all look transactions up
through these, so a transaction that is missing, past its timeout, ending, or fenced by a
newer producer epoch is refused with the same error whichever way it was reached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NoReturn

from sqlalchemy import Connection

from half_store.domain.errors import InvalidTransactionState, ProducerFenced, TransactionNotFound
from half_store.domain.txn_state import TxnState
from half_store.storage import producer_store, txn_store
from half_store.storage.txn_store import TransactionRow


def lock_producers(
    conn: Connection, stamps: Sequence[tuple[int, int]]
) -> tuple[dict[int, int | None], dict[int, list[TransactionRow]]]:
    """Before a begin: lock the producers' rows, refuse fenced ``(producer id, epoch)``.

    Returns the producers' transaction timeouts and their unfinished transactions, whose
    rows are locked too (after the producers', as every writer takes them).
    The epochs checked come back from the statement that locks the rows, so a concurrent
    InitProducerId (epoch bump) or begin waits for this one and the checks see a settled epoch.
    """
    producer_ids = sorted({producer_id for producer_id, _ in stamps})
    touched = producer_store.touch_many(conn, producer_ids)
    producer_store.refuse_stale_epochs({producer_id: t.epoch for producer_id, t in touched.items()}, stamps)
    timeouts = {producer_id: t.transaction_timeout_ms for producer_id, t in touched.items()}
    return timeouts, txn_store.unfinished_of_producers(conn, producer_ids, locking=True)


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


def refuse_fenced(conn: Connection, txn: TransactionRow, epochs: Mapping[int, int] | None = None) -> None:
    """Refuse a transaction whose producer has a newer epoch; ``epochs``: producers' current epochs, if read already."""
    if txn.producer_id is None or txn.producer_epoch is None:
        return
    current = producer_store.current_epoch(conn, txn.producer_id) if epochs is None else epochs.get(txn.producer_id)
    if current is not None and current > txn.producer_epoch:
        raise ProducerFenced(
            f"transaction {txn.txn_id} belongs to producer epoch {txn.producer_epoch}, fenced by epoch {current}"
        )
