"""Request and response bodies of the v1 API (they are also its OpenAPI schema).

Requests are pydantic models, validated on the way in. Responses are TypedDicts: the
routes build their bodies as these dicts (mypy checks each against its declaration)
and send them as they are, without a validation pass on the produce and fetch paths,
while FastAPI derives the OpenAPI schema from the same declarations.
``tests/integration/test_response_schemas.py`` holds real answers to the schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, model_validator, with_config
from typing_extensions import TypedDict  # pydantic needs typing_extensions' TypedDict before Python 3.12

from half_store.domain.constants import TOPIC_NAME_PATTERN

# Every response TypedDict: pydantic builds its schema when it is first needed (the OpenAPI
# document), not for each route as an app starts. The routes send these dicts as they are,
# so nothing else needs the schema, and building them was half of an app's start (0.39 → 0.19 s).
answer_shape = with_config(ConfigDict(defer_build=True))

# PostgreSQL text cannot hold NUL, so no identifier or key may, whichever database is behind.
NO_NUL = r"^[^\x00]*$"
TopicName = Annotated[str, Field(pattern=TOPIC_NAME_PATTERN, description="^[A-Za-z0-9._-]{1,249}$")]
GroupName = Annotated[str, Field(min_length=1, max_length=255, pattern=NO_NUL)]
Identifier = Annotated[str, Field(min_length=1, max_length=255, pattern=NO_NUL)]
Key = Annotated[str, Field(pattern=NO_NUL)]
Partition = Annotated[int, Field(ge=0, le=2**31 - 1)]
Offset = Annotated[int, Field(ge=0, le=2**63 - 1)]
ProducerId = Annotated[int, Field(ge=0, le=2**63 - 1)]
Epoch = Annotated[int, Field(ge=0, le=2**31 - 1)]
TimeoutMs = Annotated[int, Field(ge=1, le=2**31 - 1)]
MemberId = Annotated[str, Field(min_length=1, max_length=64, pattern=NO_NUL)]


class Strict(BaseModel):
    """A request body: unknown fields refused, and every value of the JSON type it declares.

    No coercion: ``"3"`` is not 3, ``"true"`` or ``1`` is not ``true``, ``1.0`` is not 1. The
    rights rules read the same validated model the route runs on (app/api/authorize.py), so a
    value that would mean one thing to a rule and another to the route cannot get through.
    Enum fields opt out (``Field(strict=False)``): in strict mode pydantic would take only enum
    instances, never their JSON strings.
    """

    model_config = ConfigDict(extra="forbid", strict=True)


# Milliseconds since the epoch, up to the end of year 9999.
Timestamp = Annotated[int, Field(ge=0, le=253_402_300_799_999)]


class MessageFields(Strict):
    """A message: exactly one of ``value`` (any JSON) and ``value_base64`` (binary)."""

    key: Key | None = None
    value: Any = None
    value_base64: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    partition: Partition | None = None
    tag: Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^|]+$")] | None = Field(
        None,
        description="The message's tag (RocketMQ's): kept as the header rocketmq.tag; share-group receives, "
        "fetches and RocketMQ consumers filter on it ('TagA || TagB')",
    )

    @model_validator(mode="after")
    def _one_value(self) -> MessageFields:
        has_value = "value" in self.model_fields_set
        has_binary = "value_base64" in self.model_fields_set and self.value_base64 is not None
        if has_value == has_binary:
            raise ValueError("give exactly one of 'value' and 'value_base64'")
        return self


class MessageIn(MessageFields):
    """A produced message; it may carry its own timestamp (Kafka's CreateTime), else the broker's clock stamps it."""

    timestamp: Timestamp | None = Field(
        None,
        description="ms since the epoch, kept as given (a replicator keeps the source's); default: the append's time",
    )


@answer_shape
class MessageOut(TypedDict):
    """A fetched message: exactly one of ``value`` and ``value_base64``."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: str | None
    value: NotRequired[Any]
    value_base64: NotRequired[str]
    headers: dict[str, str]


# -- topics ---------------------------------------------------------------------------


class TopicCreate(Strict):
    name: TopicName
    partitions: Annotated[int, Field(ge=1, le=1024)] = 1


@answer_shape
class TopicSummary(TypedDict):
    name: str
    partitions: int


@answer_shape
class TopicList(TypedDict):
    topics: list[TopicSummary]


@answer_shape
class PartitionDescription(TypedDict):
    partition: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    blocking_txn_id: Annotated[
        str | None, Field(description="The open transaction holding the last stable offset back; null when none")
    ]


@answer_shape
class TopicConfigOut(TypedDict):
    retention_ms: Annotated[int | None, Field(description="Set on the topic; null: the broker's default; -1: forever")]
    retention_bytes: Annotated[
        int | None, Field(description="Set on the topic; null: the broker's default; -1: keep forever")
    ]
    effective_retention_ms: Annotated[int | None, Field(description="What retention applies; null: kept forever")]
    effective_retention_bytes: Annotated[
        int | None, Field(description="What retention applies, per partition; null: no limit")
    ]


@answer_shape
class TopicDescription(TypedDict):
    name: str
    partitions: list[PartitionDescription]
    config: TopicConfigOut


RetentionValue = Annotated[int, Field(ge=-1, le=2**63 - 1)]


class TopicAlter(Strict):
    """Absent: unchanged. A retention key set to null goes back to the broker's default; -1 keeps forever."""

    partitions: Annotated[int, Field(ge=1, le=1024, description="partitions are added, never removed")] | None = None
    retention_ms: RetentionValue | None = None
    retention_bytes: RetentionValue | None = None


# -- produce ----------------------------------------------------------------------------


class ProduceRequest(Strict):
    messages: Annotated[list[MessageIn], Field(min_length=1)]


class PartitionProduceRequest(Strict):
    messages: Annotated[list[MessageIn], Field(min_length=1)]
    producer_id: ProducerId | None = None
    producer_epoch: Epoch | None = None
    base_sequence: Annotated[int, Field(ge=0, le=2**31 - 1)] | None = None
    txn_id: Annotated[str, Field(min_length=1, max_length=64, pattern=NO_NUL)] | None = None
    transactional: bool = Field(
        False,
        description="With producer_id and producer_epoch and no txn_id: the batch goes into the producer's "
        "open transaction, which it begins if there is none (Kafka's first send after beginTransaction). "
        "The answer names the transaction in txn_id.",
    )


@answer_shape
class OffsetAssignment(TypedDict):
    partition: int
    offset: int


@answer_shape
class ProduceResponse(TypedDict):
    offsets: list[OffsetAssignment]


@answer_shape
class PartitionProduceResponse(TypedDict):
    offsets: list[OffsetAssignment]
    duplicate: Annotated[bool, Field(description="A retried batch: the offsets it was first written at; nothing new")]
    txn_id: NotRequired[Annotated[str, Field(description="With transactional: the transaction it began or joined")]]


class ProducerInit(Strict):
    transactional_id: Identifier | None = None
    transaction_timeout_ms: TimeoutMs | None = None


@answer_shape
class ProducerIdResponse(TypedDict):
    producer_id: int
    producer_epoch: int


# -- fetch and groups ------------------------------------------------------------------------

Isolation = Literal["read_committed", "read_uncommitted"]


@answer_shape
class FetchResponse(TypedDict):
    messages: list[MessageOut]
    next_offset: int
    high_watermark: int
    last_stable_offset: int


class GroupOffsetIn(Strict):
    topic: TopicName
    partition: Partition
    offset: Offset
    metadata: Annotated[str, Field(max_length=4096, pattern=NO_NUL)] | None = None


class MemberFields(Strict):
    """Who commits: while the group has live members, one of them, with its current epoch (KIP-447)."""

    member_id: MemberId | None = None
    member_epoch: Epoch | None = None

    @model_validator(mode="after")
    def _both_or_neither(self) -> MemberFields:
        if (self.member_id is None) != (self.member_epoch is None):
            raise ValueError("give member_id and member_epoch together, or neither")
        return self


class GroupOffsetsCommit(MemberFields):
    offsets: Annotated[list[GroupOffsetIn], Field(min_length=1)]


@answer_shape
class GroupOffsetsCommitted(TypedDict):
    group: str
    committed: Annotated[int, Field(description="How many offsets were committed")]


@answer_shape
class GroupOffsetOut(TypedDict):
    topic: str
    partition: int
    offset: int
    metadata: str | None
    lag: Annotated[
        int | None, Field(description="To the high watermark, from the offset or from the log start if that is later")
    ]
    log_start_offset: Annotated[int | None, Field(description="The partition's log start offset")]
    below_log_start: Annotated[
        bool,
        Field(
            description="Retention deleted the messages at the committed offset: a fetch there gets 416; "
            "resume from log_start_offset"
        ),
    ]


@answer_shape
class GroupOffsets(TypedDict):
    offsets: list[GroupOffsetOut]


@answer_shape
class ErrorBody(TypedDict):
    code: str
    message: str


@answer_shape
class ErrorResponse(TypedDict):
    error: ErrorBody


@answer_shape
class Status(TypedDict):
    status: str
