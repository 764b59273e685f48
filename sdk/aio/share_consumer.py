"""Asyncio twin of :class:`sdk.ShareConsumer` (the same :class:`~sdk._share_core.ShareCore`; a task renews locks)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Unpack

from sdk._connection import ConnectionOptions
from sdk._http import Call
from sdk._share_core import (
    DEFAULT_LOCK_MS,
    DEFAULT_MAX_EXTENSION,
    DEFAULT_MAX_MESSAGES,
    Receipted,
    ShareCore,
    receipts_of,
    report,
)
from sdk.aio._base import AsyncBase
from sdk.calls import ShareAck
from sdk.models import AckResult, ReceivedMessage, ShareGroupInfo

logger = logging.getLogger("halfmq.sdk")

Handler = Callable[[ReceivedMessage], Awaitable[Any] | Any]


class AsyncShareConsumer(AsyncBase):
    """Asyncio twin of :class:`sdk.ShareConsumer`: ``await receive()``, ``async for``, ``await ack()``.

    The lock-renewing task starts with the first receive (it needs a running loop).
    """

    def __init__(
        self, url: str, group: str, topic: str, *, max_messages: int = DEFAULT_MAX_MESSAGES,
        lock_ms: int = DEFAULT_LOCK_MS, ordered: bool = False, tag: str | None = None, auto_extend: bool = True,
        max_extension: float | None = DEFAULT_MAX_EXTENSION, on_acknowledged: Callable[[list[AckResult]], None] = report,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(url, **connection)
        self.core = ShareCore(
            group, topic, max_messages=max_messages, lock_ms=lock_ms, ordered=ordered, max_extension=max_extension,
            on_acknowledged=on_acknowledged, tag=tag,
        )
        self.auto_extend = auto_extend
        self._keeper: asyncio.Task[None] | None = None

    @property
    def group(self) -> str:
        """The share group this consumer takes messages for."""
        return self.core.group

    @property
    def topic(self) -> str:
        """The topic it receives from."""
        return self.core.topic

    async def receive(self, max_messages: int | None = None, timeout: float = 1.0) -> list[ReceivedMessage]:
        """Up to ``max_messages`` messages, each locked for this consumer; waits up to ``timeout`` seconds."""
        request = self.core.receive(max_messages, timeout)
        if self.auto_extend and self._keeper is None:
            self._keeper = asyncio.create_task(self._keep_locks())
        try:
            answer = await self._transport.call(request.call)
        except BaseException:
            self.core.not_received(request)
            raise
        return self.core.received(request, answer)

    def __aiter__(self) -> AsyncIterator[ReceivedMessage]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ReceivedMessage]:
        while not self.core.closed:
            for message in await self.receive(timeout=1.0):
                yield message

    async def process(self, handler: Handler, *, max_messages: int | None = None, timeout: float = 1.0) -> int:
        """Receive one batch and run ``handler`` (a function or a coroutine function) on each message.

        As :meth:`sdk.ShareConsumer.process`: accepted when it returns, released when it
        raises, deferred to the next receive. Returns how many messages were received.
        """
        messages = await self.receive(max_messages, timeout)
        failed = set()
        for message in messages:
            try:
                done = handler(message)
                if inspect.isawaitable(done):
                    await done
            except Exception:
                logger.exception("share-group handler failed on %s/%s@%s; releasing it",
                                 message.topic, message.partition, message.offset)
                failed.add(message.receipt)
        self.core.settle(messages, failed)
        return len(messages)

    async def ack(self, messages: Receipted | Iterable[Receipted]) -> list[AckResult]:
        """ACCEPT: done, never delivered to the group again."""
        return await self._send(self.core.acknowledgements(messages, "ACCEPT", 0))

    async def release(self, messages: Receipted | Iterable[Receipted], delay_ms: int = 0) -> list[AckResult]:
        """RELEASE: deliverable again (after ``delay_ms``)."""
        return await self._send(self.core.acknowledgements(messages, "RELEASE", delay_ms))

    async def reject(self, messages: Receipted | Iterable[Receipted]) -> list[AckResult]:
        """REJECT: straight to ``DLQ.{group}``."""
        return await self._send(self.core.acknowledgements(messages, "REJECT", 0))

    def acknowledge(self, messages: Receipted | Iterable[Receipted], kind: str = "ACCEPT", delay_ms: int = 0) -> None:
        """ACCEPT (or ``kind`` RELEASE / REJECT) with the next receive; the locks are renewed until then."""
        self.core.defer(messages, kind, delay_ms)

    async def flush(self) -> list[AckResult]:
        """Send the deferred acknowledgements now; their results."""
        acks = self.core.pending.take()
        try:
            return await self._send(acks)
        except BaseException:
            self.core.pending.restore(acks)
            raise

    async def extend(self, messages: Receipted | Iterable[Receipted], lock_ms: int | None = None) -> list[AckResult]:
        """Renew the locks to ``lock_ms`` (default: the consumer's) from now."""
        asked_at = time.monotonic()
        results = await self._call(self.core.extend(messages, lock_ms))
        self.core.held.renewed(results, asked_at)
        return results

    def forget(self, messages: Receipted | Iterable[Receipted]) -> None:
        """Stop renewing these locks (e.g. once handed to a transaction)."""
        self.core.held.forget(receipts_of(messages))

    async def describe(self) -> ShareGroupInfo:
        """The group's messages per topic: available, locked, accepted, dead-lettered."""
        return await self._transport.call(self.core.describe())

    async def _send(self, acks: list[ShareAck]) -> list[AckResult]:
        return await self._call(self.core.send(acks))

    async def _call(self, call: Call[list[AckResult]] | None) -> list[AckResult]:
        return [] if call is None else await self._transport.call(call)

    async def _keep_locks(self) -> None:
        while not self.core.closed:
            await asyncio.sleep(self.core.held.check_interval())
            due = self.core.held.due(time.monotonic())
            if due:
                try:
                    await self.extend(due)
                except Exception:  # the locks may run out; the next round tries again
                    logger.warning("could not renew %d share-group locks", len(due), exc_info=True)

    async def close(self) -> None:
        """Send the deferred acknowledgements, release the messages still held, stop renewing locks,
        close connections."""
        if self.core.closed:
            return
        try:
            if len(self.core.pending):
                self.core.on_acknowledged(await self.flush())
        except Exception:  # their locks run out and the messages come back: nothing is lost
            logger.warning("could not send %d deferred acknowledgements", len(self.core.pending), exc_info=True)
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        release = self.core.release_held()
        self.core.closed = True
        if release is not None:
            try:
                await self._transport.call(release)
            except Exception:  # best effort: the locks run out by themselves
                logger.warning("could not release the held share-group messages on close", exc_info=True)
        await super().close()
