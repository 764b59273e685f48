"""What share-group calls take and give back across the front/core link (plain tuples and frozen dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from half_store.domain.share_state import AckType


class ReceivedMessage(NamedTuple):
    """A message handed to a share-group consumer: the stored message, its receipt and its lock."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: str | None
    value: bytes
    value_kind: int
    headers: str | None
    txn_id: str | None
    receipt: str
    delivery_count: int
    lock_expires_ms: int


class Acknowledgement(NamedTuple):
    """One entry of an acks request."""

    receipt: str
    ack_type: AckType
    delay_ms: int = 0


class ReceiptResult(NamedTuple):
    """What became of one receipt: ``error`` is None when it was applied.

    ``lock_expires_ms``: for an extend, the lock's new end.
    """

    receipt: str
    error: str | None = None
    lock_expires_ms: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class ShareReceived:
    """A receive's answer: the messages now locked for the caller, and what became of the
    acknowledgements it carried (in their order)."""

    messages: list[ReceivedMessage]
    results: list[ReceiptResult]


@dataclass(frozen=True, slots=True)
class SharePartitionView:
    partition: int
    start_offset: int  # everything below is done (KIP-932's share-partition start offset)
    end_offset: int  # the group has looked at everything below (share-partition end offset)
    available: int
    locked: int
    accepted: int
    dead_lettered: int


@dataclass(frozen=True, slots=True)
class ShareTopicView:
    topic: str
    partitions: list[SharePartitionView]

    @property
    def available(self) -> int:
        return sum(p.available for p in self.partitions)

    @property
    def locked(self) -> int:
        return sum(p.locked for p in self.partitions)

    @property
    def accepted(self) -> int:
        return sum(p.accepted for p in self.partitions)

    @property
    def dead_lettered(self) -> int:
        return sum(p.dead_lettered for p in self.partitions)


@dataclass(frozen=True, slots=True)
class ShareGroupSummary:
    """A share group as its list shows it: the topics it receives from, what it accepted and
    dead-lettered so far, and how many records it holds locked now."""

    group: str
    topics: tuple[str, ...]
    accepted: int
    dead_lettered: int
    locked: int
