"""Blocking admin and low-level client: topics, raw produce/fetch, group offsets, states."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, Unpack

from sdk import calls
from sdk._base import SyncBase
from sdk._connection import ConnectionOptions
from sdk._http import Call
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


class Client(SyncBase):
    """A blocking connection to one broker (``Client("http://127.0.0.1:8080")``).

    Thread-safe; holds a small connection pool (see :mod:`sdk._http` for why it is
    small). Close it, or use it as a context manager. Producers and consumers make
    their own; this one is for administration and for the raw endpoints.
    """

    def __init__(self, url: str, **connection: Unpack[ConnectionOptions]) -> None:
        super().__init__(url, **connection)

    # --- topics ------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, *, exist_ok: bool = False) -> None:
        """Create ``name`` with ``partitions`` partitions; ``exist_ok`` ignores TOPIC_EXISTS."""
        try:
            self._transport.call(calls.create_topic(name, partitions))
        except TopicExistsError:
            if not exist_ok:
                raise

    def list_topics(self, *, include_system: bool = False) -> dict[str, int]:
        """``{topic name: partition count}`` of every (non-system, by default) topic."""
        return self._transport.call(calls.list_topics(include_system))

    def get_topic(self, name: str) -> TopicMetadata:
        """Partitions of ``name`` with their log start, high watermark and last stable offset."""
        return self._transport.call(calls.get_topic(name))

    # --- raw produce and fetch ----------------------------------------------------

    def produce(self, topic: str, messages: Iterable[Message]) -> list[tuple[int, int]]:
        """Write ``messages`` atomically, partitioned by the broker; ``[(partition, offset)]``.

        Not idempotent: a lost answer is not resent. Use :class:`~sdk.Producer` for
        exactly-once writes. A message's ``partition`` field, when set, is honoured.
        """
        return self._transport.call(calls.produce(topic, [placed_on_wire(m) for m in messages]))

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int = 0,
        *,
        max_messages: int = 500,
        max_wait_ms: int = 0,
        isolation: str = "read_committed",
    ) -> FetchResult:
        """Read one partition from ``offset``; continue from the result's ``next_offset``."""
        return self._transport.call(
            calls.fetch(topic, partition, offset, max_messages=max_messages, max_wait_ms=max_wait_ms, isolation=isolation)
        )

    # --- consumer groups ----------------------------------------------------------

    def offsets_for_time(self, topic: str, timestamp_ms: int) -> dict[int, int]:
        """Per partition of ``topic``, the first offset written at or after ``timestamp_ms`` (the end if none)."""
        return self._transport.call(calls.offsets_for_time(topic, timestamp_ms))

    def commit_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Set ``group``'s committed offsets (``{(topic, partition): next offset to read}``)."""
        self._transport.call(calls.commit_group_offsets(group, offsets))

    def committed_offsets(self, group: str) -> list[CommittedOffset]:
        """Every committed offset of ``group`` (with its lag)."""
        return self._transport.call(calls.group_offsets(group))

    def list_groups(self) -> list[dict[str, Any]]:
        """``[{"group", "state", "members"}]`` of every consumer group (with members or committed offsets)."""
        return self._transport.call(calls.list_groups())

    def describe_group(self, group: str) -> GroupDescription:
        """``group``'s state, live members with their assignments, and committed offsets with lag."""
        return self._transport.call(calls.describe_group(group))

    # --- transaction inspection ---------------------------------------------------

    def get_half_message(self, message_id: str) -> HalfMessageInfo:
        """State of one half message (PREPARED, COMMITTED, ROLLED_BACK or DISCARDED)."""
        return self._transport.call(calls.get_half_message(message_id))

    def list_half_messages(self, producer_group: str, state: str | None = "PREPARED") -> list[HalfMessageInfo]:
        """Half messages of ``producer_group``, optionally only those in ``state``."""
        return self._transport.call(calls.list_half_messages(producer_group, state))

    def commit_half_message(self, message_id: str) -> dict[str, Any]:
        """Commit a half message by id (idempotent); the answer names its final topic/offset."""
        return self._transport.call(calls.end_half_message(message_id, "commit"))

    def rollback_half_message(self, message_id: str) -> dict[str, Any]:
        """Roll a half message back by id (idempotent)."""
        return self._transport.call(calls.end_half_message(message_id, "rollback"))

    def get_transaction(self, txn_id: str) -> TransactionInfo:
        """State of a Kafka-mode transaction."""
        return self._transport.call(calls.get_transaction(txn_id))

    def health(self) -> Any:
        """``GET /healthz``; raises if the broker is unreachable."""
        return self._transport.call(calls.health())

    def call(self, call: Call[T]) -> T:
        """Send any request built by :mod:`sdk.calls` (with this client's token, retries and
        typed errors) and return its parsed answer: for what has no method of its own."""
        return self._transport.call(call)
