"""EndTransaction: a RocketMQ transaction's end is a half message's commit or rollback.

The transaction id SendMessage answered with is the half message's id, so any broker
process resolves it. The answer to a back-check comes the same way (``SOURCE_SERVER_CHECK``),
and so may an answer from a client that never says where it comes from (the Go client):
the source changes nothing. ``TRANSACTION_RESOLUTION_UNSPECIFIED`` resolves nothing: the
check it answers counts, and the checker asks again later.
"""

from __future__ import annotations

from typing import Any

from app.handle import BrokerHandle
from app.rocketmq.checks import TransactionChecks
from app.rocketmq.context import CallContext
from app.rocketmq.protocol import enum_name, new
from app.rocketmq.send import producer_group_of
from app.rocketmq.status import RocketMQError, status
from half_store.domain.access import Operation, ResourceType


class Transactions:
    def __init__(self, broker: BrokerHandle, checks: TransactionChecks) -> None:
        self.broker = broker
        self.checks = checks

    async def end_transaction(self, request: Any, ctx: CallContext) -> Any:
        transaction_id = request.transaction_id
        if not transaction_id or len(transaction_id) > 64:
            raise RocketMQError("INVALID_TRANSACTION_ID", "EndTransaction names no transaction id SendMessage gave")
        await self._authorize(transaction_id, request.topic.name, ctx)
        resolution = enum_name("TransactionResolution", request.resolution)
        if resolution == "COMMIT":
            await self.broker.halves.commit(transaction_id)
        elif resolution == "ROLLBACK":
            await self.broker.halves.rollback(transaction_id)
        else:
            await self.checks.unanswered(transaction_id)
        self.checks.answered(transaction_id)
        return new("EndTransactionResponse", status=status())

    async def _authorize(self, transaction_id: str, topic: str, ctx: CallContext) -> None:
        """The rights on the half message's own topic and group, whatever topic the request names."""
        if not ctx.authority.enabled:
            return

        async def fetch() -> tuple[str, str]:
            half = await self.broker.halves.get(transaction_id)  # INVALID_TRANSACTION_ID if there is none
            return half.producer_group, half.topic

        group, real_topic = await ctx.authority.cache.lookup("half", transaction_id, fetch)
        ctx.require(ResourceType.PRODUCER_GROUP, Operation.WRITE, group or producer_group_of(topic))
        ctx.require(ResourceType.TOPIC, Operation.WRITE, real_topic)
