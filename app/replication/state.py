"""What the replicator knows about its own progress, shared by its threads.

The copiers write it (positions, snapshots, what they saw of the source), the
subscription sync reads the snapshots from it, and the status output and the Prometheus
collector render it. Readers get frozen views, computed at the moment they ask, so a
lag in milliseconds or a snapshot's age is always current.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.replication.snapshots import History, Snapshot


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class _Partition:
    history: History = ()
    source_end: int | None = None  # the source's last stable offset, as the last fetch saw it
    next_timestamp_ms: int | None = None  # timestamp of the next message to copy, when a fetch has shown it
    copied: int = 0
    skipped: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One partition's replication, as of ``at_ms``."""

    topic: str
    partition: int
    source_position: int | None
    target_position: int | None
    source_end: int | None
    lag_messages: int | None
    lag_ms: int | None
    snapshot_age_ms: int | None
    snapshots: int
    copied: int
    skipped: dict[str, int]


@dataclass
class _Group:
    synced: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    last_sync_ms: int | None = None
    note: str = "waiting"


@dataclass(frozen=True, slots=True)
class GroupView:
    group: str
    synced: int
    skipped: dict[str, int]
    last_sync_ms: int | None
    note: str


class ReplicationState:
    """Thread-safe; every method is short."""

    def __init__(self, source_cluster: str = "?", target_cluster: str = "?") -> None:
        self.source_cluster = source_cluster
        self.target_cluster = target_cluster
        self._lock = threading.Lock()
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._groups: dict[str, _Group] = {}
        self.retries: dict[str, int] = {"source": 0, "target": 0}

    # -- written by the copiers ------------------------------------------------------------

    def track(self, topic: str, partitions: Iterable[int]) -> None:
        with self._lock:
            for partition in partitions:
                self._partitions.setdefault((topic, partition), _Partition())

    def loaded(self, topic: str, partition: int, history: History) -> None:
        """The progress a copier read back from the target (at start, and after every restart of its session)."""
        with self._lock:
            self._partitions.setdefault((topic, partition), _Partition()).history = history

    def fetched(self, topic: str, partition: int, source_end: int, first_timestamp_ms: int | None) -> None:
        """A fetch saw the source up to ``source_end``; ``first_timestamp_ms`` of its first message, if any."""
        with self._lock:
            part = self._partitions.setdefault((topic, partition), _Partition())
            part.source_end = source_end
            if first_timestamp_ms is not None and part.next_timestamp_ms is None:
                part.next_timestamp_ms = first_timestamp_ms

    def committed(
        self,
        topic: str,
        partition: int,
        history: History,
        copied: int,
        skipped: dict[str, int],
        next_timestamp_ms: int | None,
    ) -> None:
        """A batch committed: the new history, what it copied and skipped, the next message's timestamp if known."""
        with self._lock:
            part = self._partitions.setdefault((topic, partition), _Partition())
            part.history = history
            part.copied += copied
            for reason, count in skipped.items():
                part.skipped[reason] = part.skipped.get(reason, 0) + count
            part.next_timestamp_ms = next_timestamp_ms

    def history(self, topic: str, partition: int) -> History:
        with self._lock:
            part = self._partitions.get((topic, partition))
            return part.history if part else ()

    # -- written by the subscription sync -------------------------------------------------

    def group_synced(self, group: str, synced: int, skipped: dict[str, int], note: str) -> None:
        with self._lock:
            entry = self._groups.setdefault(group, _Group())
            entry.synced += synced
            for reason, count in skipped.items():
                entry.skipped[reason] = entry.skipped.get(reason, 0) + count
            entry.last_sync_ms = now_ms()
            entry.note = note

    def retried(self, side: str) -> None:
        with self._lock:
            self.retries[side] = self.retries.get(side, 0) + 1

    # -- read by the status output and the metrics ---------------------------------------

    def partitions(self) -> list[PartitionView]:
        now = now_ms()
        with self._lock:
            return [_view(topic, partition, part, now) for (topic, partition), part in sorted(self._partitions.items())]

    def groups(self) -> list[GroupView]:
        with self._lock:
            return [
                GroupView(name, g.synced, dict(g.skipped), g.last_sync_ms, g.note)
                for name, g in sorted(self._groups.items())
            ]


def _view(topic: str, partition: int, part: _Partition, now: int) -> PartitionView:
    current: Snapshot | None = part.history[-1] if part.history else None
    lag: int | None = None
    lag_ms: int | None = None
    age: int | None = None
    if current is not None and part.source_end is not None:
        lag = max(part.source_end - current.source, 0)
        lag_ms = (
            0 if lag == 0 else (max(now - part.next_timestamp_ms, 0) if part.next_timestamp_ms is not None else None)
        )
        # Caught up, the current position pair is exact: nothing needs a newer snapshot.
        age = 0 if lag == 0 else max(now - current.at_ms, 0)
    return PartitionView(
        topic,
        partition,
        current.source if current else None,
        current.target if current else None,
        part.source_end,
        lag,
        lag_ms,
        age,
        len(part.history),
        part.copied,
        dict(part.skipped),
    )
