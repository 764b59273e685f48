"""The Kafka/Pulsar-mode transaction coordinator, writing through the same log.

Ending a transaction is two-phase, as in Kafka: the state moves to PREPARE_COMMIT
or PREPARE_ABORT (durably), then a control marker goes to every partition the
transaction wrote, staged group offsets are applied on commit, and the state
becomes final, in one database transaction. A crash between the phases leaves a
PREPARE_* row that :meth:`Coordinator.complete_prepared` finishes on start-up and
from the checker. Every state change is a compare-and-set on the row, so a
producer's commit racing the timeout job has exactly one winner.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlalchemy import Connection

from app.domain import AppendResult, OffsetCommit, ProducerIdentity, ProducerStamp, Record, now_ms
from app.errors import (
    AlreadyResolved,
    ConcurrentTransactions,
    InvalidRequest,
    InvalidTransactionState,
    InvalidTransactionTimeout,
    ProducerFenced,
    TransactionNotFound,
)
from app.log_service import LogService, append_stamped, check_offset_committable, check_partition
from app.metrics import TRANSACTIONS
from app.notifier import PartitionKey
from app.settings import Settings
from app.storage import group_store, log_store, producer_store, txn_store
from app.storage.schema import CONTROL_ABORT, CONTROL_COMMIT
from app.storage.txn_store import TransactionRow
from app.txn_state import TxnState, answers_end_request, final_state, prepare_state

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TransactionView:
    row: TransactionRow
    partitions: list[tuple[str, int]]


class Coordinator:
    def __init__(self, log: LogService, settings: Settings) -> None:
        self.log = log
        self.store = log.store
        self.notifier = log.notifier
        self.settings = settings

    # -- producers -------------------------------------------------------------------------

    async def init_producer(self, transactional_id: str | None, timeout_ms: int | None) -> ProducerIdentity:
        """InitProducerId: a new id, or for a known transactional id the next epoch.

        The previous epoch's unfinished transaction is aborted, or completed if it
        had already reached PREPARE_COMMIT, in the same database transaction as the bump.
        """
        if transactional_id is None:
            producer_id, epoch = await self.store.write(lambda conn: producer_store.new_producer(conn, timeout_ms))
            return ProducerIdentity(producer_id, epoch)
        timeout = self.checked_timeout(timeout_ms)

        def unit(conn: Connection) -> tuple[ProducerIdentity, set[PartitionKey]]:
            producer_id, epoch, known = producer_store.bump_transactional_producer(conn, transactional_id, timeout)
            touched: set[PartitionKey] = set()
            if known:
                for txn in txn_store.unfinished_of_producer(conn, producer_id):
                    commit = txn.state is TxnState.PREPARE_COMMIT
                    if txn.state is TxnState.OPEN:
                        txn_store.transition(conn, txn.txn_id, TxnState.OPEN, TxnState.PREPARE_ABORT)
                    touched |= self._complete(conn, txn.txn_id, prepare_state(commit), timed_out=False)
            return ProducerIdentity(producer_id, epoch, transactional_id), touched

        identity, touched = await self.store.write(unit)
        self.notifier.notify(touched)
        return identity

    def checked_timeout(self, timeout_ms: int | None) -> int:
        timeout = timeout_ms or self.settings.default_transaction_timeout_ms
        if not 0 < timeout <= self.settings.max_transaction_timeout_ms:
            raise InvalidTransactionTimeout(
                f"transaction timeout {timeout} ms is outside 1..{self.settings.max_transaction_timeout_ms} ms"
            )
        return timeout

    # -- transactions -----------------------------------------------------------------------------

    async def begin(self, producer_id: int | None, producer_epoch: int | None, timeout_ms: int | None) -> TransactionRow:
        if (producer_id is None) != (producer_epoch is None):
            raise InvalidRequest("give producer_id and producer_epoch together, or neither")
        txn_id = "txn-" + secrets.token_hex(12)

        def unit(conn: Connection) -> TransactionRow:
            timeout = timeout_ms
            if producer_id is not None and producer_epoch is not None:
                # Lock the producer row first: a concurrent InitProducerId (epoch bump) or begin
                # then waits for this one, so the checks below see a settled epoch.
                producer_timeout = producer_store.touch(conn, producer_id)
                producer_store.check_epoch(conn, producer_id, producer_epoch)
                open_txns = txn_store.unfinished_of_producer(conn, producer_id)
                if open_txns:
                    raise ConcurrentTransactions(
                        f"producer {producer_id} already has transaction {open_txns[0].txn_id} in progress"
                    )
                timeout = timeout or producer_timeout
            return txn_store.insert_transaction(conn, txn_id, producer_id, producer_epoch, self.checked_timeout(timeout))

        return await self.store.write(unit)

    async def produce(self, topic_name: str, partition: int, records: Sequence[Record], stamp: ProducerStamp) -> AppendResult:
        """Append a batch inside a transaction; the partition joins the transaction."""
        topic = await self.log.writable_topic(topic_name)
        check_partition(topic, partition)
        txn_id = stamp.txn_id
        assert txn_id is not None

        def unit(conn: Connection) -> AppendResult:
            txn = self._lock_open(conn, txn_id)
            if stamp.producer_id is not None and stamp.producer_id != txn.producer_id:
                raise InvalidRequest(f"transaction {txn_id} does not belong to producer {stamp.producer_id}")
            result = append_stamped(conn, topic, partition, records, stamp)
            if not result.duplicate:
                txn_store.add_partition(conn, txn_id, topic.topic_id, partition, result.base_offset)
            return result

        result = await self.store.write(unit, locks=[(topic.topic_id, partition)])
        if not result.duplicate:
            self.notifier.notify([(topic.topic_id, partition)])  # read_uncommitted readers
        return result

    async def add_offsets(self, txn_id: str, group: str, commits: Sequence[OffsetCommit]) -> None:
        resolved = [(await self.store.topic(c.topic), c) for c in commits]
        for topic, commit in resolved:
            check_partition(topic, commit.partition)

        def unit(conn: Connection) -> None:
            self._lock_open(conn, txn_id)
            for topic, commit in resolved:
                check_offset_committable(conn, topic, commit)
            txn_store.put_offsets(
                conn, txn_id, group, [(t.topic_id, c.partition, c.offset, c.metadata) for t, c in resolved]
            )

        await self.store.write(unit)

    async def end(self, txn_id: str, commit: bool) -> TxnState:
        """Commit or abort; repeating the same request answers the same, the other one is 409."""
        target = prepare_state(commit)

        def prepare(conn: Connection) -> tuple[TransactionRow, TxnState]:
            txn = self._get(conn, txn_id)
            if answers_end_request(txn.state, commit):
                return txn, txn.state
            if txn.state is TxnState.OPEN and txn.expires_at <= now_ms() and self._start_timeout_abort(conn, txn):
                # Too late: the timeout wins, whether its job got here first or this request did.
                return replace(txn, timed_out=True), TxnState.PREPARE_ABORT
            self._refuse_fenced(conn, txn)
            if txn.state is not TxnState.OPEN:
                raise AlreadyResolved(f"transaction {txn_id} is {txn.state.value}")
            if not txn_store.transition(conn, txn_id, TxnState.OPEN, target):
                raise AlreadyResolved(f"transaction {txn_id} was ended concurrently")
            return txn, target

        def unit(conn: Connection) -> tuple[TransactionRow, TxnState, set[PartitionKey]]:
            txn, state = prepare(conn)
            if not state.is_preparing:
                return txn, state, set()
            return (txn, *self._complete_now(conn, txn_id, state, timed_out=txn.timed_out))

        txn, state, touched = await self.store.write(unit, locks=await self._locks_of(txn_id))
        self.notifier.notify(touched)  # read_committed readers held at the LSO may go on
        if commit and state is TxnState.TIMED_OUT:
            if txn.producer_id is not None:
                raise ProducerFenced(f"transaction {txn_id} passed its timeout; its producer epoch is fenced")
            raise AlreadyResolved(f"transaction {txn_id} passed its timeout and was aborted")
        return state

    async def describe(self, txn_id: str) -> TransactionView:
        def query(conn: Connection) -> TransactionView:
            txn = self._get(conn, txn_id)
            parts = [
                (self.store.topic_by_id_sync(conn, p.topic_id).name, p.partition)
                for p in txn_store.partitions_of(conn, txn_id)
            ]
            return TransactionView(txn, parts)

        return await self.store.read(query)

    # -- background work (the checker calls these) ------------------------------------------------

    async def abort_expired(self, limit: int = 100) -> int:
        """Abort transactions past their timeout (TIMED_OUT) and fence their producers."""
        expired = await self.store.read(lambda conn: txn_store.expired_open(conn, now_ms(), limit))
        for txn in expired:

            def unit(conn: Connection, txn: TransactionRow = txn) -> tuple[TxnState, set[PartitionKey]]:
                if not self._start_timeout_abort(conn, txn):
                    return txn.state, set()
                return self._complete_now(conn, txn.txn_id, TxnState.PREPARE_ABORT, timed_out=True)

            _, touched = await self.store.write(unit, locks=await self._locks_of(txn.txn_id))
            self.notifier.notify(touched)
        return len(expired)

    async def complete_prepared(self, limit: int = 100) -> int:
        """Finish transactions a crash left in PREPARE_COMMIT / PREPARE_ABORT."""
        pending = await self.store.read(lambda conn: txn_store.preparing(conn, limit))
        for txn in pending:

            def unit(conn: Connection, txn: TransactionRow = txn) -> tuple[TxnState, set[PartitionKey]]:
                return self._complete_now(conn, txn.txn_id, txn.state, timed_out=txn.timed_out)

            _, touched = await self.store.write(unit, locks=await self._locks_of(txn.txn_id))
            self.notifier.notify(touched)
        return len(pending)

    # -- internals ------------------------------------------------------------------------------------

    def _complete_now(
        self, conn: Connection, txn_id: str, prepared: TxnState, *, timed_out: bool
    ) -> tuple[TxnState, set[PartitionKey]]:
        """Phase two in the same database transaction as phase one, when it can be done at once.

        Phase two runs in a savepoint: if it fails, phase one (the PREPARE_* state) is
        still committed, and recovery completes the transaction later.
        """
        try:
            with conn.begin_nested():
                touched = self._complete(conn, txn_id, prepared, timed_out=timed_out)
        except Exception:  # noqa: BLE001 - left prepared on purpose; complete_prepared retries it
            log.exception("could not complete transaction %s now; it stays %s", txn_id, prepared.value)
            return prepared, set()
        return self._get(conn, txn_id).state, touched

    async def _locks_of(self, txn_id: str) -> list[PartitionKey]:
        """The partitions a transaction wrote to: the rows its end will lock."""
        parts = await self.store.read(lambda conn: txn_store.partitions_of(conn, txn_id))
        return [(p.topic_id, p.partition) for p in parts]

    def _complete(self, conn: Connection, txn_id: str, prepared: TxnState, *, timed_out: bool) -> set[PartitionKey]:
        """Phase two: markers on every partition, offsets on commit, final state. Idempotent."""
        final = final_state(prepared, timed_out=timed_out)
        if not txn_store.transition(conn, txn_id, prepared, final):
            return set()  # someone else completed it
        TRANSACTIONS.labels(final.value).inc()
        commit = prepared is TxnState.PREPARE_COMMIT
        txn = self._get(conn, txn_id)
        touched: set[PartitionKey] = set()
        for part in txn_store.partitions_of(conn, txn_id):
            if part.marker_offset is not None:
                continue
            topic = self.store.topic_by_id_sync(conn, part.topic_id)
            marker = Record(None, b"null", 0, None, now_ms())
            stamp = ProducerStamp(
                txn.producer_id, txn.producer_epoch, None, txn_id, CONTROL_COMMIT if commit else CONTROL_ABORT
            )
            offset = log_store.append(conn, topic, part.partition, [marker], stamp)
            txn_store.mark_partition_ended(conn, txn_id, part.topic_id, part.partition, offset, aborted=not commit)
            touched.add((part.topic_id, part.partition))
        staged = txn_store.take_offsets(conn, txn_id)
        if commit:
            for group, offsets in staged.items():
                group_store.commit_offsets(conn, group, offsets)
        return touched

    @staticmethod
    def _start_timeout_abort(conn: Connection, txn: TransactionRow) -> bool:
        """OPEN → PREPARE_ABORT for the timeout, fencing a bound producer; False if the state moved already."""
        moved = txn_store.transition(conn, txn.txn_id, TxnState.OPEN, TxnState.PREPARE_ABORT, timed_out=True)
        if moved and txn.producer_id is not None and txn.producer_epoch is not None:
            producer_store.fence(conn, txn.producer_id, txn.producer_epoch)
        return moved

    def _get(self, conn: Connection, txn_id: str) -> TransactionRow:
        txn = txn_store.get(conn, txn_id)
        if txn is None:
            raise TransactionNotFound(f"transaction {txn_id!r} does not exist")
        return txn

    def _lock_open(self, conn: Connection, txn_id: str) -> TransactionRow:
        locked = txn_store.lock_open(conn, txn_id)
        if locked is not None:
            return locked
        txn = self._get(conn, txn_id)
        self._refuse_fenced(conn, txn)
        if txn.state is TxnState.OPEN:
            raise InvalidTransactionState(f"transaction {txn_id} has passed its timeout and is being aborted")
        raise InvalidTransactionState(f"transaction {txn_id} is {txn.state.value}, not OPEN")

    @staticmethod
    def _refuse_fenced(conn: Connection, txn: TransactionRow) -> None:
        if txn.producer_id is None or txn.producer_epoch is None:
            return
        current = producer_store.current_epoch(conn, txn.producer_id)
        if current is not None and current > txn.producer_epoch:
            raise ProducerFenced(
                f"transaction {txn.txn_id} belongs to producer epoch {txn.producer_epoch}, fenced by epoch {current}"
            )
