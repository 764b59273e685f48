"""Sans-I/O pieces shared by the idempotent and transactional producers (sync and async).

* :class:`PartitionRouter` picks a partition exactly as the broker would
  (murmur2 of the key, round-robin without a key).
* :class:`SequenceSession` numbers batches per partition for one producer id/epoch.
* :func:`outcome_unknown` says whether a failed produce may still have been written.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from sdk._partitioner import partition_for_key
from sdk.calls import TopicPartition
from sdk.errors import (
    HalfmqError,
    OutOfOrderSequenceError,
    PartitionNotFoundError,
    ProducerFencedError,
    UnknownProducerIdError,
)
from sdk.message import Message
from sdk.models import ProducerIdentity


class PartitionRouter:
    """Client-side partitioning identical to the broker's (``half_store/domain/partitioner.py``)."""

    def __init__(self) -> None:
        self._round_robin: dict[str, Iterator[int]] = {}

    def choose(self, topic: str, key: str | None, partition: int | None, partition_count: int) -> int:
        """The partition for a message: explicit, else by key hash, else round-robin."""
        if partition is not None:
            if not 0 <= partition < partition_count:
                raise PartitionNotFoundError(
                    f"topic {topic!r} has {partition_count} partition(s); partition {partition} does not exist"
                )
            return partition
        if key is not None:
            return partition_for_key(key, partition_count)
        counter = self._round_robin.setdefault(topic, itertools.count())
        return next(counter) % partition_count

    def split(
        self, topic: str, messages: Sequence[Message], partition: int | None, partition_count: int
    ) -> dict[int, list[int]]:
        """The indexes of ``messages`` by the partition each goes to (``partition``, when given, for all)."""
        by_partition: dict[int, list[int]] = {}
        for index, message in enumerate(messages):
            chosen = self.choose(topic, message.key, partition if partition is not None else message.partition,
                                 partition_count)
            by_partition.setdefault(chosen, []).append(index)
        return by_partition


def highest_named(messages: Sequence[Message], partition: int | None = None) -> int | None:
    """The highest partition a send names (``partition``, else the messages' own): the count must reach past it."""
    if partition is not None:
        return partition
    return max((m.partition for m in messages if m.partition is not None), default=None)


@dataclass
class SequenceSession:
    """One producer id/epoch and the next sequence number of each partition it wrote.

    Sequences restart at 0 for a new producer id or epoch. A session is replaced
    (never repaired) when the outcome of a batch is unknown, so that no later batch
    can ever reuse a sequence number the broker might already hold: a reused
    number would be acknowledged as a duplicate and the new message silently lost.
    """

    identity: ProducerIdentity
    next_sequence: dict[TopicPartition, int] = field(default_factory=dict)

    def base_sequence(self, tp: TopicPartition) -> int:
        """The sequence number the next batch to ``tp`` must start at."""
        return self.next_sequence.get(tp, 0)

    def acknowledge(self, tp: TopicPartition, base: int, count: int) -> None:
        """Record that ``count`` messages starting at ``base`` are written."""
        self.next_sequence[tp] = base + count


_DEFINITE_REJECTIONS_THAT_BREAK_THE_SESSION = (OutOfOrderSequenceError, UnknownProducerIdError, ProducerFencedError)


def outcome_unknown(exc: BaseException) -> bool:
    """True when a failed produce may have been written or the sequence state is off.

    A 4xx answer means the broker refused the batch and wrote nothing, so the
    sequence number can be reused, except when the refusal is about the sequence
    or producer itself. Connection failures and 5xx after all retries are unknown.
    """
    if isinstance(exc, _DEFINITE_REJECTIONS_THAT_BREAK_THE_SESSION):
        return True
    return not (isinstance(exc, HalfmqError) and exc.status is not None and 400 <= exc.status < 500)
