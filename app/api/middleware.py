"""ASGI middleware: the request-size limit, Prometheus request metrics and the access log."""

from __future__ import annotations

import re
import time
from typing import Any

from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import error_response
from app.metrics import REQUEST_LATENCY, REQUESTS
from half_store.domain.errors import MessageTooLarge


class BodyLimitMiddleware:
    """Refuse bodies over ``max_bytes`` with 413 before reading them whole into memory.

    A declared Content-Length over the limit is refused before any of the body is
    read. Otherwise the body is read here, counting as it streams, and reading stops
    at the limit; a body within it is handed on to the app in one piece (the app
    would have buffered it anyway to parse the JSON).
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "DELETE", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        too_large = error_response(MessageTooLarge(f"request body is over the limit of {self.max_bytes} bytes"))
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await too_large(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await too_large(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)


class MetricsMiddleware:
    """Counts requests by route template and status, and times them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.templates: RouteTemplates | None = None  # built at the first request no route named

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
            route = self.route_of(scope)
            method = scope.get("method", "")
            REQUESTS.labels(method, route, str(status)).inc()
            REQUEST_LATENCY.labels(method, route).observe(time.perf_counter() - started)

    def route_of(self, scope: Scope) -> str:
        """The path template of the route that served a request (``/v1/topics/{topic}``), or ``unmatched``.

        FastAPI's routes name themselves in the scope. The routes Starlette serves
        (``/docs``, ``/openapi.json``) do not, and neither does a request refused before
        routing (a body over the size limit): those are looked up among the app's
        templates. Only a path that no route serves is ``unmatched``, so the label has
        as many values as there are routes, whatever clients send.
        """
        route: Any = scope.get("route")
        if route is not None:
            return str(route.path)
        if self.templates is None:
            self.templates = RouteTemplates(scope.get("app"))
        return self.templates.match(scope.get("path", ""))


UNMATCHED = "unmatched"


class RouteTemplates:
    """Every path template an app serves: its OpenAPI paths and its own top-level routes (the docs)."""

    def __init__(self, app: Any) -> None:
        openapi = getattr(app, "openapi", None)
        templates: set[str] = set(openapi().get("paths", {})) if callable(openapi) else set()
        templates.update(r.path for r in getattr(app, "routes", ()) if isinstance(getattr(r, "path", None), str))
        # Literal paths before templates with parameters, as a router would prefer them.
        ordered = sorted(templates, key=lambda template: (template.count("{"), template))
        self.patterns: list[tuple[re.Pattern[str], str]] = [(compile_path(t)[0], t) for t in ordered]

    def match(self, path: str) -> str:
        for pattern, template in self.patterns:
            if pattern.match(path):
                return template
        return UNMATCHED
