"""The broker processes on one database, as the shared registry knows them (``brokers``)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from half_store.domain.records import pickled_as_arguments
from half_store.domain.rocketmq_records import ClientSessionRecord


@pickled_as_arguments
@dataclass(frozen=True, slots=True)
class BrokerRecord:
    """One broker process, as its last heartbeat left it: where each of its fronts listens.

    ``kafka_address`` / ``grpc_address`` are None when that front is off in the process.
    """

    instance_id: str
    started_ms: int
    heartbeat_ms: int
    expires_ms: int
    kafka_node_id: int | None
    kafka_address: str | None
    grpc_address: str | None
    rocketmq_sessions: tuple[ClientSessionRecord, ...]


def kafka_node_id(advertised_address: str) -> int:
    """A Kafka listener's node id, derived from its advertised address.

    Kafka clients key their connections by node id. Deriving it from the address (not from
    the process) keeps it when a process restarts in place, so clients reconnect to the
    "same" broker instead of learning a new one; a non-negative int32, as Kafka's are.
    """
    return zlib.crc32(advertised_address.encode()) & 0x7FFFFFFF
