"""Asyncio twin of :class:`sdk.ShareConsumer` (same bookkeeping; an asyncio task renews the locks)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any

from sdk import _api
from sdk._api import ShareAck
from sdk._http import DEFAULT_MAX_CONNECTIONS, DEFAULT_TIMEOUT, AsyncTransport, RetryPolicy
from sdk._share_core import (
    DEFAULT_LOCK_MS,
    DEFAULT_MAX_EXTENSION,
    DEFAULT_MAX_MESSAGES,
    MAX_BROKER_WAIT_MS,
    HeldLocks,
    PendingAcks,
    Receipted,
    receipts_of,
    report,
)
from sdk.errors import IllegalStateError
from sdk.models import AckResult, ReceivedMessage, ShareGroupInfo

logger = logging.getLogger("halfmq.sdk")

Handler = Callable[[ReceivedMessage], Awaitable[Any] | Any]


class AsyncShareConsumer:
    """Asyncio twin of :class:`sdk.ShareConsumer`: ``await receive()``, ``async for``, ``await ack()``.

    The lock-renewing task starts with the first receive (it needs a running loop).
    """

    def __init__(
        self,
        url: str,
        group: str,
        topic: str,
        *,
        max_messages: int = DEFAULT_MAX_MESSAGES,
        lock_ms: int = DEFAULT_LOCK_MS,
        ordered: bool = False,
        auto_extend: bool = True,
        max_extension: float | None = DEFAULT_MAX_EXTENSION,
        on_acknowledged: Callable[[list[AckResult]], None] = report,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self.url = url.rstrip("/")
        self.group = group
        self.topic = topic
        self.max_messages = max_messages
        self.lock_ms = lock_ms
        self.ordered = ordered
        self.auto_extend = auto_extend
        self.held = HeldLocks(lock_ms, max_extension)
        self.pending = PendingAcks()
        self.on_acknowledged = on_acknowledged
        self._transport = AsyncTransport(
            self.url, timeout=timeout, retry=retry, max_connections=max_connections, token=token
        )
        self._keeper: asyncio.Task[None] | None = None
        self._closed = False

    async def receive(self, max_messages: int | None = None, timeout: float = 1.0) -> list[ReceivedMessage]:
        """Up to ``max_messages`` messages, each locked for this consumer; waits up to ``timeout`` seconds."""
        self._check_open()
        if self.auto_extend and self._keeper is None:
            self._keeper = asyncio.create_task(self._keep_locks())
        wait_ms = min(int(max(0.0, timeout) * 1000), MAX_BROKER_WAIT_MS)
        acks = self.pending.take()
        call = _api.share_receive(
            self.group, self.topic, max_messages=max_messages or self.max_messages, lock_ms=self.lock_ms,
            max_wait_ms=wait_ms, ordered=self.ordered, acks=acks,
        )
        asked_at = time.monotonic()
        try:
            messages, results = await self._transport.call(call)
        except BaseException:
            self.pending.restore(acks)
            raise
        self.held.forget(receipt for receipt, _, _ in acks)
        self.held.hold(messages, asked_at)
        if results:
            self.on_acknowledged(results)
        return messages

    def __aiter__(self) -> AsyncIterator[ReceivedMessage]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ReceivedMessage]:
        while not self._closed:
            for message in await self.receive(timeout=1.0):
                yield message

    async def process(self, handler: Handler, *, max_messages: int | None = None, timeout: float = 1.0) -> int:
        """Receive one batch and run ``handler`` (a function or a coroutine function) on each message.

        As :meth:`sdk.ShareConsumer.process`: accepted when it returns, released when it
        raises, deferred to the next receive. Returns how many messages were received.
        """
        messages = await self.receive(max_messages, timeout)
        outcomes: list[ShareAck] = []
        for message in messages:
            try:
                done = handler(message)
                if inspect.isawaitable(done):
                    await done
            except Exception:
                logger.exception("share-group handler failed on %s/%s@%s; releasing it",
                                 message.topic, message.partition, message.offset)
                outcome = "RELEASE"
            else:
                outcome = "ACCEPT"
            if self.held.holds(message.receipt) and message.receipt not in self.pending:
                outcomes.append((message.receipt, outcome, None))
        self.pending.add(outcomes)
        return len(messages)

    async def ack(self, messages: Receipted | Iterable[Receipted]) -> list[AckResult]:
        """ACCEPT: done, never delivered to the group again."""
        return await self._acknowledge([(r, "ACCEPT", None) for r in receipts_of(messages)])

    async def release(self, messages: Receipted | Iterable[Receipted], delay_ms: int = 0) -> list[AckResult]:
        """RELEASE: deliverable again (after ``delay_ms``)."""
        return await self._acknowledge([(r, "RELEASE", delay_ms) for r in receipts_of(messages)])

    async def reject(self, messages: Receipted | Iterable[Receipted]) -> list[AckResult]:
        """REJECT: straight to ``DLQ.{group}``."""
        return await self._acknowledge([(r, "REJECT", None) for r in receipts_of(messages)])

    def acknowledge(self, messages: Receipted | Iterable[Receipted], kind: str = "ACCEPT", delay_ms: int = 0) -> None:
        """ACCEPT (or ``kind`` RELEASE / REJECT) with the next receive; the locks are renewed until then."""
        if kind not in ("ACCEPT", "RELEASE", "REJECT"):
            raise ValueError(f"kind must be ACCEPT, RELEASE or REJECT, not {kind!r}")
        self.pending.add((r, kind, delay_ms if kind == "RELEASE" else None) for r in receipts_of(messages))

    async def flush(self) -> list[AckResult]:
        """Send the deferred acknowledgements now; their results."""
        acks = self.pending.take()
        try:
            return await self._acknowledge(acks)
        except BaseException:
            self.pending.restore(acks)
            raise

    async def extend(self, messages: Receipted | Iterable[Receipted], lock_ms: int | None = None) -> list[AckResult]:
        """Renew the locks to ``lock_ms`` (default: the consumer's) from now."""
        self._check_open()
        receipts = receipts_of(messages)
        if not receipts:
            return []
        call = _api.share_extend(self.group, receipts, lock_ms or self.lock_ms)
        asked_at = time.monotonic()
        results = await self._transport.call(call)
        self.held.renewed(results, asked_at)
        return results

    def forget(self, messages: Receipted | Iterable[Receipted]) -> None:
        """Stop renewing these locks (e.g. once handed to a transaction)."""
        self.held.forget(receipts_of(messages))

    async def describe(self) -> ShareGroupInfo:
        """The group's messages per topic: available, locked, accepted, dead-lettered."""
        return await self._transport.call(_api.describe_share_group(self.group))

    async def _acknowledge(self, acks: list[ShareAck]) -> list[AckResult]:
        self._check_open()
        if not acks:
            return []
        self.held.forget(receipt for receipt, _, _ in acks)
        return await self._transport.call(_api.share_acks(self.group, acks))

    async def _keep_locks(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.held.check_interval())
            due = self.held.due(time.monotonic())
            if due:
                try:
                    await self.extend(due)
                except Exception:  # the locks may run out; the next round tries again
                    logger.warning("could not renew %d share-group locks", len(due), exc_info=True)

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("share consumer is closed")

    async def close(self) -> None:
        """Send the deferred acknowledgements, release the messages still held, stop renewing locks,
        close connections."""
        if self._closed:
            return
        try:
            if len(self.pending):
                self.on_acknowledged(await self.flush())
        except Exception:  # their locks run out and the messages come back: nothing is lost
            logger.warning("could not send %d deferred acknowledgements on close", len(self.pending), exc_info=True)
        self._closed = True
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        held = self.held.receipts()
        if held:
            try:
                await self._transport.call(_api.share_acks(self.group, [(r, "RELEASE", None) for r in held]))
            except Exception:  # best effort: the locks run out by themselves
                logger.warning("could not release %d held share-group messages on close", len(held), exc_info=True)
        await self._transport.aclose()

    async def __aenter__(self) -> AsyncShareConsumer:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
