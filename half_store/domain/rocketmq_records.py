"""The client sessions a broker process's RocketMQ listener holds (carried by its row in the broker registry)."""

from __future__ import annotations

from dataclasses import dataclass

from half_store.domain.records import pickled_as_arguments


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class ClientSessionRecord:
    """One RocketMQ client connected to one broker process."""

    client_id: str
    client_type: str  # PRODUCER, SIMPLE_CONSUMER, PUSH_CONSUMER, ...
    language: str
    version: str
    principal: str
    topics: tuple[str, ...]  # a producer's publishing topics
    group: str | None  # a consumer's group
    subscriptions: tuple[tuple[str, str], ...]  # (topic, filter expression)
    streaming: bool  # its Telemetry stream is open (back-checks can reach it)
    connected_ms: int
    last_seen_ms: int
