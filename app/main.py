"""The FastAPI application factory and the broker's lifecycle."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.api import console_routes, half_routes, log_routes, ops_routes, txn_routes
from app.api.encoding import MessageLimits
from app.api.errors import install_error_handlers
from app.api.middleware import AccessLogMiddleware, BodyLimitMiddleware, MetricsMiddleware, enable_access_log
from half_store.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    """The broker's HTTP app: its services in a core process of their own, or in this one."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.core_process:
            from app.core.link import CoreLink, RemoteBroker

            link = await CoreLink.start(settings)
            app.state.broker = RemoteBroker(settings, link)
            try:
                yield
            finally:
                await link.close()
        else:
            from app.broker import running_broker

            async with running_broker(settings) as broker:
                app.state.broker = broker
                yield

    app = FastAPI(
        title="halfmq",
        version="1.0.0",
        summary="Transactional message broker: RocketMQ-style half messages and Kafka/Pulsar-style transactions.",
        lifespan=lifespan,
    )
    app.state.limits = MessageLimits.of(settings)
    install_error_handlers(app)
    app.include_router(log_routes.router)
    app.include_router(txn_routes.router)
    app.include_router(half_routes.router)
    app.include_router(ops_routes.router)
    app.include_router(console_routes.router)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)
    app.add_middleware(MetricsMiddleware)
    if settings.access_log:  # outermost, so a line's duration covers all the broker did
        enable_access_log()
        app.add_middleware(AccessLogMiddleware)
    return app
