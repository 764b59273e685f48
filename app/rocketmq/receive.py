"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue: share groups.

A RocketMQ consumer group is the halfmq share group of the same name. A receive locks
messages for its ``invisible_duration`` (the share group's lock), an ack ACCEPTs, a
ChangeInvisibleDuration renews the lock (a PushConsumer's nack renews it to its retry
delay: the message comes back after it with one more delivery attempt), a forward to the
dead-letter queue REJECTs into ``DLQ.{group}``. Deliveries past
``HALFMQ_SHARE_MAX_DELIVERIES`` go there too. Messages of one key — a FIFO message's
message group — are handed out one at a time, in order (the share group's ordered
delivery), whichever consumer receives them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from app.handle import BrokerHandle
from app.rocketmq.context import CallContext
from app.rocketmq.messages import duration_ms, outbound
from app.rocketmq.protocol import enum_name, new
from app.rocketmq.status import RocketMQError, status
from half_store.domain.access import Operation, ResourceType
from half_store.domain.constants import SHARE_GROUP_PATTERN
from half_store.domain.records import StoredMessage, now_ms
from half_store.domain.share_records import Acknowledgement, ReceiptResult
from half_store.domain.share_state import AckType
from half_store.settings import Settings

DEFAULT_INVISIBLE_MS = 30_000
DEFAULT_BATCH = 32
_GROUP_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def group_of(request: Any) -> str:
    group: str = request.group.name
    if not group or len(group) > 245 or not set(group) <= _GROUP_CHARS:
        raise RocketMQError("ILLEGAL_CONSUMER_GROUP", f"a consumer group name matches {SHARE_GROUP_PATTERN}")
    return group


class Receiving:
    def __init__(self, broker: BrokerHandle, settings: Settings) -> None:
        self.broker = broker
        self.settings = settings

    def _authorize(self, ctx: CallContext, group: str, topic: str) -> None:
        ctx.require(ResourceType.TOPIC, Operation.READ, topic)
        ctx.require(ResourceType.GROUP, Operation.READ, group)

    def _lock_ms(self, duration: Any) -> int:
        lock_ms = duration_ms(duration)
        if not self.settings.share_min_lock_ms <= lock_ms <= self.settings.share_max_lock_ms:
            raise RocketMQError(
                "ILLEGAL_INVISIBLE_TIME",
                f"an invisible duration lies in {self.settings.share_min_lock_ms}..{self.settings.share_max_lock_ms} ms",
            )
        return lock_ms

    async def receive_message(self, request: Any, ctx: CallContext) -> AsyncIterator[Any]:
        group = group_of(request)
        topic = request.message_queue.topic.name
        self._authorize(ctx, group, topic)
        expression = None
        if request.HasField("filter_expression"):
            kind = enum_name("FilterType", request.filter_expression.type)
            if kind == "SQL":
                raise RocketMQError("NOT_IMPLEMENTED", "SQL92 filters are not supported; use TAG expressions")
            expression = request.filter_expression.expression
        lock_ms = self._lock_ms(request.invisible_duration) if request.HasField("invisible_duration") else DEFAULT_INVISIBLE_MS
        wait_ms = duration_ms(request.long_polling_timeout) if request.HasField("long_polling_timeout") else 0
        wait_ms = max(0, min(wait_ms, self.settings.max_fetch_wait_ms))
        batch = max(1, min(request.batch_size or DEFAULT_BATCH, self.settings.share_max_messages))
        received = await self.broker.shares.receive(
            group, topic, batch, lock_ms, wait_ms, ordered=True, tags=expression
        )
        if not received.messages:
            yield new("ReceiveMessageResponse", status=status("MESSAGE_NOT_FOUND", "no new message"))
            return
        yield new("ReceiveMessageResponse", status=status())
        # When the broker handed the messages out: the clients measure delivery latency from it
        # (the Python client's PushConsumer fails every message without it).
        delivered = new("ReceiveMessageResponse")
        delivered.delivery_timestamp.FromMilliseconds(now_ms())
        yield delivered
        namespace = request.message_queue.topic.resource_namespace
        for message in received.messages:
            yield new(
                "ReceiveMessageResponse",
                message=outbound(
                    StoredMessage(*message[:8]), namespace, receipt=message.receipt, delivery_attempt=message.delivery_count,
                    invisible_ms=lock_ms,
                ),
            )

    async def ack_message(self, request: Any, ctx: CallContext) -> Any:
        group = group_of(request)
        self._authorize(ctx, group, request.topic.name)
        if not request.entries:
            raise RocketMQError("BAD_REQUEST", "AckMessage carries no entry")
        acks = [Acknowledgement(entry.receipt_handle, AckType.ACCEPT) for entry in request.entries]
        results = await self.broker.shares.acknowledge(group, acks)
        entries = [
            new("AckMessageResultEntry", message_id=entry.message_id, receipt_handle=entry.receipt_handle,
                status=_receipt_status(result))
            for entry, result in zip(request.entries, results, strict=True)
        ]
        codes = {entry.status.code for entry in entries}
        overall = entries[0].status if len(codes) == 1 else status("MULTIPLE_RESULTS", "see each entry")
        return new("AckMessageResponse", status=overall, entries=entries)

    async def change_invisible_duration(self, request: Any, ctx: CallContext) -> Any:
        group = group_of(request)
        self._authorize(ctx, group, request.topic.name)
        lock_ms = self._lock_ms(request.invisible_duration)
        [result] = await self.broker.shares.extend(group, [request.receipt_handle], lock_ms)
        return new(
            "ChangeInvisibleDurationResponse", status=_receipt_status(result), receipt_handle=request.receipt_handle
        )

    async def forward_message_to_dead_letter_queue(self, request: Any, ctx: CallContext) -> Any:
        group = group_of(request)
        self._authorize(ctx, group, request.topic.name)
        [result] = await self.broker.shares.acknowledge(group, [Acknowledgement(request.receipt_handle, AckType.REJECT)])
        return new("ForwardMessageToDeadLetterQueueResponse", status=_receipt_status(result))


def _receipt_status(result: ReceiptResult) -> Any:
    if result.ok:
        return status()
    return status("INVALID_RECEIPT_HANDLE", f"{result.error}: the receipt no longer holds the message's lock")
