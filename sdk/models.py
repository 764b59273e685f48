"""Read-only records the broker returns (topic metadata, fetch results, states).

Frozen dataclasses named for what they are, built from the contract's JSON by the
``from_json`` class methods; :class:`~sdk.message.Message` lives in :mod:`sdk.message`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sdk.message import Message, from_wire, message_fields


@dataclass(frozen=True)
class PartitionInfo:
    """One partition's offsets: readable range and the last stable offset (LSO)."""

    partition: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> PartitionInfo:
        """Build from ``{"partition", "log_start_offset", "high_watermark", "last_stable_offset"}``."""
        return cls(
            partition=int(body["partition"]),
            log_start_offset=int(body.get("log_start_offset", 0)),
            high_watermark=int(body.get("high_watermark", 0)),
            last_stable_offset=int(body.get("last_stable_offset", body.get("high_watermark", 0))),
        )


@dataclass(frozen=True)
class TopicMetadata:
    """``GET /v1/topics/{topic}``: the topic and its partitions."""

    name: str
    partitions: tuple[PartitionInfo, ...]

    @property
    def partition_count(self) -> int:
        """How many partitions the topic has."""
        return len(self.partitions)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TopicMetadata:
        """Build from the topic endpoint's JSON."""
        parts = tuple(sorted((PartitionInfo.from_json(p) for p in body["partitions"]), key=lambda p: p.partition))
        return cls(name=str(body["name"]), partitions=parts)


@dataclass(frozen=True)
class FetchResult:
    """One fetch: the messages and where to continue (``next_offset`` may skip aborted data)."""

    messages: list[Message]
    next_offset: int
    high_watermark: int
    last_stable_offset: int

    @classmethod
    def from_json(cls, body: Mapping[str, Any], topic: str, partition: int) -> FetchResult:
        """Build from the fetch endpoint's JSON, decoding ``value_base64`` to bytes."""
        raw = RawFetchResult.from_json(body)
        return cls(
            messages=[from_wire({"topic": topic, "partition": partition, **m}) for m in raw.messages],
            next_offset=raw.next_offset,
            high_watermark=raw.high_watermark,
            last_stable_offset=raw.last_stable_offset,
        )


@dataclass(frozen=True)
class RawFetchResult:
    """One fetch as the broker sent it: each message the JSON object it came as (values not
    decoded, ``value_base64`` left as text), for callers that pass messages on rather than
    read them (the replicator, the Spark source). :class:`FetchResult` decodes them."""

    messages: list[dict[str, Any]]
    next_offset: int
    high_watermark: int
    last_stable_offset: int

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> RawFetchResult:
        """Build from the fetch endpoint's JSON."""
        return cls(
            messages=list(body.get("messages") or []),
            next_offset=int(body["next_offset"]),
            high_watermark=int(body.get("high_watermark", body["next_offset"])),
            last_stable_offset=int(body.get("last_stable_offset", body.get("high_watermark", 0))),
        )


@dataclass(frozen=True)
class ProduceResult:
    """Offsets of a partition produce; ``duplicate`` when the broker had it already."""

    partition: int
    offsets: list[int]
    duplicate: bool = False
    txn_id: str | None = None  # the transaction the batch was written into

    @classmethod
    def from_json(cls, body: Mapping[str, Any], partition: int) -> ProduceResult:
        """Build from ``{"offsets": [{"partition", "offset"}], "duplicate"?, "txn_id"?}``."""
        offsets = [int(o["offset"]) if isinstance(o, Mapping) else int(o) for o in body.get("offsets") or []]
        txn_id = body.get("txn_id")
        return cls(
            partition=partition,
            offsets=offsets,
            duplicate=bool(body.get("duplicate", False)),
            txn_id=None if txn_id is None else str(txn_id),
        )


@dataclass(frozen=True)
class CommittedOffset:
    """A consumer group's committed position in one partition (the next offset to read)."""

    topic: str
    partition: int
    offset: int
    metadata: str | None = None
    lag: int | None = None

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> CommittedOffset:
        """Build from one entry of ``GET /v1/groups/{group}/offsets``."""
        return cls(
            topic=str(body["topic"]),
            partition=int(body["partition"]),
            offset=int(body["offset"]),
            metadata=body.get("metadata"),
            lag=body.get("lag"),
        )


