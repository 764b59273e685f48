"""The Kafka listener in the broker's lifespan: started after access control, beside the broker handle."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.kafka.brokers import ClusterView, KafkaNode, split_address
from app.kafka.server import KafkaListener
from app.presence import Presence
from half_store.domain.broker_records import BrokerRecord, kafka_node_id
from half_store.settings import Settings

log = logging.getLogger("app.kafka")


def advertised_address(settings: Settings, port: int) -> str:
    return settings.kafka_advertised_address or f"127.0.0.1:{port}"


def live_nodes(live: list[BrokerRecord]) -> list[KafkaNode]:
    """The Kafka listeners of the live broker processes."""
    nodes = []
    for broker in live:
        if broker.kafka_address is not None and broker.kafka_node_id is not None:
            host, port = split_address(broker.kafka_address)
            nodes.append(KafkaNode(broker.kafka_node_id, host, port))
    return nodes


@asynccontextmanager
async def kafka_front(app: FastAPI, settings: Settings, presence: Presence) -> AsyncIterator[None]:
    """Serve the Kafka protocol on HALFMQ_HOST:HALFMQ_KAFKA_PORT while the broker runs."""
    address = advertised_address(settings, settings.kafka_port)
    host, port = split_address(address)
    cluster = ClusterView(KafkaNode(kafka_node_id(address), host, port), settings.cluster_name)
    listener = KafkaListener(app.state.broker, settings, app.state.authority, cluster)
    await listener.start(settings.host, settings.kafka_port)
    app.state.kafka = listener
    presence.kafka_node_id, presence.kafka_address = cluster.me.node_id, address
    presence.watch(lambda live: cluster.update(live_nodes(live)))
    await presence.announce()
    log.info("kafka protocol on %s:%d, advertised as %s (node %d)", settings.host, settings.kafka_port,
             address, cluster.me.node_id)
    try:
        yield
    finally:
        presence.kafka_node_id = presence.kafka_address = None
        await listener.close()
