"""The blocking :class:`Consumer`: reads partitions and tracks its group's offsets.

There is no group coordinator in halfmq: a consumer reads all partitions of its
topics (or the ones you give it) and commits the group's offsets explicitly. Run
one consumer per partition set; two consumers of one group on the same partitions
both read everything.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType

from sdk import _api
from sdk._api import TopicPartition
from sdk._consumer_core import MAX_BROKER_WAIT_MS, ConsumerCore
from sdk._http import DEFAULT_MAX_CONNECTIONS, DEFAULT_TIMEOUT, RetryPolicy, Transport
from sdk.errors import OffsetOutOfRangeError
from sdk.message import Message

DEFAULT_LONG_POLL_SLICE = 0.5
"""With several partitions, the longest wait on one of them before looking at the others."""


class Consumer:
    """``Consumer(url, group, topics, isolation_level="read_committed")``.

    ``poll(timeout)`` returns the next messages (possibly none), long-polling the
    broker up to ``timeout`` seconds; iterating yields messages one at a time until
    :meth:`close`. Starts from the group's committed offsets, else from the
    beginning (``auto_offset_reset="latest"``: from the end). :meth:`commit`
    commits everything returned so far. Not thread-safe: use one per thread.

    The broker long-polls one partition per request, so with several partitions and
    nothing to read the consumer parks on them in turn for ``long_poll_slice``
    seconds each: a new message is seen within about that long.
    """

    def __init__(
        self,
        url: str,
        group: str,
        topics: str | Iterable[str],
        isolation_level: str = "read_committed",
        *,
        partitions: Iterable[TopicPartition] | None = None,
        auto_offset_reset: str = "earliest",
        max_poll_messages: int = 500,
        long_poll_slice: float = DEFAULT_LONG_POLL_SLICE,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        token: str | None = None,
        verify: bool | str = True,
    ) -> None:
        self.url = url.rstrip("/")
        self._core = ConsumerCore(
            group, topics, partitions=partitions, isolation_level=isolation_level, auto_offset_reset=auto_offset_reset
        )
        self.max_poll_messages = max_poll_messages
        self.long_poll_slice = long_poll_slice
        self._transport = Transport(
            self.url, timeout=timeout, retry=retry, max_connections=max_connections, token=token, verify=verify
        )

    @property
    def group(self) -> str:
        """The consumer group whose offsets this consumer resumes from and commits."""
        return self._core.group

    @property
    def isolation_level(self) -> str:
        """``read_committed`` (only committed transactional data) or ``read_uncommitted``."""
        return self._core.isolation_level

    def assignment(self) -> list[TopicPartition]:
        """The ``(topic, partition)`` pairs this consumer reads (resolved on first use)."""
        self._ensure_assigned()
        return list(self._core.positions)

    def positions(self) -> dict[TopicPartition, int]:
        """Next offset to read per partition: what ``commit()`` would commit.

        Pass it to :meth:`TransactionalProducer.send_offsets_to_transaction` in a
        consume-transform-produce loop (instead of calling ``commit()``).
        """
        self._ensure_assigned()
        return dict(self._core.positions)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Read ``(topic, partition)`` from ``offset`` next."""
        self._ensure_assigned()
        self._core.seek((topic, partition), offset)

    def poll(self, timeout: float = 1.0, max_messages: int | None = None) -> list[Message]:
        """The next messages of any assigned partition, waiting up to ``timeout`` seconds."""
        self._ensure_assigned()
        budget = max_messages or self.max_poll_messages
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            batch: list[Message] = []
            rotation = self._core.rotation()
            for tp in rotation:
                if len(batch) >= budget:
                    break
                batch += self._fetch(tp, budget - len(batch), 0)
            remaining = deadline - time.monotonic()
            if batch or remaining <= 0 or not rotation:
                return batch
            wait = remaining if len(rotation) == 1 else min(remaining, self.long_poll_slice)
            batch = self._fetch(rotation[0], budget, int(wait * 1000))
            if batch:
                return batch

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit the group's offsets: by default everything returned by ``poll`` so far."""
        self._ensure_assigned()
        to_commit = dict(offsets) if offsets is not None else self._core.uncommitted()
        if to_commit:
            self._transport.call(_api.commit_group_offsets(self._core.group, to_commit))
            self._core.mark_committed(to_commit)

    def committed(self) -> dict[TopicPartition, int]:
        """The group's committed offsets as last committed or read by this consumer."""
        return dict(self._core.committed)

    def _fetch(self, tp: TopicPartition, max_messages: int, wait_ms: int) -> list[Message]:
        call = _api.fetch(
            tp[0], tp[1], self._core.positions[tp], max_messages=max_messages,
            max_wait_ms=min(wait_ms, MAX_BROKER_WAIT_MS), isolation=self._core.isolation_level,
        )
        try:
            result = self._transport.call(call)
        except OffsetOutOfRangeError:
            # Committed offset no longer (or not yet) in the log: start over per
            # auto_offset_reset, as Kafka consumers do.
            metadata = self._transport.call(_api.get_topic(tp[0]))
            self._core.seek(tp, self._core.reset_offset(tp, metadata))
            return []
        return self._core.record(tp, result)

    def _ensure_assigned(self) -> None:
        core = self._core
        core.check_open()
        if core.assigned:
            return
        topics = sorted(set(core.topics) | {t for t, _ in core.requested_partitions or []})
        metadata = {t: self._transport.call(_api.get_topic(t)) for t in topics}
        partitions = core.assignment_for(list(metadata.values()))
        committed = self._transport.call(_api.group_offsets(core.group))
        core.assign(partitions, metadata, committed)

    def __iter__(self) -> Iterator[Message]:
        """Yield messages one by one until the consumer is closed."""
        while not self._core.closed:
            yield from self.poll(timeout=1.0)

    def close(self) -> None:
        """Stop consuming and release connections (does not commit)."""
        self._core.closed = True
        self._transport.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
