"""Asyncio twin of the idempotent :class:`sdk.Producer`."""

from __future__ import annotations

import asyncio
from typing import Any, Unpack

from sdk import calls
from sdk._connection import ConnectionOptions
from sdk._routing import PartitionRouter, SequenceSession, highest_named, outcome_unknown
from sdk.aio._base import AsyncBase
from sdk.calls import TopicPartition
from sdk.errors import IllegalStateError
from sdk.message import Message, delayed_wire, tagged, to_wire


class AsyncProducer(AsyncBase):
    """Asyncio twin of :class:`sdk.Producer`: idempotent ``await send(...)`` → ``(partition, offset)``.

    Concurrent sends to one partition are serialised (an :class:`asyncio.Lock` per
    partition) because sequence numbers must arrive in order.
    """

    def __init__(self, url: str, **connection: Unpack[ConnectionOptions]) -> None:
        super().__init__(url, **connection)
        self._router = PartitionRouter()
        self._session: SequenceSession | None = None
        self._session_lock = asyncio.Lock()
        self._partition_locks: dict[TopicPartition, asyncio.Lock] = {}
        self._closed = False

    @property
    def producer_id(self) -> int | None:
        """The broker-assigned producer id in use (``None`` before the first send)."""
        return self._session.identity.producer_id if self._session else None

    async def send(
        self, topic: str, value: Any, key: str | None = None, headers: dict[str, str] | None = None,
        partition: int | None = None, tag: str | None = None,
    ) -> tuple[int, int]:
        """Write one message exactly once; ``(partition, offset)``. ``tag``: its tag (header ``rocketmq.tag``)."""
        message = Message(topic, value, key=key, headers=tagged(headers, tag))
        return (await self.send_batch(topic, [message], partition=partition))[0]

    async def send_delayed(
        self, topic: str, value: Any, *, deliver_at: int | None = None, delay_ms: int | None = None,
        key: str | None = None, headers: dict[str, str] | None = None, partition: int | None = None,
        tag: str | None = None,
    ) -> str:
        """A message no consumer sees before its time; its delay-message id (see :meth:`Producer.send_delayed`)."""
        if self._closed:
            raise IllegalStateError("producer is closed")
        wire = delayed_wire(value, key, tagged(headers, tag), partition, deliver_at, delay_ms)
        [message_id] = await self._transport.call(calls.produce_delayed(topic, [wire]))
        return message_id

    async def send_batch(
        self, topic: str, messages: list[Message], *, partition: int | None = None
    ) -> list[tuple[int, int]]:
        """Write several messages of one topic; one request per partition, results in input order."""
        if self._closed:
            raise IllegalStateError("producer is closed")
        count = await self._partition_count(topic, highest_named(messages, partition))
        results: list[tuple[int, int]] = [(-1, -1)] * len(messages)
        for p, indexes in self._router.split(topic, messages, partition, count).items():
            offsets = await self._send_to_partition((topic, p), [messages[i] for i in indexes])
            for i, offset in zip(indexes, offsets, strict=True):
                results[i] = (p, offset)
        return results

    async def _send_to_partition(self, tp: TopicPartition, messages: list[Message]) -> list[int]:
        wire = [to_wire(m.value, m.key, m.headers) for m in messages]
        async with self._partition_locks.setdefault(tp, asyncio.Lock()):
            session = await self._current_session()
            base = session.base_sequence(tp)
            call = calls.produce_to_partition(tp[0], tp[1], wire, producer=session.identity, base_sequence=base)
            try:
                with self._partition_counts.watching(tp[0]):
                    result = await self._transport.call(call)
            except Exception as exc:
                if outcome_unknown(exc) and self._session is session:
                    self._session = None  # see SequenceSession: never reuse a maybe-taken number
                raise
            session.acknowledge(tp, base, len(wire))
            return result.offsets

    async def _current_session(self) -> SequenceSession:
        async with self._session_lock:
            if self._session is None:
                self._session = SequenceSession(await self._transport.call(calls.init_producer()))
            return self._session

    async def close(self) -> None:
        """Release connections; further sends raise :class:`IllegalStateError`."""
        self._closed = True
        await super().close()
