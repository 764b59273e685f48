"""The FastAPI application factory and the broker's lifecycle."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.api import half_routes, log_routes, ops_routes, txn_routes
from app.api.errors import install_error_handlers
from app.api.middleware import BodyLimitMiddleware, MetricsMiddleware
from app.broker import Broker
from app.settings import Settings
from app.storage.migrate import upgrade
from checker.jobs import BackgroundJobs

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        broker = Broker.open(settings)
        if settings.migrate_on_start:
            upgrade(broker.store.database.writer)
        broker.store.start()
        broker.store.ensure_system_topics()
        recovered = await broker.coordinator.complete_prepared()
        if recovered:
            log.info("completed %d transactions left prepared by a crash", recovered)
        app.state.broker = broker
        jobs = BackgroundJobs(broker.store, broker.halves, broker.coordinator, settings)
        if settings.run_checker:
            jobs.start()
        try:
            yield
        finally:
            if settings.run_checker:
                await jobs.close()
            broker.store.close()

    app = FastAPI(
        title="halfmq",
        version="1.0.0",
        summary="Transactional message broker: RocketMQ-style half messages and Kafka/Pulsar-style transactions.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.include_router(log_routes.router)
    app.include_router(txn_routes.router)
    app.include_router(half_routes.router)
    app.include_router(ops_routes.router)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)
    app.add_middleware(MetricsMiddleware)
    return app
