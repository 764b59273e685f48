"""The partition counts a client routes keys by, and when it reads them again (aiokafka's ``metadata_max_age_ms``).

A topic gains partitions (``PATCH /v1/topics/{topic}``), so a count learned once goes
stale: the SDK would then hash keys over fewer partitions than the broker does, and a
keyed message would land elsewhere than the same key sent through the REST produce. A
count is therefore read again

* when it is older than ``metadata_max_age_ms`` (five minutes by default, as in Kafka's
  clients): the bound on how long keys keep going to the old partitions after a topic grew;
* at once when a send names a partition beyond it: the topic may have grown meanwhile;
* after the broker refused a partition or the topic (``PARTITION_NOT_FOUND``,
  ``TOPIC_NOT_FOUND``): it may have been deleted and created again.

Sans-I/O: one :class:`PartitionCounts` per client, blocking or asyncio; the client does
the reading.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from sdk.errors import PartitionNotFoundError, TopicNotFoundError

DEFAULT_METADATA_MAX_AGE_MS = 300_000
"""How long a topic's partition count is trusted before it is read again (Kafka's ``metadata.max.age.ms``)."""


class PartitionCounts:
    """Per topic, its partition count and when it was read; says when to read it again.

    Thread-safe for the blocking clients: every change is one dict assignment, and two
    threads that both read a stale count learn the same answer.
    """

    def __init__(self, max_age_ms: int = DEFAULT_METADATA_MAX_AGE_MS, clock: Callable[[], float] = time.monotonic) -> None:
        if max_age_ms < 0:
            raise ValueError(f"metadata_max_age_ms must be 0 or more, not {max_age_ms}")
        self.max_age_ms = max_age_ms
        self._clock = clock
        self._known: dict[str, tuple[int, float]] = {}

    def lookup(self, topic: str, partition: int | None = None) -> int | None:
        """The count to route by, or ``None`` when it must be read first: never read, older
        than the age limit, or smaller than an explicit ``partition`` needs."""
        known = self._known.get(topic)
        if known is None:
            return None
        count, read_at = known
        if (self._clock() - read_at) * 1000 >= self.max_age_ms:
            return None
        if partition is not None and partition >= count:
            return None
        return count

    def learned(self, topic: str, count: int) -> None:
        """The broker said ``topic`` has ``count`` partitions (just now)."""
        self._known[topic] = (count, self._clock())

    def forget(self, topic: str) -> None:
        """Read ``topic``'s count again at its next use."""
        self._known.pop(topic, None)

    @contextlib.contextmanager
    def watching(self, topic: str) -> Iterator[None]:
        """Around a write routed by this cache: a refused partition or topic means the count is off."""
        try:
            yield
        except (PartitionNotFoundError, TopicNotFoundError):
            self.forget(topic)
            raise