@dataclass(frozen=True)
class ProducerIdentity:
    """What InitProducerId hands out: the producer id and its current epoch."""

    producer_id: int
    producer_epoch: int

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ProducerIdentity:
        """Build from ``{"producer_id", "producer_epoch"}``."""
        return cls(producer_id=int(body["producer_id"]), producer_epoch=int(body["producer_epoch"]))


@dataclass(frozen=True)
class HalfMessageInfo:
    """A half message's state as the broker sees it (Mode 1).

    ``partition`` is where the message goes in ``topic`` when committed; ``offset`` is its
    offset there once it is ``COMMITTED``. ``resolved_by`` says who resolved it
    (``"producer"`` or ``"checker"``) and ``resolved_at`` when (ms since the epoch); all
    three are ``None`` while it is ``PREPARED``, and in a prepare answer.
    """

    message_id: str
    transaction_id: str | None
    producer_group: str | None
    topic: str | None
    state: str
    check_times: int = 0
    born_timestamp: int | None = None
    partition: int | None = None
    offset: int | None = None
    resolved_by: str | None = None
    resolved_at: int | None = None

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> HalfMessageInfo:
        """Build from ``GET /v1/half-messages/{id}`` or a prepare answer."""
        return cls(
            message_id=str(body["message_id"]),
            transaction_id=body.get("transaction_id"),
            producer_group=body.get("producer_group"),
            topic=body.get("topic"),
            state=str(body.get("state", "PREPARED")),
            check_times=int(body.get("check_times") or 0),
            born_timestamp=body.get("born_timestamp"),
            partition=_optional_int(body.get("partition")),
            offset=_optional_int(body.get("offset")),
            resolved_by=body.get("resolved_by"),
            resolved_at=_optional_int(body.get("resolved_at")),
        )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class TransactionInfo:
    """A Kafka-mode transaction's state as the broker sees it (Mode 2)."""

    txn_id: str
    state: str
    partitions: list[Any]
    timeout_ms: int | None = None

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TransactionInfo:
        """Build from ``GET /v1/transactions/{txn_id}`` or a begin answer."""
        return cls(
            txn_id=str(body["txn_id"]),
            state=str(body.get("state", "OPEN")),
            partitions=list(body.get("partitions") or []),
            timeout_ms=body.get("timeout_ms"),
        )


@dataclass(frozen=True)
class MemberAssignment:
    """A join or heartbeat answer: the member's epoch and the partitions it may read."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: frozenset[tuple[str, int]]
    state: str = "STABLE"

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> MemberAssignment:
        """Build from a join or heartbeat answer (``assignment``: ``[{"topic", "partition"}]``)."""
        return cls(
            member_id=str(body["member_id"]),
            member_epoch=int(body["member_epoch"]),
            heartbeat_interval_ms=int(body.get("heartbeat_interval_ms") or 3000),
            assignment=frozenset((str(p["topic"]), int(p["partition"])) for p in body.get("assignment") or []),
            state=str(body.get("state") or "STABLE"),
        )


@dataclass(frozen=True)
class GroupMetadata:
    """Who commits a group's offsets: the member and the epoch it last heard (Kafka's ConsumerGroupMetadata).

    Pass it to :meth:`TransactionalProducer.send_offsets_to_transaction` instead of the
    group's name, so the broker can fence a consumer that lost its partitions (KIP-447).
    """

    group: str
    member_id: str
    member_epoch: int


class ConsumerPositions(dict[tuple[str, int], int]):
    """``{(topic, partition): next offset}`` as :meth:`Consumer.positions` returns them, plus who read them.

    ``group_metadata`` is the consumer's membership when the positions were taken (``None``
    without one), so ``producer.send_offsets_to_transaction(consumer.positions(), group)``
    commits as that member. ``current_metadata`` asks the consumer for its membership now.
    """

    group_metadata: GroupMetadata | None = None
    current_metadata: Any = None  # Callable[[], GroupMetadata | None]

    def __init__(
        self,
        positions: Mapping[tuple[str, int], int],
        group_metadata: GroupMetadata | None = None,
        current_metadata: Any = None,
    ) -> None:
        super().__init__(positions)
        self.group_metadata = group_metadata
        self.current_metadata = current_metadata


@dataclass(frozen=True)
class GroupMember:
    """One live member of a consumer group, as ``GET /v1/groups/{group}`` describes it."""

    member_id: str
    member_epoch: int
    state: str
    assignment: list[tuple[str, int]]
    revoking: list[tuple[str, int]]
    last_heartbeat_ms: int

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> GroupMember:
        """Build from one entry of the description's ``members``."""

        def pairs(key: str) -> list[tuple[str, int]]:
            return [(str(p["topic"]), int(p["partition"])) for p in body.get(key) or []]

        return cls(
            member_id=str(body["member_id"]),
            member_epoch=int(body["member_epoch"]),
            state=str(body.get("state") or "STABLE"),
            assignment=pairs("assignment"),
            revoking=pairs("revoking"),
            last_heartbeat_ms=int(body.get("last_heartbeat_ms") or 0),
        )


