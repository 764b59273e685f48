"""SendMessage: NORMAL and FIFO messages into the log, TRANSACTION ones as half messages, DELAY ones scheduled."""

from __future__ import annotations

from typing import Any

from app.handle import BrokerHandle
from app.rocketmq.context import CallContext
from app.rocketmq.messages import Inbound, inbound
from app.rocketmq.protocol import new
from app.rocketmq.status import RocketMQError, status, status_of
from half_store.domain.access import Operation, ResourceType
from half_store.domain.errors import BrokerError
from half_store.domain.message_limits import MessageLimits

# A RocketMQ 5 producer names no producer group; its transaction messages belong to this
# group of their topic, so back-checks go to the producers that publish the topic.
PRODUCER_GROUP_PREFIX = "rmq."


def producer_group_of(topic: str) -> str:
    return PRODUCER_GROUP_PREFIX + topic


class Sending:
    def __init__(self, broker: BrokerHandle, limits: MessageLimits) -> None:
        self.broker = broker
        self.limits = limits

    async def send_message(self, request: Any, ctx: CallContext) -> Any:
        if not request.messages:
            raise RocketMQError("BAD_REQUEST", "SendMessage carries no message")
        entries = []
        plain: list[tuple[int, Inbound]] = []  # NORMAL and FIFO messages, appended together
        results: dict[int, Any] = {}
        for index, message in enumerate(request.messages):
            try:
                found = inbound(message, self.limits)
                ctx.require(ResourceType.TOPIC, Operation.WRITE, found.topic)
            except (BrokerError, RocketMQError) as error:
                results[index] = new("SendResultEntry", status=status_of(error))
                continue
            if found.message_type == "TRANSACTION":
                results[index] = await self._prepare(found, ctx)
            elif found.delivery_ms is not None:
                results[index] = await self._schedule(found)
            else:
                plain.append((index, found))
        for topic in sorted({found.topic for _, found in plain}):
            batch = [(index, found) for index, found in plain if found.topic == topic]
            results.update(await self._append(topic, batch))
        entries = [results[index] for index in range(len(request.messages))]
        return new("SendMessageResponse", status=_overall(entries), entries=entries)

    async def _append(self, topic: str, batch: list[tuple[int, Inbound]]) -> dict[int, Any]:
        try:
            placed = await self.broker.log.produce(topic, [found.record for _, found in batch], [None] * len(batch))
        except BrokerError as error:
            return {index: new("SendResultEntry", status=status_of(error)) for index, _ in batch}
        return {
            index: new("SendResultEntry", status=status(), message_id=found.message_id, offset=offset)
            for (index, found), (_, offset) in zip(batch, placed, strict=True)
        }

    async def _prepare(self, found: Inbound, ctx: CallContext) -> Any:
        group = producer_group_of(found.topic)
        try:
            ctx.require(ResourceType.PRODUCER_GROUP, Operation.WRITE, group)
            # The client's message id is the transaction id: a resent prepare finds the first one.
            prepared = await self.broker.halves.prepare(
                found.topic,
                group,
                found.record,
                partition=None,
                transaction_id=found.message_id,
                check_immunity_seconds=found.recovery_seconds,
            )
        except BrokerError as error:
            return new("SendResultEntry", status=status_of(error))
        return new(
            "SendResultEntry", status=status(), message_id=found.message_id, transaction_id=prepared.half.message_id
        )

    async def _schedule(self, found: Inbound) -> Any:
        assert found.delivery_ms is not None
        try:
            await self.broker.delays.schedule(found.topic, [found.record], [found.delivery_ms], [None])
        except BrokerError as error:
            return new("SendResultEntry", status=status_of(error))
        return new("SendResultEntry", status=status(), message_id=found.message_id)


def _overall(entries: list[Any]) -> Any:
    """The answer's status: the entries' one status, or MULTIPLE_RESULTS when they differ."""
    codes = {entry.status.code for entry in entries}
    if len(codes) == 1:
        return entries[0].status
    return status("MULTIPLE_RESULTS", "the messages had different outcomes; see each entry")
