"""The idempotent :class:`Producer`: every message is written exactly once per ``send``.

How: the producer asks the broker for a producer id (``POST /v1/producers``),
partitions on the client exactly like the broker, and numbers its batches per
partition. The transport resends a batch after connection errors and 5xx with the
*same* sequence number, and the broker answers a repeat with the original offsets.
"""

from __future__ import annotations

import threading
from typing import Any, Unpack

from sdk import calls
from sdk._base import SyncBase
from sdk._connection import ConnectionOptions
from sdk._routing import PartitionRouter, SequenceSession, highest_named, outcome_unknown
from sdk.calls import TopicPartition
from sdk.errors import IllegalStateError
from sdk.message import Message, delayed_wire, tagged, to_wire


class Producer(SyncBase):
    """Idempotent producer: ``Producer(url).send(topic, value, key=None, headers=None, partition=None)``.

    Thread-safe. Sends to one partition are serialised (sequence numbers must reach
    the broker in order); sends to different partitions run in parallel.

    If ``send`` raises :class:`~sdk.errors.BrokerUnavailableError` the message may or
    may not have been written; the producer then starts a fresh producer id so that
    no later message can be mistaken for that one. Retrying the ``send`` yourself is
    at-least-once.
    """

    def __init__(self, url: str, **connection: Unpack[ConnectionOptions]) -> None:
        super().__init__(url, **connection)
        self._router = PartitionRouter()
        self._session: SequenceSession | None = None
        self._session_lock = threading.Lock()
        self._partition_locks: dict[TopicPartition, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self._closed = False

    @property
    def producer_id(self) -> int | None:
        """The broker-assigned producer id in use (``None`` before the first send)."""
        session = self._session
        return session.identity.producer_id if session else None

    def send(
        self,
        topic: str,
        value: Any,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        partition: int | None = None,
        tag: str | None = None,
    ) -> tuple[int, int]:
        """Write one message exactly once and return ``(partition, offset)``.

        ``value`` is any JSON value or ``bytes``. Without ``partition`` the key's
        murmur2 hash picks it (as the broker would), without a key round-robin.
        ``tag``: the message's tag (header ``rocketmq.tag``), for consumers' tag filters.
        """
        return self.send_batch(topic, [Message(topic, value, key=key, headers=tagged(headers, tag))], partition=partition)[0]

    def send_delayed(
        self,
        topic: str,
        value: Any,
        *,
        deliver_at: int | None = None,
        delay_ms: int | None = None,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        partition: int | None = None,
        tag: str | None = None,
    ) -> str:
        """A message no consumer sees before ``deliver_at`` (ms since the epoch) or ``delay_ms`` from now;
        its delay-message id (``GET /v1/delayed-messages`` lists it while it waits).

        Not retried once the request may have arrived: a repeat would schedule it twice.
        """
        if self._closed:
            raise IllegalStateError("producer is closed")
        wire = delayed_wire(value, key, tagged(headers, tag), partition, deliver_at, delay_ms)
        [message_id] = self._transport.call(calls.produce_delayed(topic, [wire]))
        return message_id

    def send_batch(self, topic: str, messages: list[Message], *, partition: int | None = None) -> list[tuple[int, int]]:
        """Write several messages of one topic; one request per partition involved.

        Each partition's share is atomic and exactly-once; the result lists
        ``(partition, offset)`` in the order of ``messages``.
        """
        if self._closed:
            raise IllegalStateError("producer is closed")
        count = self._partition_count(topic, highest_named(messages, partition))
        results: list[tuple[int, int]] = [(-1, -1)] * len(messages)
        for p, indexes in self._router.split(topic, messages, partition, count).items():
            offsets = self._send_to_partition((topic, p), [messages[i] for i in indexes])
            for i, offset in zip(indexes, offsets, strict=True):
                results[i] = (p, offset)
        return results

    def _send_to_partition(self, tp: TopicPartition, messages: list[Message]) -> list[int]:
        wire = [to_wire(m.value, m.key, m.headers) for m in messages]
        with self._partition_lock(tp):
            session = self._current_session()
            base = session.base_sequence(tp)
            call = calls.produce_to_partition(
                tp[0], tp[1], wire, producer=session.identity, base_sequence=base
            )
            try:
                with self._partition_counts.watching(tp[0]):
                    result = self._transport.call(call)
            except Exception as exc:
                if outcome_unknown(exc):
                    self._drop_session(session)
                raise
            session.acknowledge(tp, base, len(wire))
            return result.offsets

    def _partition_lock(self, tp: TopicPartition) -> threading.Lock:
        with self._locks_lock:
            return self._partition_locks.setdefault(tp, threading.Lock())

    def _current_session(self) -> SequenceSession:
        with self._session_lock:
            if self._session is None:
                self._session = SequenceSession(self._transport.call(calls.init_producer()))
            return self._session

    def _drop_session(self, session: SequenceSession) -> None:
        with self._session_lock:
            if self._session is session:
                self._session = None

    def close(self) -> None:
        """Release connections; further sends raise :class:`~sdk.errors.IllegalStateError`."""
        self._closed = True
        super().close()
