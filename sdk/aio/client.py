"""Asyncio twin of :class:`sdk.Client`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, Unpack

from sdk import calls
from sdk._connection import ConnectionOptions
from sdk._http import Call
from sdk.aio._base import AsyncBase
from sdk.calls import TopicPartition
from sdk.errors import TopicExistsError
from sdk.message import Message, placed_on_wire
from sdk.models import (
    CommittedOffset,
    FetchResult,
    GroupDescription,
    HalfMessageInfo,
    TopicMetadata,
    TransactionInfo,
)

T = TypeVar("T")


class AsyncClient(AsyncBase):
    """Asyncio twin of :class:`sdk.Client` (topics, raw fetch, group offsets, states)."""

    def __init__(self, url: str, **connection: Unpack[ConnectionOptions]) -> None:
        super().__init__(url, **connection)

    async def create_topic(self, name: str, partitions: int = 1, *, exist_ok: bool = False) -> None:
        """Create ``name``; ``exist_ok`` ignores TOPIC_EXISTS."""
        try:
            await self._transport.call(calls.create_topic(name, partitions))
        except TopicExistsError:
            if not exist_ok:
                raise

    async def get_topic(self, name: str) -> TopicMetadata:
        """Partitions of ``name`` with their offsets."""
        return await self._transport.call(calls.get_topic(name))

    async def list_topics(self, *, include_system: bool = False) -> dict[str, int]:
        """``{topic: partition count}``."""
        return await self._transport.call(calls.list_topics(include_system))

    async def fetch(
        self, topic: str, partition: int, offset: int = 0, *, max_messages: int = 500, max_wait_ms: int = 0,
        isolation: str = "read_committed",
    ) -> FetchResult:
        """Read one partition from ``offset``."""
        return await self._transport.call(
            calls.fetch(topic, partition, offset, max_messages=max_messages, max_wait_ms=max_wait_ms, isolation=isolation)
        )

    async def commit_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Set ``group``'s committed offsets."""
        await self._transport.call(calls.commit_group_offsets(group, offsets))

    async def offsets_for_time(self, topic: str, timestamp_ms: int) -> dict[int, int]:
        """Per partition of ``topic``, the first offset written at or after ``timestamp_ms`` (the end if none)."""
        return await self._transport.call(calls.offsets_for_time(topic, timestamp_ms))

    async def committed_offsets(self, group: str) -> list[CommittedOffset]:
        """Every committed offset of ``group``."""
        return await self._transport.call(calls.group_offsets(group))

    async def list_groups(self) -> list[dict[str, Any]]:
        """``[{"group", "state", "members"}]`` of every consumer group."""
        return await self._transport.call(calls.list_groups())

    async def describe_group(self, group: str) -> GroupDescription:
        """``group``'s state, live members with their assignments, and committed offsets with lag."""
        return await self._transport.call(calls.describe_group(group))

    async def produce(self, topic: str, messages: Iterable[Message]) -> list[tuple[int, int]]:
        """Write ``messages`` atomically, partitioned by the broker (not idempotent)."""
        return await self._transport.call(calls.produce(topic, [placed_on_wire(m) for m in messages]))

    async def get_half_message(self, message_id: str) -> HalfMessageInfo:
        """State of one half message."""
        return await self._transport.call(calls.get_half_message(message_id))

    async def list_half_messages(self, producer_group: str, state: str | None = "PREPARED") -> list[HalfMessageInfo]:
        """Half messages of ``producer_group``, optionally only those in ``state``."""
        return await self._transport.call(calls.list_half_messages(producer_group, state))

    async def commit_half_message(self, message_id: str) -> dict[str, Any]:
        """Commit a half message by id (idempotent)."""
        return await self._transport.call(calls.end_half_message(message_id, "commit"))

    async def rollback_half_message(self, message_id: str) -> dict[str, Any]:
        """Roll a half message back by id (idempotent)."""
        return await self._transport.call(calls.end_half_message(message_id, "rollback"))

    async def get_transaction(self, txn_id: str) -> TransactionInfo:
        """State of a Kafka-mode transaction."""
        return await self._transport.call(calls.get_transaction(txn_id))

    async def health(self) -> Any:
        """``GET /healthz``; raises if the broker is unreachable."""
        return await self._transport.call(calls.health())

    async def call(self, call: Call[T]) -> T:
        """Send any request built by :mod:`sdk.calls`; its parsed answer (see :meth:`sdk.Client.call`)."""
        return await self._transport.call(call)
