"""Kafka-style :class:`TransactionalProducer` (Mode 2): atomic writes across partitions.

The producer owns a ``transactional_id``; ``init_transactions()`` obtains its
producer id and a new epoch (fencing any older instance with the same id and
finishing that instance's open transaction). Then, per transaction::

    producer.begin_transaction()
    producer.send("payments", {"id": 1}, key="acct-7")
    producer.send_offsets_to_transaction({("orders", 0): 42}, "payment-service")
    producer.commit_transaction()        # or abort_transaction()

or ``with producer.transaction(): ...`` (commit on success, abort on exception).

The broker-side transaction is created lazily, as Kafka's client does: the first
``send`` begins it in the same request (KIP-890), and ``send_offsets_to_transaction``
before any send begins it explicitly. An empty transaction costs no request. Writes
carry sequence numbers, so retried requests never duplicate; all state rules live in
:mod:`sdk._txn_state`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Unpack

from sdk import calls
from sdk._base import SyncBase
from sdk._connection import ConnectionOptions
from sdk._membership import committing_member, refreshed_member
from sdk._share_core import Receipted, failure, receipts_of
from sdk._transactional_parts import DEFAULT_TRANSACTION_TIMEOUT_MS, TransactionalParts
from sdk._txn_state import TransactionState
from sdk.calls import TopicPartition
from sdk.errors import ConcurrentTransactionsError, FencedMemberEpochError
from sdk.message import to_wire
from sdk.models import AckResult, GroupMetadata

logger = logging.getLogger("halfmq.sdk")

__all__ = ["DEFAULT_TRANSACTION_TIMEOUT_MS", "TransactionalProducer"]


class TransactionalProducer(TransactionalParts, SyncBase):
    """Transactional producer for ``transactional_id``; see the module docstring.

    Thread-safe: calls are serialised. Raises :class:`~sdk.errors.ProducerFencedError`
    once another instance with the same transactional id has called
    ``init_transactions()`` (and on every call after that), and
    :class:`~sdk.errors.IllegalStateError` for calls that make no sense in the
    current state (``send`` outside a transaction, committing twice, ...).
    """

    def __init__(
        self,
        url: str,
        transactional_id: str,
        *,
        transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(url, **connection)
        self._take_transactional_id(transactional_id, transaction_timeout_ms)
        self._lock = threading.RLock()

    def init_transactions(self) -> None:
        """Register the transactional id: new epoch, older instances fenced. Call once."""
        with self._lock:
            if self._manager.state is not TransactionState.UNINITIALIZED:
                self._manager.transition_to(TransactionState.READY)  # raises the explanatory error
            self._manager.initialized(self._transport.call(self._init_producer_call()))

    def begin_transaction(self) -> None:
        """Start a transaction (locally; the broker hears of it at the first write)."""
        with self._lock:
            self._manager.begin()

    def send(
        self,
        topic: str,
        value: Any,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        partition: int | None = None,
    ) -> tuple[int, int]:
        """Write one message into the open transaction; ``(partition, offset)``.

        The partition is chosen on the client exactly as the broker would choose it
        (murmur2 of the key; round-robin without one). Readers with
        ``read_committed`` see the message only once the transaction commits.
        """
        with self._lock:
            manager = self._manager
            manager.require_in_transaction("send")
            with manager.failures_recorded(), self._partition_counts.watching(topic):
                p = self._router.choose(topic, key, partition, self._partition_count(topic, partition))
                tp: TopicPartition = (topic, p)
                base = manager.base_sequence(tp)
                # The first write begins the broker's transaction (no request of its own).
                result = self._transport.call(
                    calls.produce_to_partition(
                        topic, p, [to_wire(value, key, headers)],
                        producer=manager.identity, base_sequence=base, txn_id=manager.txn_id, transactional=True,
                    )
                )
            manager.txn_id = manager.txn_id or result.txn_id
            manager.acknowledge(tp, base, 1)
            return p, result.offsets[0]

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int], group: str | GroupMetadata) -> None:
        """Commit the group's offsets ``{(topic, partition): next offset}`` with this transaction.

        The consume-transform-produce step: the input is marked consumed exactly
        when the output becomes visible. ``group`` is the consumer's
        :meth:`~sdk.Consumer.group_metadata` (Kafka's form), or the group's name: then
        offsets from :meth:`~sdk.Consumer.positions` still commit as the member that read
        them, and a plain mapping commits by group name, unchecked against the group's
        members (Kafka's pre-KIP-447 path: only this producer's epoch fences it; see
        docs/consumer-groups.md). Offsets that name a member are refused
        (``FencedMemberEpochError``) if that member no longer owns their partitions.
        """
        name, member = committing_member(offsets, group)
        with self._lock:
            self._manager.require_in_transaction("send_offsets_to_transaction")
            with self._manager.failures_recorded():
                txn_id = self._ensure_broker_transaction()
                try:
                    self._transport.call(calls.add_offsets_to_transaction(txn_id, name, offsets, member))
                except FencedMemberEpochError:
                    fresh = refreshed_member(offsets, member)  # a heartbeat moved the epoch on meanwhile
                    if fresh is None:
                        raise
                    self._transport.call(calls.add_offsets_to_transaction(txn_id, name, offsets, fresh))

    def send_acks_to_transaction(self, group: str, messages: Receipted | Iterable[Receipted]) -> list[AckResult]:
        """Acknowledge share-group messages (or receipts) of ``group`` in this transaction.

        The consume-transform-produce loop for queues: the messages stay locked while the
        transaction is open, are accepted if it commits and released (to be delivered
        again) if it aborts or times out. If a receipt no longer holds its lock, this
        raises :class:`~sdk.errors.ReceiptExpiredError` (or ``UnknownReceiptError``) and
        the transaction can only be aborted. Call the consumer's ``forget`` for them
        afterwards, so it stops renewing locks that are the transaction's now.
        """
        with self._lock:
            self._manager.require_in_transaction("send_acks_to_transaction")
            try:
                txn_id = self._ensure_broker_transaction()
                results = self._transport.call(calls.add_acks_to_transaction(txn_id, group, receipts_of(messages)))
                refused = failure(results)
                if refused is not None:
                    raise refused
            except Exception as exc:  # noqa: BLE001 - as every call in a transaction: abort-only, then raised
                raise self._manager.failed(exc)  # noqa: B904 - the error itself (or the fencing one), not a new one
            return results

    def commit_transaction(self) -> None:
        """Commit the open transaction. If it raises with an unknown outcome
        (:class:`~sdk.errors.BrokerUnavailableError`), call it again. If the broker refused
        the group offsets in it (:class:`~sdk.errors.FencedMemberEpochError`: the consumer
        lost those partitions meanwhile), the transaction is still open: abort it."""
        with self._lock:
            txn_id = self._manager.txn_id
            if self._manager.begin_commit() and txn_id is not None:
                with self._manager.failures_recorded():
                    self._transport.call(calls.end_transaction(txn_id, "commit"))
            self._manager.completed()

    def abort_transaction(self) -> None:
        """Abort the open (or failed) transaction; nothing it wrote becomes visible."""
        with self._lock:
            manager = self._manager
            txn_id = manager.txn_id
            needs_request = manager.begin_abort()
            with manager.failures_recorded():
                if manager.needs_epoch_bump:
                    # A write's fate is unknown, so its sequence number may be taken:
                    # a new epoch aborts the transaction broker-side *and* restarts
                    # the numbering, which plain abort could not do.
                    manager.initialized(self._transport.call(self._init_producer_call()))
                    return
                if needs_request and txn_id is not None:
                    self._transport.call(calls.end_transaction(txn_id, "abort"))
            manager.completed()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[TransactionalProducer]:
        """``with producer.transaction():`` begin; commit on success, abort on exception."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            self._abort_quietly()
            raise
        self.commit_transaction()

    def _abort_quietly(self) -> None:
        # The caller's exception is the interesting one; an abort failure (or a
        # fenced producer, which cannot abort) must not replace it.
        if self._manager.state in (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR):
            try:
                self.abort_transaction()
            except Exception:
                logger.warning("abort after a failed transaction block failed", exc_info=True)

    def _ensure_broker_transaction(self) -> str:
        manager = self._manager
        if manager.txn_id is None:
            try:
                info = self._transport.call(calls.begin_transaction(manager.identity, self.transaction_timeout_ms))
            except ConcurrentTransactionsError:
                # An earlier begin whose answer we lost is open on the broker; only
                # a new epoch can end it.
                manager.needs_epoch_bump = True
                raise
            manager.txn_id = info.txn_id
        return manager.txn_id

    def close(self) -> None:
        """Abort an open transaction (best effort) and release connections."""
        with self._lock:
            self._abort_quietly()
            if self._manager.state is not TransactionState.CLOSED:
                self._manager.close()
            super().close()
