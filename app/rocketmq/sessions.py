"""The RocketMQ clients connected to this broker process: who they are, what they publish and consume.

A session is keyed by the client id every call carries (``x-mq-client-id``). Heartbeats
keep it alive; the Telemetry stream, while open, is how the broker reaches the client (the
settings answer, back-checks). Settings name what a client does: a producer's topics, a
consumer's group, subscriptions and whether the group is FIFO. Nothing here is stored:
a session lives as long as its client talks to this process.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from app.metrics import ROCKETMQ_SESSIONS
from half_store.domain.rocketmq_records import ClientSessionRecord

CLOSE = object()  # put in a stream's outbox to end it


@dataclass
class ClientSession:
    client_id: str
    principal: str
    client_type: str = "CLIENT_TYPE_UNSPECIFIED"
    language: str = ""
    version: str = ""
    namespace: str = ""
    topics: frozenset[str] = frozenset()  # a producer's publishing topics
    group: str | None = None  # a consumer's group
    subscriptions: dict[str, str] = field(default_factory=dict)  # topic -> filter expression
    fifo: bool = False
    last_seen: float = field(default_factory=time.monotonic)
    last_seen_ms: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    connected_ms: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    outbox: asyncio.Queue[Any] | None = None  # the open Telemetry stream's commands to the client

    @property
    def streaming(self) -> bool:
        return self.outbox is not None

    def send(self, command: Any) -> bool:
        """Queue a command on the Telemetry stream; False when the client has none open."""
        if self.outbox is None:
            return False
        self.outbox.put_nowait(command)
        return True


class Sessions:
    def __init__(self, timeout_seconds: float) -> None:
        self.timeout_seconds = timeout_seconds
        self._sessions: dict[str, ClientSession] = {}
        self._turns = itertools.count()

    def touch(self, client_id: str, principal: str) -> ClientSession:
        """The client's session, made if new, marked as seen now."""
        session = self._sessions.get(client_id)
        if session is None:
            session = self._sessions[client_id] = ClientSession(client_id, principal)
            ROCKETMQ_SESSIONS.set(len(self._sessions))
        session.last_seen = time.monotonic()
        session.last_seen_ms = time.time_ns() // 1_000_000
        session.principal = principal
        return session

    def get(self, client_id: str) -> ClientSession | None:
        return self._sessions.get(client_id)

    def remove(self, client_id: str) -> None:
        session = self._sessions.pop(client_id, None)
        if session is not None and session.outbox is not None:
            session.outbox.put_nowait(CLOSE)
        ROCKETMQ_SESSIONS.set(len(self._sessions))

    def expire(self) -> list[str]:
        """Forget sessions without an open stream whose client has not been heard from in time."""
        now = time.monotonic()
        gone = [
            s.client_id
            for s in self._sessions.values()
            if not s.streaming and now - s.last_seen > self.timeout_seconds
        ]
        for client_id in gone:
            self.remove(client_id)
        return gone

    def __iter__(self) -> Iterator[ClientSession]:
        return iter(list(self._sessions.values()))

    def __len__(self) -> int:
        return len(self._sessions)

    def records(self) -> tuple[ClientSessionRecord, ...]:
        """The sessions as the registry keeps them (for the admin API and the console)."""
        return tuple(
            ClientSessionRecord(
                s.client_id, s.client_type, s.language, s.version, s.principal, tuple(sorted(s.topics)), s.group,
                tuple(sorted(s.subscriptions.items())), s.streaming, s.connected_ms, s.last_seen_ms,
            )
            for s in self._sessions.values()
        )

    def publishers(self) -> dict[str, list[ClientSession]]:
        """topic -> the producers with an open stream whose settings publish it."""
        found: dict[str, list[ClientSession]] = {}
        for session in self._sessions.values():
            if session.streaming and session.client_type == "PRODUCER":
                for topic in session.topics:
                    found.setdefault(topic, []).append(session)
        return found

    def pick(self, candidates: list[ClientSession]) -> ClientSession:
        """One of ``candidates``, in turn, so back-checks spread over a topic's producers."""
        return candidates[next(self._turns) % len(candidates)]
