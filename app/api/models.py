"""Request and response bodies of the v1 API (they are also its OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from half_store.domain.constants import TOPIC_NAME_PATTERN

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


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# Milliseconds since the epoch, up to the end of year 9999.
Timestamp = Annotated[int, Field(ge=0, le=253_402_300_799_999)]


class MessageFields(Strict):
    """A message: exactly one of ``value`` (any JSON) and ``value_base64`` (binary)."""

    key: Key | None = None
    value: Any = None
    value_base64: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    partition: Partition | None = None

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


class MessageOut(BaseModel):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: str | None
    value: Any = None
    value_base64: str | None = None
    headers: dict[str, str]


# -- topics ---------------------------------------------------------------------------


class TopicCreate(Strict):
    name: TopicName
    partitions: Annotated[int, Field(ge=1, le=1024)] = 1


class TopicSummary(BaseModel):
    name: str
    partitions: int


class TopicList(BaseModel):
    topics: list[TopicSummary]


class PartitionDescription(BaseModel):
    partition: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int


class TopicDescription(BaseModel):
    name: str
    partitions: list[PartitionDescription]


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


class OffsetAssignment(BaseModel):
    partition: int
    offset: int


class ProduceResponse(BaseModel):
    offsets: list[OffsetAssignment]
    duplicate: bool = False
    txn_id: str | None = Field(None, description="With transactional: the transaction the batch began or joined")


class ProducerInit(Strict):
    transactional_id: Identifier | None = None
    transaction_timeout_ms: TimeoutMs | None = None


class ProducerIdResponse(BaseModel):
    producer_id: int
    producer_epoch: int


# -- fetch and groups ------------------------------------------------------------------------

Isolation = Literal["read_committed", "read_uncommitted"]


class FetchResponse(BaseModel):
    messages: list[MessageOut]
    next_offset: int
    high_watermark: int
    last_stable_offset: int


class GroupOffsetIn(Strict):
    topic: TopicName
    partition: Partition
    offset: Offset
    metadata: Annotated[str, Field(max_length=4096, pattern=NO_NUL)] | None = None


class GroupOffsetsCommit(Strict):
    offsets: Annotated[list[GroupOffsetIn], Field(min_length=1)]


class GroupOffsetOut(BaseModel):
    topic: str
    partition: int
    offset: int
    metadata: str | None
    lag: int | None


class GroupOffsets(BaseModel):
    offsets: list[GroupOffsetOut]


class ErrorBody(BaseModel):
    code: str
    message: str


class ErrorResponse(BaseModel):
    error: ErrorBody
