"""Asyncio twin of :class:`sdk.TransactionalProducer` (same state machine, same lazy begin)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Unpack

from sdk import calls
from sdk._connection import ConnectionOptions
from sdk._membership import committing_member, refreshed_member
from sdk._share_core import Receipted, failure, receipts_of
from sdk._transactional_parts import DEFAULT_TRANSACTION_TIMEOUT_MS, TransactionalParts
from sdk._txn_state import TransactionState
from sdk.aio._base import AsyncBase
from sdk.calls import TopicPartition
from sdk.errors import ConcurrentTransactionsError, FencedMemberEpochError
from sdk.message import to_wire
from sdk.models import AckResult, GroupMetadata

logger = logging.getLogger("halfmq.sdk")


class AsyncTransactionalProducer(TransactionalParts, AsyncBase):
    """Asyncio twin of :class:`sdk.TransactionalProducer`; ``async with producer.transaction():``."""

    def __init__(
        self, url: str, transactional_id: str, *, transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(url, **connection)
        self._take_transactional_id(transactional_id, transaction_timeout_ms)
        self._lock = asyncio.Lock()

    async def init_transactions(self) -> None:
        """Register the transactional id: new epoch, older instances fenced. Call once."""
        async with self._lock:
            if self._manager.state is not TransactionState.UNINITIALIZED:
                self._manager.transition_to(TransactionState.READY)
            await self._init_producer()

    async def _init_producer(self) -> None:
        self._manager.initialized(await self._transport.call(self._init_producer_call()))

    def begin_transaction(self) -> None:
        """Start a transaction (local; the broker hears of it at the first write)."""
        self._manager.begin()

    async def send(
        self, topic: str, value: Any, key: str | None = None, headers: dict[str, str] | None = None,
        partition: int | None = None,
    ) -> tuple[int, int]:
        """Write one message into the open transaction; ``(partition, offset)``."""
        async with self._lock:
            manager = self._manager
            manager.require_in_transaction("send")
            with manager.failures_recorded(), self._partition_counts.watching(topic):
                p = self._router.choose(topic, key, partition, await self._partition_count(topic, partition))
                tp = (topic, p)
                base = manager.base_sequence(tp)
                # The first write begins the broker's transaction (no request of its own).
                result = await self._transport.call(
                    calls.produce_to_partition(
                        topic, p, [to_wire(value, key, headers)], producer=manager.identity, base_sequence=base,
                        txn_id=manager.txn_id, transactional=True,
                    )
                )
            manager.txn_id = manager.txn_id or result.txn_id
            manager.acknowledge(tp, base, 1)
            return p, result.offsets[0]

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group: str | GroupMetadata
    ) -> None:
        """Commit the group's offsets with this transaction (see the blocking twin for ``group``)."""
        name, member = committing_member(offsets, group)
        async with self._lock:
            self._manager.require_in_transaction("send_offsets_to_transaction")
            with self._manager.failures_recorded():
                txn_id = await self._ensure_broker_transaction()
                try:
                    await self._transport.call(calls.add_offsets_to_transaction(txn_id, name, offsets, member))
                except FencedMemberEpochError:
                    fresh = refreshed_member(offsets, member)  # a heartbeat moved the epoch on meanwhile
                    if fresh is None:
                        raise
                    await self._transport.call(calls.add_offsets_to_transaction(txn_id, name, offsets, fresh))

    async def send_acks_to_transaction(
        self, group: str, messages: Receipted | Iterable[Receipted]
    ) -> list[AckResult]:
        """Acknowledge share-group messages in this transaction (see the blocking twin)."""
        async with self._lock:
            self._manager.require_in_transaction("send_acks_to_transaction")
            try:
                txn_id = await self._ensure_broker_transaction()
                call = calls.add_acks_to_transaction(txn_id, group, receipts_of(messages))
                results = await self._transport.call(call)
                refused = failure(results)
                if refused is not None:
                    raise refused
            except Exception as exc:  # noqa: BLE001 - as every call in a transaction: abort-only, then raised
                raise self._manager.failed(exc)  # noqa: B904 - the error itself (or the fencing one), not a new one
            return results

    async def commit_transaction(self) -> None:
        """Commit; call again if it raised with an unknown outcome."""
        async with self._lock:
            txn_id = self._manager.txn_id
            if self._manager.begin_commit() and txn_id is not None:
                with self._manager.failures_recorded():
                    await self._transport.call(calls.end_transaction(txn_id, "commit"))
            self._manager.completed()

    async def abort_transaction(self) -> None:
        """Abort the open (or failed) transaction."""
        async with self._lock:
            manager = self._manager
            txn_id = manager.txn_id
            needs_request = manager.begin_abort()
            with manager.failures_recorded():
                if manager.needs_epoch_bump:  # see TransactionalProducer.abort_transaction
                    await self._init_producer()
                    return
                if needs_request and txn_id is not None:
                    await self._transport.call(calls.end_transaction(txn_id, "abort"))
            manager.completed()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncTransactionalProducer]:
        """``async with producer.transaction():`` commit on success, abort on exception."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            await self._abort_quietly()
            raise
        await self.commit_transaction()

    async def _abort_quietly(self) -> None:
        if self._manager.state in (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR):
            try:
                await self.abort_transaction()
            except Exception:
                logger.warning("abort after a failed transaction block failed", exc_info=True)

    async def _ensure_broker_transaction(self) -> str:
        manager = self._manager
        if manager.txn_id is None:
            try:
                info = await self._transport.call(
                    calls.begin_transaction(manager.identity, self.transaction_timeout_ms)
                )
            except ConcurrentTransactionsError:
                manager.needs_epoch_bump = True
                raise
            manager.txn_id = info.txn_id
        return manager.txn_id

    async def close(self) -> None:
        """Abort an open transaction (best effort) and release connections."""
        await self._abort_quietly()
        if self._manager.state is not TransactionState.CLOSED:
            self._manager.close()
        await super().close()
