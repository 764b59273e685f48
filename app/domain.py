"""Domain records shared by the log, the coordinator and the half store."""

from __future__ import annotations

import time
from dataclasses import dataclass

from app.storage.schema import CONTROL_NONE


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Topic:
    topic_id: int
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class Record:
    """A message ready to be appended: the value is already encoded."""

    key: str | None
    value: bytes
    value_kind: int
    headers: str | None  # JSON object text, None when there are none
    timestamp: int
    properties: str | None = None

    # Records cross to the core process by the hundred per request; a plain tuple pickles
    # several times faster than the generic state of a slotted dataclass.
    def __reduce__(self) -> tuple[type[Record], tuple[object, ...]]:
        return (Record, (self.key, self.value, self.value_kind, self.headers, self.timestamp, self.properties))


@dataclass(frozen=True, slots=True)
class ProducerStamp:
    """Who wrote a batch, for idempotence and transactions (Kafka's batch header)."""

    producer_id: int | None = None
    producer_epoch: int | None = None
    base_sequence: int | None = None
    txn_id: str | None = None
    control: int = CONTROL_NONE


@dataclass(frozen=True, slots=True)
class AppendResult:
    partition: int
    base_offset: int
    count: int
    duplicate: bool = False

    @property
    def offsets(self) -> range:
        return range(self.base_offset, self.base_offset + self.count)


@dataclass(frozen=True, slots=True)
class PartitionState:
    partition: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class StoredMessage:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: str | None
    value: bytes
    value_kind: int
    headers: str | None
    txn_id: str | None = None

    def __reduce__(self) -> tuple[type[StoredMessage], tuple[object, ...]]:  # see Record.__reduce__
        fields = (self.topic, self.partition, self.offset, self.timestamp, self.key, self.value, self.value_kind, self.headers, self.txn_id)
        return (StoredMessage, fields)


@dataclass(frozen=True, slots=True)
class FetchResult:
    messages: list[StoredMessage]
    next_offset: int
    state: PartitionState


@dataclass(frozen=True, slots=True)
class GroupOffset:
    topic: str
    partition: int
    offset: int
    metadata: str | None
    lag: int | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class ProducerIdentity:
    producer_id: int
    producer_epoch: int
    transactional_id: str | None = None

