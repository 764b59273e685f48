"""Asyncio twin of :class:`sdk.Consumer`: same membership, delivery guarantees and bookkeeping,
with the heartbeat as a task and concurrent long-polls."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Unpack

from sdk import calls
from sdk._connection import ConnectionOptions
from sdk._consumer_core import MAX_BROKER_WAIT_MS, ConsumerCore
from sdk._membership import Membership, exactly_once_committer
from sdk._txn_state import TransactionState
from sdk.aio._base import AsyncBase
from sdk.calls import TopicPartition
from sdk.consumer import COMMIT_ATTEMPTS, DEFAULT_LONG_POLL_SLICE, Outputs, batch_start, outputs_of
from sdk.errors import (
    BrokerUnavailableError,
    FencedMemberEpochError,
    HalfmqError,
    IllegalStateError,
    OffsetOutOfRangeError,
    UnknownMemberError,
)
from sdk.message import Message
from sdk.models import ConsumerPositions, FetchResult, GroupMetadata, TopicMetadata

if TYPE_CHECKING:
    from sdk.aio.transactional import AsyncTransactionalProducer

logger = logging.getLogger("halfmq.sdk")

_MAX_PARKED = 8  # concurrent long-polls per AsyncConsumer, well under the pool size

AsyncPartitionsCallback = Callable[[list[TopicPartition]], object | Awaitable[object]]


class AsyncConsumer(AsyncBase):
    """Asyncio twin of :class:`sdk.Consumer`: ``await poll()``, ``async for``, ``await commit()``,
    ``await process_exactly_once(producer, handler)``; callbacks may be plain functions or coroutines.

    With several partitions and nothing to read it long-polls up to eight of them
    at once (``long_poll_slice`` seconds per round) and returns as soon as one has
    data.
    """

    def __init__(
        self, url: str, group: str, topics: str | Iterable[str], isolation_level: str = "read_committed", *,
        delivery: str = "at_least_once", auto_commit: bool = True,
        on_assigned: AsyncPartitionsCallback | None = None, on_revoked: AsyncPartitionsCallback | None = None,
        session_timeout_ms: int | None = None,
        partitions: Iterable[TopicPartition] | None = None, auto_offset_reset: str = "earliest",
        tag: str | None = None, max_poll_messages: int = 500, long_poll_slice: float = DEFAULT_LONG_POLL_SLICE,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(url, **connection)
        self._core = ConsumerCore(
            group, topics, partitions=partitions, isolation_level=isolation_level, auto_offset_reset=auto_offset_reset,
            delivery=delivery, auto_commit=auto_commit, tag=tag,
        )
        self._membership = None if partitions is not None else Membership(group, self._core.topics, session_timeout_ms)
        self.on_assigned = on_assigned
        self.on_revoked = on_revoked
        self.max_poll_messages = max_poll_messages
        self.long_poll_slice = long_poll_slice
        self._lock = asyncio.Lock()  # membership requests and commits, as in the blocking twin
        self._assignment_changed = asyncio.Event()
        self._wake_heartbeat = asyncio.Event()
        self._heartbeats: asyncio.Task[None] | None = None

    @property
    def group(self) -> str:
        """The consumer group."""
        return self._core.group

    @property
    def delivery(self) -> str:
        """``at_most_once``, ``at_least_once`` or ``exactly_once``."""
        return self._core.delivery

    def group_metadata(self) -> GroupMetadata | None:
        """This member's id and current epoch (``None`` without a membership)."""
        return self._membership.metadata() if self._membership is not None else None

    async def assignment(self) -> list[TopicPartition]:
        """The partitions this consumer reads now (joining the group on first use)."""
        await self._ensure_ready()
        await self._reconcile()
        return sorted(self._core.positions)

    async def positions(self) -> ConsumerPositions:
        """Next offset to read per partition (what ``commit()`` would commit), with who read them."""
        await self._ensure_ready()
        return ConsumerPositions(self._core.positions, self.group_metadata(), self.group_metadata)

    async def seek(self, topic: str, partition: int, offset: int) -> None:
        """Read ``(topic, partition)`` from ``offset`` next."""
        await self._ensure_ready()
        self._core.seek((topic, partition), offset)

    def committed(self) -> dict[TopicPartition, int]:
        """The group's committed offsets as last committed or read by this consumer."""
        return dict(self._core.committed)

    # -- reading -----------------------------------------------------------------------------

    async def poll(self, timeout: float = 1.0, max_messages: int | None = None) -> list[Message]:
        """The next messages of any assigned partition, waiting up to ``timeout`` seconds.

        When several parked partitions wake at once, all their messages are
        returned, which can exceed ``max_messages`` (never dropped, never repeated).
        """
        await self._ensure_ready()
        budget = max_messages or self.max_poll_messages
        deadline = time.monotonic() + max(0.0, timeout)
        if self._core.commits_at_poll:
            await self._commit_quietly(self._core.uncommitted())
        await self._reconcile()
        while True:
            before = dict(self._core.positions)
            batch: list[Message] = []
            rotation = self._core.rotation()
            for tp in rotation:
                if len(batch) >= budget:
                    break
                batch += await self._fetch(tp, budget - len(batch), 0)
            remaining = deadline - time.monotonic()
            if batch:
                return await self._hand_out(batch, before)
            if remaining <= 0:
                return []
            if not rotation:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._assignment_changed.wait(), min(remaining, self.long_poll_slice))
                self._assignment_changed.clear()
                await self._reconcile()
                continue
            batch = await self._park(rotation, budget, remaining)
            if batch:
                return await self._hand_out(batch, before)
            await self._reconcile()

    async def _hand_out(self, batch: list[Message], before: Mapping[TopicPartition, int]) -> list[Message]:
        if not self._core.commits_before_handing_out:
            return batch
        try:
            await self._commit(self._core.uncommitted())
        except HalfmqError as error:
            logger.warning("at-most-once commit failed (%s); the batch is not handed out", error)
            self._core.restore(before)
            return []
        return batch

    async def _park(self, rotation: list[TopicPartition], budget: int, remaining: float) -> list[Message]:
        # Long-poll a bounded number of partitions concurrently (the pool is small
        # on purpose) and return once one has data. Positions advance only for
        # fetches that finished, so a cancelled long-poll loses nothing. The broker
        # keeps a cancelled long-poll waiting until its max_wait, so with several
        # partitions each wait is capped at long_poll_slice to bound that waste.
        parked = rotation[:_MAX_PARKED]
        if len(rotation) > 1:
            remaining = min(remaining, self.long_poll_slice)
        wait_ms = int(remaining * 1000)
        tasks = {asyncio.ensure_future(self._fetch_raw(tp, budget, wait_ms)): tp for tp in parked}
        pending = set(tasks)
        messages: list[Message] = []
        try:
            while pending and not messages:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    result = task.result()
                    if result is not None:
                        messages += self._core.record(tasks[task], result)
            return messages
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _fetch(self, tp: TopicPartition, max_messages: int, wait_ms: int) -> list[Message]:
        result = await self._fetch_raw(tp, max_messages, wait_ms)
        return self._core.record(tp, result) if result is not None else []

    async def _fetch_raw(self, tp: TopicPartition, max_messages: int, wait_ms: int) -> FetchResult | None:
        call = calls.fetch(
            tp[0], tp[1], self._core.positions[tp], max_messages=max_messages,
            max_wait_ms=min(wait_ms, MAX_BROKER_WAIT_MS), isolation=self._core.isolation_level,
            tag=self._core.tag,
        )
        try:
            return await self._transport.call(call)
        except OffsetOutOfRangeError:
            metadata = await self._transport.call(calls.get_topic(tp[0]))
            self._core.seek(tp, self._core.reset_offset(tp, metadata))
            return None

    # -- committing --------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit everything returned by ``poll`` so far (or ``offsets``); raises
        :class:`~sdk.FencedMemberEpochError` if the broker refused it."""
        await self._ensure_ready()
        if self._core.delivery == "exactly_once":
            raise IllegalStateError(
                "an exactly_once consumer commits with its transactions: use process_exactly_once()"
            )
        await self._commit(dict(offsets) if offsets is not None else self._core.uncommitted())

    async def _commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if not offsets:
            return
        async with self._lock:
            try:
                await self._transport.call(calls.commit_group_offsets(self._core.group, offsets, self.group_metadata()))
            except FencedMemberEpochError:
                self._wake_heartbeat.set()
                raise
        self._core.mark_committed(offsets)

    async def _commit_quietly(self, offsets: Mapping[TopicPartition, int]) -> None:
        try:
            await self._commit(offsets)
        except HalfmqError as error:
            logger.warning("auto-commit of %s failed: %s", sorted(offsets), error)

    # -- exactly once ------------------------------------------------------------------------

    async def process_exactly_once(
        self,
        producer: AsyncTransactionalProducer,
        handler: Callable[[Message], Outputs | Awaitable[Outputs]],
        *,
        timeout: float = 1.0,
        max_messages: int | None = None,
    ) -> int:
        """Asyncio twin of :meth:`sdk.Consumer.process_exactly_once` (``handler`` may be a coroutine function)."""
        if self._core.delivery != "exactly_once":
            raise IllegalStateError('process_exactly_once() needs a consumer made with delivery="exactly_once"')
        await self._ensure_ready()
        await self._settle_previous_transaction(producer)
        batch = await self.poll(timeout, max_messages)
        if not batch:
            return 0
        offsets = self._core.uncommitted()
        before = batch_start(batch)
        producer.begin_transaction()
        try:
            for message in batch:
                produced = handler(message)
                if inspect.isawaitable(produced):
                    produced = await produced
                for output in outputs_of(produced):
                    await producer.send(output.topic, output.value, key=output.key, headers=dict(output.headers),
                                        partition=output.partition)
            async with self._lock:
                await producer.send_offsets_to_transaction(offsets, exactly_once_committer(self.group, self._membership))
            await self._commit_transaction(producer)
        except FencedMemberEpochError as error:
            await self._abandon(producer, before)
            logger.warning("exactly-once batch fenced (%s): it will be read again by the partitions' owner", error)
            self._wake_heartbeat.set()
            return 0
        except BrokerUnavailableError:
            if producer.state is not TransactionState.COMMITTING:
                await self._abandon(producer, before)
            raise
        except BaseException:
            await self._abandon(producer, before)
            raise
        self._core.mark_committed(offsets)
        return len(batch)

    @staticmethod
    async def _commit_transaction(producer: AsyncTransactionalProducer) -> None:
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                await producer.commit_transaction()
                return
            except BrokerUnavailableError:
                if attempt == COMMIT_ATTEMPTS:
                    raise

    async def _abandon(self, producer: AsyncTransactionalProducer, before: Mapping[TopicPartition, int]) -> None:
        if producer.state in (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR):
            try:
                await producer.abort_transaction()
            except HalfmqError:
                logger.warning("abort of an exactly-once batch failed", exc_info=True)
        self._core.restore(before)

    async def _settle_previous_transaction(self, producer: AsyncTransactionalProducer) -> None:
        if producer.state is not TransactionState.COMMITTING:
            return
        try:
            await self._commit_transaction(producer)
        except FencedMemberEpochError:
            await self._abandon(producer, {})
        found = await self._transport.call(calls.group_offsets(self.group))
        committed = {(c.topic, c.partition): c.offset for c in found}
        for tp in list(self._core.positions):
            if tp in committed:
                self._core.positions[tp] = self._core.committed[tp] = committed[tp]

    # -- membership ------------------------------------------------------------------------------

    async def _ensure_ready(self) -> None:
        core = self._core
        core.check_open()
        if core.assigned:
            return
        if self._membership is None:
            topics = sorted(set(core.topics) | {t for t, _ in core.requested_partitions or []})
            metadata = {t: await self._topic(t) for t in topics}
            partitions = core.assignment_for(list(metadata.values()))
            committed = await self._transport.call(calls.group_offsets(core.group))
            core.assign(partitions, metadata, committed)
            return
        async with self._lock:
            self._membership.answered(await self._transport.call(self._membership.join_call()))
        core.assigned = True
        self._heartbeats = asyncio.create_task(self._heartbeat_loop(), name=f"halfmq-heartbeat-{core.group}")
        await self._reconcile()

    async def _reconcile(self) -> None:
        membership = self._membership
        if membership is None:
            return
        lost, revoked, assigned = membership.pending_changes()
        try:
            if lost:
                await self._give_up(lost, commit=False)
            if revoked:
                await self._give_up(revoked, commit=self._core.commits_before_giving_up)
        finally:
            if lost or revoked:
                self._wake_heartbeat.set()
        if assigned:
            committed = await self._transport.call(calls.group_offsets(self._core.group))
            metadata = {t: await self._topic(t) for t in sorted({t for t, _ in assigned})}
            self._core.assign(assigned, metadata, committed)
            membership.taken_up(assigned)
            await _call_back(self.on_assigned, assigned)

    async def _give_up(self, partitions: list[TopicPartition], *, commit: bool) -> None:
        assert self._membership is not None
        try:
            if commit:
                wanted = set(partitions)
                await self._commit_quietly({tp: o for tp, o in self._core.uncommitted().items() if tp in wanted})
            await _call_back(self.on_revoked, partitions)
        finally:
            self._core.drop(partitions)
            self._membership.dropped(partitions)

    async def _heartbeat_loop(self) -> None:
        membership = self._membership
        assert membership is not None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake_heartbeat.wait(), membership.heartbeat_interval)
            self._wake_heartbeat.clear()
            try:
                again = await self._heartbeat_once(membership)
            except Exception:  # the task must go on; a lapsed session is rejoined later
                logger.warning("heartbeat of group %r failed", membership.group, exc_info=True)
                continue
            if again:
                self._wake_heartbeat.set()

    async def _heartbeat_once(self, membership: Membership) -> bool:
        async with self._lock:
            before = membership.assignment
            try:
                if membership.joined:
                    again = membership.answered(await self._transport.call(membership.heartbeat_call()))
                else:
                    again = membership.answered(await self._transport.call(membership.join_call()))
            except (UnknownMemberError, FencedMemberEpochError) as error:
                logger.warning("consumer of group %r lost its membership (%s); joining again", membership.group, error)
                old = membership.lose_membership()
                self._assignment_changed.set()
                with contextlib.suppress(HalfmqError):
                    await self._transport.call(membership.leave_call(old))
                again = membership.answered(await self._transport.call(membership.join_call()))
        if membership.assignment != before:
            self._assignment_changed.set()
        return again

    async def _topic(self, topic: str) -> TopicMetadata:
        """Where ``topic``'s partitions start and end now (for where a partition taken up starts)."""
        return await self._transport.call(calls.get_topic(topic))

    # -- lifecycle ---------------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Message]:
        while not self._core.closed:
            for message in await self.poll(timeout=1.0):
                yield message

    async def close(self) -> None:
        """Leave the group (its partitions go to the others at once) and release connections (does not commit)."""
        if self._core.closed:
            return
        self._core.closed = True
        if self._heartbeats is not None:
            self._heartbeats.cancel()
            await asyncio.gather(self._heartbeats, return_exceptions=True)
        membership = self._membership
        try:
            if membership is not None and membership.joined:
                given_up = sorted(self._core.positions)
                try:
                    await self._transport.call(membership.leave_call())
                except HalfmqError as error:
                    logger.info("leaving group %r: %s", membership.group, error)
                if given_up:
                    await _call_back(self.on_revoked, given_up)
        finally:
            await super().close()


async def _call_back(callback: AsyncPartitionsCallback | None, partitions: list[TopicPartition]) -> None:
    if callback is None:
        return
    result = callback(list(partitions))
    if inspect.isawaitable(result):
        await result
