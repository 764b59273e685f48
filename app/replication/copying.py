"""What one copy looks like, and how copies are cut into requests (pure functions, no I/O)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

ORIGIN_CLUSTER = "halfmq-origin-cluster"
"""The cluster where the message was first produced; a replicator never copies a message back there."""

ORIGIN_OFFSET = "halfmq-origin-offset"
"""Its offset there (same topic, same partition)."""

SKIPPED_LOOP = "loop"
"""A message that came from the target cluster in the first place."""

SKIPPED_RETENTION = "retention"
"""Source offsets deleted by retention before they were copied."""

MAX_REQUEST_BYTES = 8 * 1024 * 1024
"""Copies per produce request, by size (the broker's own limit defaults to 64 MiB)."""

_IDENTIFIER_LIMIT = 255


def copy_of(message: Mapping[str, Any], source_cluster: str, target_cluster: str) -> dict[str, Any] | None:
    """The produce form of fetched ``message`` for the target, or ``None`` if it must not be copied there.

    Key, value (JSON or binary, as it came), headers and timestamp are kept. A message
    that already names its origin (it was copied before, from a third cluster) keeps it,
    so a message is never copied back to where it was produced, whatever the topology.
    """
    headers: dict[str, str] = dict(message.get("headers") or {})
    origin = headers.get(ORIGIN_CLUSTER)
    if origin == target_cluster:
        return None
    if origin is None:
        headers[ORIGIN_CLUSTER] = source_cluster
        headers[ORIGIN_OFFSET] = str(message["offset"])
    copy: dict[str, Any] = {"key": message.get("key"), "headers": headers, "timestamp": message["timestamp"]}
    if message.get("value_base64") is not None:
        copy["value_base64"] = message["value_base64"]
    else:
        copy["value"] = message.get("value")
    return copy


def encoded_copies(messages: Sequence[Mapping[str, Any]], source_cluster: str, target_cluster: str) -> list[bytes]:
    """The JSON of each message's copy (:func:`copy_of`), leaving out the ones the target must not get."""
    copies = (copy_of(message, source_cluster, target_cluster) for message in messages)
    return [orjson.dumps(copy) for copy in copies if copy is not None]


def requests_of(
    copies: Sequence[bytes], max_messages: int, max_bytes: int = MAX_REQUEST_BYTES
) -> Iterator[Sequence[bytes]]:
    """Consecutive runs of encoded ``copies``, each small enough for one produce request (at least one copy each)."""
    start, size = 0, 0
    for index, copy in enumerate(copies):
        if index > start and (index - start >= max_messages or size + len(copy) > max_bytes):
            yield copies[start:index]
            start, size = index, 0
        size += len(copy) + 1
    if start < len(copies):
        yield copies[start:]


def _named(prefix: str, suffix: str) -> str:
    name = f"{prefix}.{suffix}"
    if len(name) <= _IDENTIFIER_LIMIT:
        return name
    return f"{prefix}.{hashlib.sha256(suffix.encode()).hexdigest()[:32]}"


def progress_group(source_cluster: str) -> str:
    """The replicator's own group on the target: per (topic, partition), the target position and the snapshots."""
    return f"halfmq-replicator.{source_cluster}"


def transactional_id(source_cluster: str, topic: str) -> str:
    """One per source cluster and topic: a second replicator of the same topic fences the first."""
    return _named(f"halfmq-replicator.{source_cluster}", topic)
