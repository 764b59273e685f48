"""Records of the operations API: topic configuration, transaction listings, checker status."""

from __future__ import annotations

from dataclasses import dataclass

from half_store.domain.records import PartitionState, Topic
from half_store.domain.txn_state import TxnState

# A retention value that means "keep forever", whatever the broker's default (Kafka's -1).
KEEP_FOREVER = -1
RETENTION_KEYS = ("retention_ms", "retention_bytes")


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic's own settings: None means the broker's default, ``KEEP_FOREVER`` means no limit."""

    retention_ms: int | None = None
    retention_bytes: int | None = None

    def effective(self, default_ms: int | None, default_bytes: int | None) -> TopicConfig:
        """The limits retention applies: None where there is none (kept forever)."""
        return TopicConfig(_effective(self.retention_ms, default_ms), _effective(self.retention_bytes, default_bytes))

    @property
    def retains(self) -> bool:
        """Whether anything is ever deleted by these (effective) limits."""
        return self.retention_ms is not None or self.retention_bytes is not None


def _effective(own: int | None, default: int | None) -> int | None:
    value = default if own is None else own
    return None if value is None or value == KEEP_FOREVER else value


@dataclass(frozen=True, slots=True)
class TopicAlteration:
    """A PATCH of a topic. ``config`` holds only the keys given; a None value resets the key to the default."""

    partitions: int | None = None
    config: tuple[tuple[str, int | None], ...] = ()


@dataclass(frozen=True, slots=True)
class TopicDetails:
    topic: Topic
    partitions: list[PartitionState]
    config: TopicConfig  # as set on the topic
    effective: TopicConfig  # what retention applies


@dataclass(frozen=True, slots=True)
class TransactionFilter:
    states: tuple[TxnState, ...] = ()  # empty: any
    older_than_ms: int | None = None  # started at least this long ago
    transactional_id: str | None = None
    limit: int = 1000


@dataclass(frozen=True, slots=True)
class TransactionListing:
    txn_id: str
    transactional_id: str | None
    producer_id: int | None
    producer_epoch: int | None
    state: TxnState
    partitions: list[tuple[str, int]]
    started_ms: int
    last_state_change_ms: int
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class ProducerGroupStatus:
    producer_group: str
    prepared: int
    oldest_born_ms: int | None
    live_listeners: int


@dataclass(frozen=True, slots=True)
class CheckerStatus:
    leader: str | None  # the lease holder, None when the lease has lapsed
    lease_expires_ms: int | None
    last_round_ms: int | None  # when the last back-check round finished
    last_retention_ms: int | None  # when the last retention round finished
    prepared: int
    groups: list[ProducerGroupStatus]
