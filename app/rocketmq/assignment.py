"""QueryAssignment: which queues a PushConsumer receives from.

A share group hands any message to any of its consumers, whichever queue they name, so a
PushConsumer needs one assignment per broker process, not one per partition: it long-polls
each broker once, and every partition's messages reach it through them.
"""

from __future__ import annotations

from typing import Any

from app.handle import BrokerHandle
from app.rocketmq.context import CallContext
from app.rocketmq.protocol import new
from app.rocketmq.receive import group_of
from app.rocketmq.route import message_queues
from app.rocketmq.status import status
from half_store.domain.access import Operation, ResourceType


class Assignments:
    def __init__(self, broker: BrokerHandle, addresses: list[str]) -> None:
        self.broker = broker
        self.addresses = addresses

    async def query_assignment(self, request: Any, ctx: CallContext) -> Any:
        group = group_of(request)
        topic = request.topic.name
        ctx.require(ResourceType.TOPIC, Operation.READ, topic)
        ctx.require(ResourceType.GROUP, Operation.READ, group)
        await self.broker.admin.describe_topic(topic)  # TOPIC_NOT_FOUND if there is none
        queues = message_queues(topic, request.topic.resource_namespace, len(self.addresses), self.addresses)
        assignments = [new("Assignment", message_queue=queue) for queue in queues]
        return new("QueryAssignmentResponse", status=status(), assignments=assignments)
