"""QueryRoute, Heartbeat and NotifyClientTermination: where a topic's queues are, and who is connected."""

from __future__ import annotations

import ipaddress
from typing import Any

from app.handle import BrokerHandle
from app.rocketmq.context import CallContext
from app.rocketmq.protocol import enum_name, enum_value, new
from app.rocketmq.sessions import Sessions
from app.rocketmq.status import status
from half_store.domain.access import Operation, ResourceType
from half_store.domain.constants import is_system_topic
from half_store.domain.errors import ReservedTopic

# Every queue takes every kind of message: a halfmq topic has no message type of its own.
ACCEPTED_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION")
BROKER_NAME = "halfmq"


def endpoints(address: str) -> Any:
    """``host:port`` as RocketMQ Endpoints (IPv4, IPv6 or a domain name)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        scheme = "IPv4" if ipaddress.ip_address(host).version == 4 else "IPv6"
    except ValueError:
        scheme = "DOMAIN_NAME"
    return new(
        "Endpoints",
        scheme=enum_value("AddressScheme", scheme),
        addresses=[new("Address", host=host, port=int(port))],
    )


def message_queues(topic: str, namespace: str, partitions: int, addresses: list[str]) -> list[Any]:
    """One READ_WRITE queue per partition; with several brokers, the queues are spread over them
    (any broker serves any queue: they share one log)."""
    brokers = [
        new("Broker", name=f"{BROKER_NAME}-{index}", id=0, endpoints=endpoints(address))
        for index, address in enumerate(sorted(addresses))
    ]
    return [
        new(
            "MessageQueue",
            topic=new("Resource", name=topic, resource_namespace=namespace),
            id=partition,
            permission=enum_value("Permission", "READ_WRITE"),
            broker=brokers[partition % len(brokers)],
            accept_message_types=[enum_value("MessageType", t) for t in ACCEPTED_TYPES],
        )
        for partition in range(partitions)
    ]


class Routes:
    def __init__(self, broker: BrokerHandle, sessions: Sessions, addresses: list[str]) -> None:
        self.broker = broker
        self.sessions = sessions
        self.addresses = addresses  # the brokers' advertised addresses (this one's first)

    async def query_route(self, request: Any, ctx: CallContext) -> Any:
        topic = request.topic.name
        if is_system_topic(topic):
            raise ReservedTopic(f"{topic!r} is a system topic")
        ctx.require(ResourceType.TOPIC, Operation.DESCRIBE, topic)
        details = await self.broker.admin.describe_topic(topic)
        self.sessions.touch(ctx.client_id, ctx.principal)
        queues = message_queues(topic, request.topic.resource_namespace, len(details.partitions), self.addresses)
        return new("QueryRouteResponse", status=status(), message_queues=queues)

    async def heartbeat(self, request: Any, ctx: CallContext) -> Any:
        session = self.sessions.touch(ctx.client_id, ctx.principal)
        session.client_type = enum_name("ClientType", request.client_type)
        if request.HasField("group") and request.group.name:
            session.group = request.group.name
        return new("HeartbeatResponse", status=status())

    async def notify_client_termination(self, request: Any, ctx: CallContext) -> Any:
        self.sessions.remove(ctx.client_id)
        return new("NotifyClientTerminationResponse", status=status())
