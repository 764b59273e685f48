"""ASGI middleware: the request-size limit and Prometheus request metrics."""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import error_response
from app.errors import MessageTooLarge
from app.metrics import REQUEST_LATENCY, REQUESTS


class _BodyTooLarge(Exception):
    pass


class BodyLimitMiddleware:
    """Refuse bodies over ``max_bytes`` with 413 before reading them whole into memory.

    A declared Content-Length over the limit is refused before any of the body is
    read; a chunked body is counted as it streams and cut off at the limit.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = MessageTooLarge(f"request body is over the limit of {self.max_bytes} bytes")
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await error_response(too_large)(scope, receive, send)
                    return
        received = 0
        response_started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal response_started
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            if not response_started:
                await error_response(too_large)(scope, receive, send)


class MetricsMiddleware:
    """Counts requests by route template and status, and times them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

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
            route: Any = scope.get("route")
            path = getattr(route, "path", "unmatched")
            method = scope.get("method", "")
            REQUESTS.labels(method, path, str(status)).inc()
            REQUEST_LATENCY.labels(method, path).observe(time.perf_counter() - started)
