"""Delay messages: a message that no reader sees before its delivery time."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from half_store.domain.records import pickled_as_arguments


class DelayState(StrEnum):
    WAITING = "WAITING"  # in RMQ_SYS_SCHEDULE_TOPIC
    DELIVERED = "DELIVERED"  # moved into its topic (or dropped: its topic was deleted meanwhile)


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class ScheduledMessage:
    message_id: str
    topic: str
    partition: int
    deliver_at: int  # ms since the epoch
    created_at: int
    delivered_at: int | None = None
    offset: int | None = None  # where it went in its topic, once delivered

    @property
    def state(self) -> DelayState:
        return DelayState.WAITING if self.delivered_at is None else DelayState.DELIVERED


@dataclass(frozen=True, slots=True)
class DueMessage:
    """A waiting message whose time has come, as the delivery job reads it."""

    message_id: str
    schedule_offset: int
    topic_id: int
    partition: int
