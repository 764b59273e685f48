"""Domain records of the half-message store."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NotRequired

from typing_extensions import TypedDict  # pydantic needs typing_extensions' TypedDict before Python 3.12

from half_store.domain.half_state import HalfState
from half_store.domain.records import pickled_as_arguments

# Properties of a half message in RMQ_SYS_TRANS_HALF_TOPIC, named as in RocketMQ.
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_TRANSACTION_ID = "__transactionId__"
PROPERTY_UNIQUE_KEY = "UNIQ_KEY"
PROPERTY_CHECK_IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"


def first_check_at(born_timestamp: int, transaction_timeout_ms: int, check_immunity_ms: int) -> int:
    """When a half message may first be back-checked: after the transaction timeout or its own
    check immunity, whichever is longer. Before that it is skipped without spending a check
    (RocketMQ #8311 spent them)."""
    return born_timestamp + max(transaction_timeout_ms, check_immunity_ms)


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class Resolution:
    state: HalfState
    topic: str | None
    partition: int | None
    offset: int | None
    resolved_by: str
    resolved_at: int


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class HalfMessage:
    """A half message's index entry: where it lives and where it stands."""

    message_id: str
    half_offset: int
    producer_group: str
    transaction_id: str
    topic: str
    partition: int
    born_timestamp: int
    check_immunity_ms: int
    check_times: int
    next_check_at: int | None
    resolution: Resolution | None = None

    @property
    def state(self) -> HalfState:
        return self.resolution.state if self.resolution else HalfState.PREPARED


@dataclass(frozen=True, slots=True)
class Listener:
    producer_group: str
    instance_id: str
    callback_url: str | None
    secret: str | None
    ttl_seconds: int
    heartbeat_at: int


class CheckAnswer(StrEnum):
    """What one back-check got: the listener's answer, or why there was none."""

    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"
    ERROR = "ERROR"  # the call failed, the listener answered with an error, or there was no live listener
    TIMEOUT = "TIMEOUT"  # no answer in time (a callback's timeout, or a poller's lease)


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class CheckRecord:
    """One back-check in a half message's history; ``answer`` is None while it is awaited."""

    at_ms: int
    instance_id: str | None
    answer: CheckAnswer | None
    latency_ms: int | None


@dataclass(frozen=True, slots=True)
class CheckSent:
    """A claimed back-check, for the history: which check of the message and whom it went to."""

    message_id: str
    number: int  # the message's check_times after this check
    instance_id: str | None


class CheckPayload(TypedDict):
    """A back-check: what the checker posts to a listener and a polling producer receives.

    Exactly one of ``value`` and ``value_base64``, as in a fetched message.
    """

    message_id: str
    transaction_id: str
    producer_group: str
    topic: str
    key: str | None
    headers: dict[str, str]
    check_times: int
    born_timestamp: int
    value: NotRequired[Any]
    value_base64: NotRequired[str]
