"""The FastAPI application factory and the broker's lifecycle."""

from __future__ import annotations

import inspect
import ipaddress
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import fastapi.routing
from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute
from starlette.middleware.gzip import GZipMiddleware

from app import __version__
from app.api import (
    access_routes,
    admin_routes,
    console_routes,
    delay_routes,
    group_routes,
    half_routes,
    log_routes,
    ops_routes,
    rocketmq_routes,
    share_routes,
    txn_routes,
)
from app.api.authorize import ListingFilterMiddleware, RequestGate, authorize
from app.api.docs_routes import install_docs
from app.api.errors import install_error_handlers
from app.api.front_door import FrontDoor
from app.api.long_polls import LongPollQuota
from app.api.middleware import AccessLogMiddleware, BodyLimitMiddleware, MetricsMiddleware, enable_access_log
from app.api.otel import install_otel
from app.api.rights import rights_of
from app.auth.authority import Authority, configure_audit_log
from app.auth.cache import AccessCache
from app.memory import MemoryTrimmer, tune_garbage_collector
from app.metrics import FRONT_MEMORY_RELEASED
from app.presence import broker_presence
from half_store.domain.message_limits import MessageLimits
from half_store.settings import Settings

if TYPE_CHECKING:
    from app.core.link import SharedCore, SpawnedCore
    from app.handle import BrokerHandle
    from app.presence import Presence
    from app.rocketmq.server import RocketMQListener

log = logging.getLogger(__name__)

# FastAPI's own OpenTelemetry bridge (0.16x) asks the global providers, and the environment,
# on every request whether it should trace: 6.8 µs a request here, 0.1 µs when told not to. The broker
# has its spans from its own middleware, installed only when OTEL_* asks (app/api/otel.py).
WITHOUT_NATIVE_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)


@asynccontextmanager
async def _serving_broker(app: FastAPI, settings: Settings, core: SharedCore | SpawnedCore | None) -> AsyncIterator[None]:
    """The broker behind the routes: in a core process of its own, one shared with other fronts, or in this one."""
    if settings.core_process or core is not None:
        from app.core.link import CoreLink, FrontMetrics, RemoteBroker, SharedCore

        if isinstance(core, SharedCore):
            link = await CoreLink.connect(core.socket)
            metrics: FrontMetrics | None = FrontMetrics(link, core.index).start()
        else:
            link, metrics = await CoreLink.start(settings, core), None
        app.state.broker = RemoteBroker(settings, link)
        if metrics is not None:
            app.state.front_metrics = metrics.collect
        try:
            async with access_control(app, settings), fronts(app, settings):
                yield
        finally:
            if metrics is not None:
                metrics.stop()
            await link.close()
    else:
        from app.broker import running_broker

        async with running_broker(settings) as broker:
            app.state.broker = broker
            async with access_control(app, settings), fronts(app, settings):
                yield


def create_app(settings: Settings | None = None, core: SharedCore | SpawnedCore | None = None) -> FastAPI:
    """The broker's HTTP app: its services in a core process of their own, or in this one.

    ``core``: a :class:`SharedCore` makes this one of several fronts (:mod:`app.fronts`), calling
    the core they share; a :class:`SpawnedCore` is this front's own core, started already.
    """
    settings = settings or Settings()
    problem = settings.startup_problem()
    if problem is not None:
        raise RuntimeError(problem)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_audit_log()
        warn_if_open(settings)
        trimmer = MemoryTrimmer(settings.memory_trim_seconds, FRONT_MEMORY_RELEASED).start()
        try:
            async with _serving_broker(app, settings, core):
                tune_garbage_collector()
                yield
        finally:
            trimmer.stop()

    app = FastAPI(
        title="halfmq",
        version=__version__,
        summary="Transactional message broker: RocketMQ-style half messages and Kafka/Pulsar-style transactions.",
        lifespan=lifespan,
        docs_url=None,  # served from the broker's own assets (install_docs), not a CDN
        redoc_url=None,
        # Every route, of every router included now or later, goes through the one authorizing dependency.
        dependencies=[Depends(authorize)],
        **WITHOUT_NATIVE_TELEMETRY,
    )
    app.state.limits = MessageLimits(settings.max_message_bytes, settings.max_header_count, settings.max_header_bytes)
    app.state.long_polls = LongPollQuota(
        settings.max_long_poll_waiters_per_principal or max(1, settings.max_long_poll_waiters // 4)
    )
    install_error_handlers(app)
    install_docs(app)
    app.include_router(log_routes.router)
    app.include_router(admin_routes.router)
    app.include_router(txn_routes.router)
    app.include_router(group_routes.router)
    app.include_router(half_routes.router)
    app.include_router(access_routes.router)
    app.include_router(share_routes.router)
    app.include_router(delay_routes.router)
    app.include_router(rocketmq_routes.router)
    app.include_router(ops_routes.router)
    app.include_router(console_routes.router)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes, timeout_seconds=settings.body_timeout_seconds)
    app.add_middleware(ListingFilterMiddleware)
    app.add_middleware(RequestGate)  # outside the body limit: a request is authenticated before its body is read
    if settings.gzip_min_bytes:  # outside the listing filter, which rewrites answers: compress what is finally sent
        # Level 1: JSON of messages shrinks most of the way at a fraction of level 9's CPU.
        app.add_middleware(GZipMiddleware, minimum_size=settings.gzip_min_bytes, compresslevel=1)
    app.add_middleware(MetricsMiddleware)
    if settings.direct_routes:  # the plain routes answered before the layers above, doing their work in one pass
        app.add_middleware(
            FrontDoor,
            max_bytes=settings.max_request_bytes,
            timeout_seconds=settings.body_timeout_seconds,
            gzip_min_bytes=settings.gzip_min_bytes,
        )
    install_otel(app, os.environ)  # server spans, only when OTEL_* asks for them and the packages are there
    if settings.access_log:  # outermost, so a line's duration covers all the broker did
        enable_access_log()
        app.add_middleware(AccessLogMiddleware)
    return app


