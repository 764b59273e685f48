"""The log as stored batches: what a byte-protocol front (Kafka) reads to rebuild its own batches.

A ``messages`` row is one record or one record batch (the records of one produce request
to one partition), with the producer stamp it was written under and, for a transaction
marker, its control type. Kafka's Fetch returns batches with exactly these facts, so a
fetch for it reads rows, not messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from half_store.domain.records import PartitionState


class LogBatch(NamedTuple):
    """One stored row: a record (``value_kind`` JSON or binary) or a record batch (VALUE_BATCH)."""

    offset: int
    record_count: int
    timestamp: int
    key: str | None
    value: bytes
    value_kind: int
    headers: str | None
    properties: str | None
    producer_id: int | None
    producer_epoch: int | None
    base_sequence: int | None
    txn_id: str | None  # the transaction it was written in (Kafka's isTransactional bit)
    control: int  # CONTROL_NONE, CONTROL_COMMIT or CONTROL_ABORT


@dataclass(frozen=True, slots=True)
class AbortedRange:
    """An aborted transaction with records in a fetched range: Kafka's (producer id, first offset)."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class BatchRead:
    """What to read from one partition in a batch fetch."""

    topic: str
    partition: int
    offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class BatchPage:
    """One partition's answer to a batch fetch: the rows from the fetch offset, or the error code why not."""

    topic: str
    partition: int
    batches: Sequence[LogBatch]
    state: PartitionState | None
    aborted: Sequence[AbortedRange] = ()
    error: str | None = None  # a BrokerError code (TOPIC_NOT_FOUND, PARTITION_NOT_FOUND, OFFSET_OUT_OF_RANGE)


@dataclass(frozen=True, slots=True)
class OffsetQuery:
    """ListOffsets for one partition: ``timestamp`` -2 earliest, -1 latest, else the first offset at or after it."""

    topic: str
    partition: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class OffsetAnswer:
    topic: str
    partition: int
    offset: int
    timestamp: int  # -1 for earliest / latest
    error: str | None = None


EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
