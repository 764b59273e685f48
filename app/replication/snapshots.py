"""Snapshots: pairs of positions known to be equal on the source and the target, and offset translation.

A snapshot ``(source, target)`` says: every copied source message below offset ``source``
is on the target below offset ``target``, and every source message at or after
``source`` that gets copied lands at or after ``target``. The replicator makes one at
each committed batch (the source's next offset to read, the target's next offset after
the batch's last copy) in the same target transaction that writes the batch, so a
snapshot never describes copies that did not commit.

Translating a consumer group's committed source offset ``c`` takes the latest snapshot
with ``source <= c`` and answers its ``target``. Since positions only grow on both
sides, that target is at or below the target position of ``c``: a consumer that fails
over skips nothing, and it re-reads the copies of source offsets ``[source, c)``, at
most what was copied between two snapshots.

The history is kept with the replicator's progress, in the metadata of its own group's
offsets on the target (:func:`encode_history`), so it is bounded: the newest
:data:`DENSE_SNAPSHOTS` are kept one per snapshot interval, older ones one per power of
two of distance from the newest (Kafka MirrorMaker 2's offset-sync store thins the same
way), at most :data:`MAX_SNAPSHOTS` in all. Nothing here does I/O.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass

DENSE_SNAPSHOTS = 32
"""The newest snapshots, one per snapshot interval: translation within them re-reads at most one interval."""

MAX_SNAPSHOTS = 48
"""Snapshots kept per partition; with 19-digit offsets they still fit the 4096-character offset metadata."""

METADATA_LIMIT = 4096
"""The broker's limit on a group offset's metadata."""

FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Source offset ``source`` corresponds to target offset ``target`` (both next offsets to read)."""

    source: int
    target: int
    at_ms: int


History = tuple[Snapshot, ...]
"""A partition's snapshots, oldest first; sources and targets never decrease. The last is the current position."""


class CorruptProgress(ValueError):
    """A progress record the replicator cannot read (another tool wrote to its group)."""


def record(history: History, current: Snapshot, interval_ms: int) -> History:
    """``history`` after a batch committed at position ``current``.

    The last snapshot always follows the current position; the one before it becomes
    fixed once ``interval_ms`` has passed since the previous fixed one, so fixed
    snapshots are one interval apart.
    """
    if history and (current.source < history[-1].source or current.target < history[-1].target):
        raise ValueError(f"positions went backwards: {history[-1]} then {current}")
    if len(history) >= 2 and current.at_ms - history[-2].at_ms < interval_ms:
        return thin((*history[:-1], current))
    return thin((*history, current))


def thin(history: History) -> History:
    """The newest :data:`DENSE_SNAPSHOTS`, then the newest per power-of-two distance; :data:`MAX_SNAPSHOTS` in all."""
    if len(history) <= DENSE_SNAPSHOTS:
        return history
    newest = history[-1].source
    dense = history[-DENSE_SNAPSHOTS:]
    kept: list[Snapshot] = []
    seen_buckets: set[int] = set()
    for snapshot in reversed(history[:-DENSE_SNAPSHOTS]):
        bucket = (newest - snapshot.source).bit_length()
        if bucket not in seen_buckets:
            seen_buckets.add(bucket)
            kept.append(snapshot)
    older = tuple(reversed(kept))[-(MAX_SNAPSHOTS - DENSE_SNAPSHOTS) :]
    return older + dense


def translate(history: Sequence[Snapshot], source_offset: int) -> int | None:
    """The target offset for committed source offset ``source_offset``, or ``None`` without a snapshot at or below it.

    The answer never lies past the target position of ``source_offset``.
    """
    index = bisect.bisect_right([s.source for s in history], source_offset)
    if index == 0:
        return None
    return history[index - 1].target


def encode_history(history: History) -> str:
    """The offset metadata that stores ``history`` (the group's offset itself is ``history[-1].target``)."""
    kept = history
    while True:
        text = json.dumps(
            {
                "v": FORMAT_VERSION,
                "source": kept[-1].source,
                "snapshots": [[s.source, s.target, s.at_ms] for s in kept],
            },
            separators=(",", ":"),
        )
        if len(text) <= METADATA_LIMIT or len(kept) == 1:
            return text
        kept = kept[1:]  # only with absurd offsets: drop the oldest until it fits


def decode_history(metadata: str | None, committed_offset: int) -> History:
    """The history a replicator stored; ``committed_offset`` must be its current target position."""
    try:
        body = json.loads(metadata or "")
        if body.get("v") != FORMAT_VERSION:
            raise CorruptProgress(f"unknown progress format {body.get('v')!r}")
        history = tuple(Snapshot(int(s), int(t), int(at)) for s, t, at in body["snapshots"])
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise CorruptProgress(f"not a replicator's progress record: {metadata!r:.200}") from error
    if not history or history[-1].target != committed_offset or history[-1].source != body.get("source"):
        raise CorruptProgress(
            f"progress record does not match the committed offset {committed_offset}: {metadata!r:.200}"
        )
    for before, after in itertools.pairwise(history):
        if after.source < before.source or after.target < before.target:
            raise CorruptProgress(f"progress record goes backwards: {metadata!r:.200}")
    return history
