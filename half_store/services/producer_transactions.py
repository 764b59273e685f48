"""A producer's current transaction, named by (producer id, epoch) as Kafka names it.

Kafka's transactional APIs (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn)
name no transaction: the producer has at most one, begun implicitly by its first use.
This service finds or begins it (KIP-890 style, as a transactional produce already does,
see :mod:`half_store.services.stamped_append`) and calls the :class:`Coordinator` with
its id, so a Kafka transaction is exactly a mode-2 transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from half_store.domain.errors import ConcurrentTransactions, ProducerFenced, ValidationFailed
from half_store.domain.group_records import MemberRef
from half_store.domain.records import OffsetCommit, ProducerIdentity, now_ms
from half_store.domain.txn_state import TxnState
from half_store.services.coordinator import Coordinator
from half_store.services.stamped_append import new_transaction
from half_store.services.transaction_lookups import lock_producers
from half_store.storage import producer_store, txn_store


class ProducerTransactions:
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self.store = coordinator.store

    async def join(self, producer_id: int, producer_epoch: int, principal: str | None = None) -> str:
        """The producer's open transaction, begun now if it has none (AddPartitionsToTxn, AddOffsetsToTxn).

        The producer id must be ``principal``'s (see :mod:`half_store.services.producer_owners`).
        """
        await self.coordinator.log.producer_owners.check(producer_id, principal)
        default_timeout = self.coordinator.settings.default_transaction_timeout_ms

        def unit(conn: Connection) -> str:
            timeouts, unfinished = lock_producers(conn, [(producer_id, producer_epoch)])
            current = unfinished.get(producer_id)
            if current:
                txn = current[0]
                if txn.state is not TxnState.OPEN:
                    raise ConcurrentTransactions(f"transaction {txn.txn_id} of producer {producer_id} is still ending; retry")
                if txn.producer_epoch is not None and txn.producer_epoch < producer_epoch:
                    raise ValidationFailed(f"transaction {txn.txn_id} belongs to an older epoch of producer {producer_id}")
                if txn.expires_at <= now_ms():
                    raise ProducerFenced(f"transaction {txn.txn_id} passed its timeout; producer {producer_id} is fenced")
                return txn.txn_id
            timeout = timeouts.get(producer_id) or default_timeout
            begun = new_transaction(producer_id, producer_epoch, self.coordinator.checked_timeout(timeout))
            txn_store.insert_transactions(conn, [begun])
            return begun.txn_id

        return await self.store.write(unit)

    async def add_offsets(
        self,
        producer_id: int,
        producer_epoch: int,
        group: str,
        commits: Sequence[OffsetCommit],
        member: MemberRef | None = None,
        principal: str | None = None,
    ) -> None:
        """TxnOffsetCommit: stage the group's offsets in the producer's transaction."""
        txn_id = await self.join(producer_id, producer_epoch, principal)
        await self.coordinator.add_offsets(txn_id, group, commits, member)

    async def end(
        self, producer_id: int, producer_epoch: int, commit: bool, principal: str | None = None
    ) -> TxnState | None:
        """EndTxn: commit or abort the producer's transaction; None when it had none open (nothing to end)."""
        txn_id = await self._current(producer_id, producer_epoch, principal)
        if txn_id is None:
            return None
        return await self.coordinator.end(txn_id, commit)

    async def end_bumping_epoch(
        self, producer_id: int, producer_epoch: int, commit: bool, principal: str | None = None
    ) -> ProducerIdentity:
        """EndTxn in transaction protocol v2 (KIP-890): end the producer's transaction (if it has one) and move
        the producer to its next epoch in the same database transaction; its identity from now on.

        A request of the old epoch arriving late (a produce retried after the end) is then
        refused as fenced instead of beginning, or joining, the next transaction.
        """
        txn_id = await self._current(producer_id, producer_epoch, principal)
        if txn_id is not None:
            identity = await self.coordinator.end_bumping_epoch(txn_id, commit)
        else:
            identity = await self.store.write(lambda conn: producer_store.bump_after_end(conn, producer_id, producer_epoch))
        if identity.producer_id != producer_id:  # its epochs ran out: the transactional id has a new producer id
            self.coordinator.log.producer_owners.obtained(identity.producer_id, principal)
        return identity

    async def _current(self, producer_id: int, producer_epoch: int, principal: str | None) -> str | None:
        """The producer's unfinished transaction, after checking the id is ``principal``'s and the epoch current."""
        await self.coordinator.log.producer_owners.check(producer_id, principal)

        def find(conn: Connection) -> str | None:
            producer_store.check_epochs(conn, [(producer_id, producer_epoch)])
            current = txn_store.unfinished_of_producer(conn, producer_id)
            return current[0].txn_id if current else None

        return await self.store.read(find)
