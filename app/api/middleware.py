"""ASGI middleware: the request-size limit, Prometheus request metrics and the access log."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.routing import Mount, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import error_response
from app.metrics import BODY_TIMEOUTS, REQUEST_LATENCY, REQUESTS
from half_store.domain.errors import BrokerError, MessageTooLarge, RequestTimeout


class BodyLimitMiddleware:
    """Refuse bodies over ``max_bytes`` with 413 before reading them whole into memory, and
    bodies that do not arrive whole within ``timeout_seconds`` with 408.

    A declared Content-Length over the limit is refused before any of the body is
    read. Otherwise the body is read here, counting as it streams, and reading stops
    at the limit; a body within it is handed on to the app in one piece (the app
    would have buffered it anyway to parse the JSON). A client that sends slowly, or
    holds back its last byte, holds a connection and a buffer only until the timeout.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_seconds: float | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_seconds = timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not may_send_body(scope):
            await self.app(scope, receive, send)
            return
        try:
            body = await read_limited_body(scope, receive, self.max_bytes, self.timeout_seconds)
        except BrokerError as error:
            await error_response(error)(scope, receive, send)
            return
        if body is not None:  # else the client went away
            await self.app(scope, replaying(body, receive), send)


def may_send_body(scope: Scope) -> bool:
    """Whether the body limit reads this request's body (methods that carry none pass untouched)."""
    return scope.get("method") not in ("GET", "HEAD", "DELETE", "OPTIONS")


async def read_limited_body(scope: Scope, receive: Receive, max_bytes: int, timeout_seconds: float | None) -> bytes | None:
    """The whole body within the limits of :class:`BodyLimitMiddleware`; None when the client went away.

    Raises :class:`MessageTooLarge` (413) and :class:`RequestTimeout` (408).
    """
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.isdigit() and int(value) > max_bytes:
            raise _too_large(max_bytes)
    try:
        async with asyncio.timeout(timeout_seconds):
            return await read_body(receive, max_bytes)
    except TimeoutError:
        BODY_TIMEOUTS.inc()
        raise RequestTimeout(f"the request body did not arrive within {timeout_seconds:g} s") from None


async def read_body(receive: Receive, max_bytes: int | None = None) -> bytes | None:
    """The whole request body, message by message; None when the client went away.

    Raises :class:`MessageTooLarge` as soon as more than ``max_bytes`` have come.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if max_bytes is not None and size > max_bytes:
            raise _too_large(max_bytes)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _too_large(max_bytes: int) -> MessageTooLarge:
    return MessageTooLarge(f"request body is over the limit of {max_bytes} bytes")


def replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands out ``body`` (already read) as one message, then what follows it."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


class RequestMetrics:
    """The request counter and latency histogram, their labelled children kept at hand.

    ``labels()`` builds and looks up its key under a lock on every call; a request's route is
    one of the app's templates and its status one of a few, so the children are few and kept
    (the two metrics of a request: 5.0 µs through ``labels()``, 2.1 µs through the kept children).
    """

    def __init__(self) -> None:
        self._counted: dict[tuple[str, str, int], Any] = {}
        self._timed: dict[tuple[str, str], Any] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        counted = self._counted.get((method, route, status))
        if counted is None:
            counted = self._counted[(method, route, status)] = REQUESTS.labels(method, route, str(status))
        timed = self._timed.get((method, route))
        if timed is None:
            timed = self._timed[(method, route)] = REQUEST_LATENCY.labels(method, route)
        counted.inc()
        timed.observe(seconds)


REQUEST_METRICS = RequestMetrics()


class MetricsMiddleware:
    """Counts requests by route template and status, and times them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.routes = RouteNamer()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def capture_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, capture_status)
        finally:
            REQUEST_METRICS.observe(scope.get("method", ""), self.routes.name(scope), status, time.perf_counter() - started)


class AccessLogMiddleware:
    """One JSON line per request on the ``halfmq.access`` logger (``--access-log``; off by default).

    ``{"time", "method", "path", "route", "status", "duration_ms", "client"}``: ``route`` is
    the template of the route that served the request (``unmatched`` for an unknown path),
    ``duration_ms`` runs until the answer was sent, ``client`` is ``host:port``.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.routes = RouteNamer()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets when the app fails before answering

        async def capture_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, capture_status)
        finally:
            client = scope.get("client")
            line = {
                "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "method": scope.get("method", ""),
                "path": _shown_path(scope.get("path", "")),
                "route": self.routes.name(scope),
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                "client": f"{client[0]}:{client[1]}" if client else None,
            }
            ACCESS_LOG.info(orjson.dumps(line).decode())


ACCESS_LOG = logging.getLogger("halfmq.access")
SHOWN_PATH_CHARS = 512


def _shown_path(path: str) -> str:
    """A path as the access log shows it: cut short past 512 characters, so no request writes an unbounded line."""
    return path if len(path) <= SHOWN_PATH_CHARS else f"{path[:SHOWN_PATH_CHARS]}…"


def enable_access_log() -> None:
    """Send the access log's lines to stdout as they are, whatever the broker's log level."""
    if not ACCESS_LOG.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(message)s"))
        ACCESS_LOG.addHandler(handler)
    ACCESS_LOG.setLevel(logging.INFO)
    ACCESS_LOG.propagate = False  # the line is the record; no second copy through the root logger


UNMATCHED = "unmatched"


class RouteNamer:
    """Names a request by the path template of the route that served it (``/v1/topics/{topic}``).

    FastAPI's routes name themselves in the scope. The routes Starlette serves
    (``/docs``, ``/openapi.json``) do not, and neither does a request refused before
    routing (a body over the size limit): those are looked up among the app's
    templates, built at the first such request. Only a path that no route serves is
    ``unmatched``, so there are as many names as routes, whatever clients send.
    """

    def __init__(self) -> None:
        self.templates: RouteTemplates | None = None

    def name(self, scope: Scope) -> str:
        route: Any = scope.get("route")
        if route is not None:
            return str(route.path)
        if self.templates is None:
            self.templates = RouteTemplates(scope.get("app"))
        return self.templates.match(scope.get("path", ""))


class RouteTemplates:
    """Every path template an app serves: its OpenAPI paths and its own top-level routes (the docs)."""

    def __init__(self, app: Any) -> None:
        openapi = getattr(app, "openapi", None)
        templates: set[str] = set(openapi().get("paths", {})) if callable(openapi) else set()
        for route in getattr(app, "routes", ()):
            path = getattr(route, "path", None)
            if isinstance(path, str):
                # A mount (the docs' assets) serves everything below its path: one name for all of it.
                templates.add(f"{path}/{{path:path}}" if isinstance(route, Mount) else path)
        # Literal paths before templates with parameters, as a router would prefer them.
        ordered = sorted(templates, key=lambda template: (template.count("{"), template))
        self.patterns: list[tuple[re.Pattern[str], str]] = [(compile_path(t)[0], t) for t in ordered]

    def match(self, path: str) -> str:
        for pattern, template in self.patterns:
            if pattern.match(path):
                return template
        return UNMATCHED
