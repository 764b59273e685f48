"""Telemetry: the client's settings in, the broker's settings answer and commands (back-checks) out.

The answer is what the official clients need before they work (the Java client refuses
to start without parts of it): status OK, the client's own settings completed with the
broker's publishing limits (``max_body_size`` = ``HALFMQ_MAX_MESSAGE_BYTES``), an exponential
retry policy (a consumer's max attempts = ``HALFMQ_SHARE_MAX_DELIVERIES``), the receive batch
size and the long-polling timeout. The stream stays open as the session's way to the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from app.rocketmq.context import CallContext
from app.rocketmq.protocol import enum_name, new
from app.rocketmq.receive import DEFAULT_BATCH
from app.rocketmq.send import producer_group_of
from app.rocketmq.sessions import CLOSE, ClientSession, Sessions
from app.rocketmq.status import status
from half_store.domain.access import Operation, ResourceType
from half_store.domain.errors import Forbidden
from half_store.settings import Settings

log = logging.getLogger(__name__)

PRODUCER_MAX_ATTEMPTS = 3
LONG_POLLING_MS = 20_000


class Telemetry:
    def __init__(self, sessions: Sessions, settings: Settings) -> None:
        self.sessions = sessions
        self.settings = settings

    async def telemetry(self, requests: AsyncIterator[Any], ctx: CallContext) -> AsyncIterator[Any]:
        session = self.sessions.touch(ctx.client_id, ctx.principal)
        session.namespace = ctx.namespace
        outbox: asyncio.Queue[Any] = asyncio.Queue()
        if session.outbox is not None:
            session.outbox.put_nowait(CLOSE)  # the client opened a new stream: the old one ends
        session.outbox = outbox
        reading = asyncio.create_task(self._read(requests, session, outbox, ctx))
        try:
            while (command := await outbox.get()) is not CLOSE:
                yield command
        finally:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading
            if session.outbox is outbox:
                session.outbox = None

    async def _read(
        self, requests: AsyncIterator[Any], session: ClientSession, outbox: asyncio.Queue[Any], ctx: CallContext
    ) -> None:
        try:
            async for command in requests:
                self.sessions.touch(session.client_id, session.principal)
                if command.HasField("settings"):
                    self._update(session, command.settings, ctx)
                    outbox.put_nowait(new("TelemetryCommand", status=status(), settings=self.answer(command.settings)))
        except Exception as error:  # noqa: BLE001 - a broken stream ends the session's stream, nothing more
            log.debug("telemetry stream of %s ended: %s", session.client_id, error)
        finally:
            outbox.put_nowait(CLOSE)

    def _update(self, session: ClientSession, settings: Any, ctx: CallContext) -> None:
        session.client_type = enum_name("ClientType", settings.client_type)
        if settings.HasField("user_agent"):
            session.language = enum_name("Language", settings.user_agent.language)
            session.version = settings.user_agent.version
        if settings.HasField("publishing"):
            # Back-checks carry message bodies: only to a client that may write the topic and resolve its group.
            session.topics = frozenset(
                t.name for t in settings.publishing.topics if self._may_publish(ctx, t.name)
            )
        if settings.HasField("subscription"):
            subscription = settings.subscription
            if subscription.group.name:
                session.group = subscription.group.name
            session.subscriptions = {e.topic.name: e.expression.expression for e in subscription.subscriptions}

    @staticmethod
    def _may_publish(ctx: CallContext, topic: str) -> bool:
        try:
            ctx.require(ResourceType.TOPIC, Operation.WRITE, topic)
            ctx.require(ResourceType.PRODUCER_GROUP, Operation.WRITE, producer_group_of(topic))
        except Forbidden:
            return False
        return True

    def answer(self, given: Any) -> Any:
        """The client's settings, completed with the broker's."""
        answer = new("Settings")
        answer.CopyFrom(given)
        client_type = enum_name("ClientType", given.client_type)
        policy = answer.backoff_policy
        policy.Clear()
        if client_type == "PRODUCER":
            policy.max_attempts = given.backoff_policy.max_attempts or PRODUCER_MAX_ATTEMPTS
            policy.exponential_backoff.initial.FromMilliseconds(10)
            policy.exponential_backoff.max.FromMilliseconds(1_000)
            policy.exponential_backoff.multiplier = 2.0
            answer.publishing.max_body_size = self.settings.max_message_bytes
            answer.publishing.validate_message_type = False
        else:
            policy.max_attempts = self.settings.share_max_deliveries
            policy.exponential_backoff.initial.FromMilliseconds(1_000)
            policy.exponential_backoff.max.FromMilliseconds(60_000)
            policy.exponential_backoff.multiplier = 2.0
            subscription = answer.subscription
            subscription.fifo = False  # order is kept by the broker (one message of a group at a time)
            subscription.receive_batch_size = DEFAULT_BATCH
            subscription.long_polling_timeout.FromMilliseconds(min(LONG_POLLING_MS, self.settings.max_fetch_wait_ms))
        if not answer.HasField("request_timeout"):
            answer.request_timeout.FromSeconds(3)
        answer.metric.on = False
        return answer