@dataclass(frozen=True)
class GroupDescription:
    """``GET /v1/groups/{group}``: state (``EMPTY``, ``STABLE``, ``RECONCILING``), members and offsets."""

    group: str
    state: str
    members: list[GroupMember]
    offsets: list[CommittedOffset]

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> GroupDescription:
        """Build from the description's JSON."""
        return cls(
            group=str(body["group"]),
            state=str(body["state"]),
            members=[GroupMember.from_json(m) for m in body.get("members") or []],
            offsets=[CommittedOffset.from_json(o) for o in body.get("offsets") or []],
        )


# --- share groups ---------------------------------------------------------------------


@dataclass(frozen=True)
class ReceivedMessage(Message):
    """A message a share group handed out: where it lives, plus the lock it holds.

    Acknowledge it with its ``receipt`` (the consumer's ``ack`` / ``release`` /
    ``reject`` take the message itself). ``delivery_count`` is 1 the first time, more
    once it was released or its lock ran out; ``lock_expires_ms`` is when the lock runs
    out on the broker's clock (ms since the epoch), unless it is extended.
    """

    receipt: str = ""
    delivery_count: int = 0
    lock_expires_ms: int = 0

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ReceivedMessage:
        """Build from one message of a share-group receive: the message's fields as every
        message's (:func:`~sdk.message.message_fields`, by name), plus the lock's."""
        return cls(
            **message_fields(body),
            receipt=str(body["receipt"]),
            delivery_count=int(body["delivery_count"]),
            lock_expires_ms=int(body.get("lock_expires_ms") or 0),
        )


@dataclass(frozen=True)
class AckResult:
    """What became of one receipt: ``ok``, or ``error`` ``RECEIPT_EXPIRED`` / ``UNKNOWN_RECEIPT``.

    RECEIPT_EXPIRED: the lock it names ran out, was given back, or passed to a
    transaction; the message may have gone to another consumer. A retried ACCEPT whose
    first answer was lost also gets it. UNKNOWN_RECEIPT: not a receipt of this group.
    ``lock_expires_ms``: after an extend, when the renewed lock runs out.
    """

    receipt: str
    ok: bool
    error: str | None = None
    lock_expires_ms: int | None = None

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> AckResult:
        """Build from one entry of ``{"results": [...]}``."""
        expires = body.get("lock_expires_ms")
        return cls(
            receipt=str(body["receipt"]),
            ok=bool(body["ok"]),
            error=body.get("error"),
            lock_expires_ms=None if expires is None else int(expires),
        )


@dataclass(frozen=True)
class ShareTopicInfo:
    """A share group on one topic: messages waiting, locked, accepted and dead-lettered."""

    topic: str
    available: int
    locked: int
    accepted: int
    dlq: int

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ShareTopicInfo:
        return cls(
            topic=str(body["topic"]),
            available=int(body["available"]),
            locked=int(body["locked"]),
            accepted=int(body["accepted"]),
            dlq=int(body["dlq"]),
        )


@dataclass(frozen=True)
class ShareGroupInfo:
    """``GET /v1/share-groups/{group}``."""

    group: str
    topics: list[ShareTopicInfo]

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ShareGroupInfo:
        return cls(group=str(body["group"]), topics=[ShareTopicInfo.from_json(t) for t in body.get("topics") or []])
