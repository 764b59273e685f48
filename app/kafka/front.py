"""The Kafka listener in the broker's lifespan: started after access control, beside the broker handle."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.kafka.brokers import ClusterView, KafkaNode, split_address
from app.kafka.server import KafkaListener
from half_store.settings import Settings

log = logging.getLogger("app.kafka")


def advertised_address(settings: Settings, port: int) -> str:
    return settings.kafka_advertised_address or f"127.0.0.1:{port}"


@asynccontextmanager
async def kafka_front(app: FastAPI, settings: Settings) -> AsyncIterator[None]:
    """Serve the Kafka protocol on HALFMQ_HOST:HALFMQ_KAFKA_PORT while the broker runs (port 0: not at all)."""
    if settings.kafka_port == 0:
        yield
        return
    host, port = split_address(advertised_address(settings, settings.kafka_port))
    cluster = ClusterView(KafkaNode(1, host, port), settings.cluster_name)
    listener = KafkaListener(app.state.broker, settings, app.state.authority, cluster)
    await listener.start(settings.host, settings.kafka_port)
    app.state.kafka = listener
    log.info("kafka protocol on %s:%d, advertised as %s:%d", settings.host, settings.kafka_port, host, port)
    try:
        yield
    finally:
        await listener.close()