@asynccontextmanager
async def fronts(app: FastAPI, settings: Settings) -> AsyncIterator[None]:
    """The Kafka and RocketMQ listeners beside the HTTP one, on the same broker handle and authority,
    announced in the broker registry by this process's one heartbeat."""
    broker, authority = app.state.broker, app.state.authority
    async with (
        broker_presence(broker.brokers, settings) as presence,
        _kafka_listener(app, settings, presence),
        _rocketmq_listener(broker, authority, settings, presence) as rocketmq,
    ):
        app.state.rocketmq = rocketmq
        yield


def _kafka_listener(app: FastAPI, settings: Settings, presence: Presence) -> AbstractAsyncContextManager[None]:
    """The Kafka listener; with ``HALFMQ_KAFKA_PORT=0`` none, and the Kafka protocol (kio) is not
    even imported (0.2 s of every front's start)."""
    if settings.kafka_port == 0:
        return nullcontext()
    from app.kafka.front import kafka_front

    return kafka_front(app, settings, presence)


def _rocketmq_listener(
    broker: BrokerHandle, authority: Authority, settings: Settings, presence: Presence
) -> AbstractAsyncContextManager[RocketMQListener | None]:
    """The RocketMQ listener; with ``HALFMQ_GRPC_PORT=0`` none, and gRPC and the RocketMQ
    protocol are not even imported (about 15 MB of the front)."""
    if settings.grpc_port == 0:
        return nullcontext(None)
    from app.rocketmq.server import rocketmq_listener

    return rocketmq_listener(broker, authority, settings, presence)


@asynccontextmanager
async def access_control(app: FastAPI, settings: Settings) -> AsyncIterator[None]:
    """The authority the dependency consults; with auth=token its cache is loaded and kept fresh."""
    enabled = settings.auth == "token"
    cache = AccessCache(
        app.state.broker.access,
        refresh_seconds=settings.auth_refresh_seconds,
        max_staleness_seconds=settings.auth_max_staleness_seconds,
    )
    admin = settings.admin_token.get_secret_value() if settings.admin_token else None
    app.state.authority = Authority(enabled, admin, cache)
    for route in undeclared_routes(app):
        log.error("route %s declares no rights: refused to everyone while auth is on", route)
    if not enabled:
        yield
        return
    await cache.start()
    try:
        yield
    finally:
        await cache.close()


def api_routes(app: FastAPI) -> list[tuple[str, frozenset[str], Callable[..., Any] | None]]:
    """(path, methods, endpoint) of every API route, including those of included routers.

    Recent FastAPI keeps included routers as nodes of ``app.routes`` and flattens them with
    ``fastapi.routing.iter_route_contexts``; older versions copied their routes into it.
    """
    flatten = getattr(fastapi.routing, "iter_route_contexts", None)
    found = []
    routes: list[Any] = list(flatten(app.routes) if flatten is not None else app.routes)
    for route in routes:
        if isinstance(getattr(route, "original_route", route), APIRoute):
            found.append((str(route.path), frozenset(route.methods or ()), route.endpoint))
    return found


def undeclared_routes(app: FastAPI) -> list[str]:
    """The API routes that declare no rights (refused to everyone while auth is on)."""
    return [f"{sorted(methods)} {path}" for path, methods, endpoint in api_routes(app) if rights_of(endpoint) is None]


def warn_if_open(settings: Settings) -> None:
    """Anyone who can reach a non-loopback address may do anything when auth is off: say so."""
    if settings.auth != "none":
        return
    try:
        loopback = settings.host == "localhost" or ipaddress.ip_address(settings.host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        log.warning(
            "HALFMQ_AUTH=none and the broker listens on %s: anyone who reaches it may read, write and "
            "resolve anything; set HALFMQ_AUTH=token (docs/security.md)",
            settings.host,
        )
