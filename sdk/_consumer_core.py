"""Sans-I/O consumer bookkeeping shared by :class:`~sdk.Consumer` and :class:`~sdk.AsyncConsumer`.

Positions, the fetch rotation, the commit snapshot and the delivery guarantee live here
(group membership in :mod:`sdk._membership`); the two consumer classes only perform the
HTTP requests these objects ask for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sdk._membership import DELIVERY_GUARANTEES
from sdk.calls import TopicPartition
from sdk.errors import IllegalStateError
from sdk.message import Message
from sdk.models import CommittedOffset, FetchResult, TopicMetadata

ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
OFFSET_RESETS = ("earliest", "latest")
MAX_BROKER_WAIT_MS = 30_000  # the broker's default max_fetch_wait_ms


def normalise_topics(topics: str | Iterable[str]) -> list[str]:
    """Accept ``"a"``, ``"a,b"`` or an iterable of names."""
    if isinstance(topics, str):
        return [t.strip() for t in topics.split(",") if t.strip()]
    return list(topics)


class ConsumerCore:
    """What to fetch next, and what to commit.

    A consumer returns every message it fetched, so "position" (the next offset to
    fetch) is also "consumed up to"; :meth:`uncommitted` is what ``commit()`` sends.
    """

    def __init__(
        self,
        group: str,
        topics: str | Iterable[str],
        *,
        partitions: Iterable[TopicPartition] | None,
        isolation_level: str,
        auto_offset_reset: str,
        delivery: str = "at_least_once",
        auto_commit: bool = True,
        tag: str | None = None,
    ) -> None:
        self.tag = tag  # a tag filter: fetches return only what it keeps
        if delivery not in DELIVERY_GUARANTEES:
            raise ValueError(f"delivery must be one of {DELIVERY_GUARANTEES}, not {delivery!r}")
        if delivery == "exactly_once" and isolation_level != "read_committed":
            raise ValueError("exactly_once reads its input read_committed: an aborted input must never be processed")
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation_level must be one of {ISOLATION_LEVELS}, not {isolation_level!r}")
        if auto_offset_reset not in OFFSET_RESETS:
            raise ValueError(f"auto_offset_reset must be one of {OFFSET_RESETS}, not {auto_offset_reset!r}")
        self.group = group
        self.topics = normalise_topics(topics)
        self.requested_partitions = list(partitions) if partitions is not None else None
        self.isolation_level = isolation_level
        self.auto_offset_reset = auto_offset_reset
        self.delivery = delivery
        self.auto_commit = auto_commit
        self.positions: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.assigned = False
        self.closed = False
        self._rotation = 0

    def check_open(self) -> None:
        """Raise if the consumer was closed."""
        if self.closed:
            raise IllegalStateError("consumer is closed")

    def assignment_for(self, metadata: Sequence[TopicMetadata]) -> list[TopicPartition]:
        """All partitions of the subscribed topics, or the ones asked for explicitly."""
        if self.requested_partitions is not None:
            return self.requested_partitions
        return [(m.name, p.partition) for m in metadata for p in m.partitions]

    def assign(
        self,
        partitions: Sequence[TopicPartition],
        metadata: Mapping[str, TopicMetadata],
        committed: Iterable[CommittedOffset],
    ) -> None:
        """Start each partition at the group's committed offset, else earliest/latest."""
        by_tp = {(c.topic, c.partition): c.offset for c in committed}
        for tp in partitions:
            if tp in by_tp:
                self.positions[tp] = by_tp[tp]
                self.committed[tp] = by_tp[tp]
            else:
                self.positions[tp] = self.reset_offset(tp, metadata[tp[0]])
        self.assigned = True

    def reset_offset(self, tp: TopicPartition, metadata: TopicMetadata) -> int:
        """Where to start when there is no (valid) committed offset."""
        for p in metadata.partitions:
            if p.partition == tp[1]:
                return p.log_start_offset if self.auto_offset_reset == "earliest" else p.high_watermark
        raise IllegalStateError(f"topic {tp[0]!r} has no partition {tp[1]}")

    def rotation(self) -> list[TopicPartition]:
        """Partitions in fetch order; the start moves every call so none starves."""
        tps = list(self.positions)
        if not tps:
            return []
        start = self._rotation % len(tps)
        self._rotation += 1
        return tps[start:] + tps[:start]

    def record(self, tp: TopicPartition, result: FetchResult) -> list[Message]:
        """A fetch came back: always continue from ``next_offset`` (it skips aborted data)."""
        if tp in self.positions:
            self.positions[tp] = max(self.positions[tp], result.next_offset)
        return result.messages

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Fetch ``tp`` from ``offset`` next."""
        if tp not in self.positions:
            raise IllegalStateError(f"{tp} is not assigned to this consumer")
        self.positions[tp] = offset

    def uncommitted(self) -> dict[TopicPartition, int]:
        """Positions that moved since the last commit."""
        return {tp: o for tp, o in self.positions.items() if self.committed.get(tp) != o}

    def mark_committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """``offsets`` are now the group's committed offsets."""
        self.committed.update(offsets)

    def drop(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop reading ``partitions`` (given up, or lost with the membership)."""
        for tp in partitions:
            self.positions.pop(tp, None)
            self.committed.pop(tp, None)

    def restore(self, snapshot: Mapping[TopicPartition, int]) -> None:
        """Put the positions of still-assigned partitions back to ``snapshot`` (a batch not handed out)."""
        for tp, offset in snapshot.items():
            if tp in self.positions:
                self.positions[tp] = offset

    @property
    def commits_before_handing_out(self) -> bool:
        """at-most-once: a message is handed out only once its offset is committed."""
        return self.delivery == "at_most_once"

    @property
    def commits_at_poll(self) -> bool:
        """at-least-once with auto-commit: each poll first commits what the previous polls returned."""
        return self.delivery == "at_least_once" and self.auto_commit

    @property
    def commits_before_giving_up(self) -> bool:
        """at-least-once: a revoked partition's returned messages are committed before it is let go
        (at-most-once committed them already; exactly-once commits with its transactions)."""
        return self.delivery == "at_least_once"
