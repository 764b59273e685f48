"""The first layer a request meets: the plain routes answered here, everything else handed on.

The broker's middleware (the request gate, the body limit, the listing filter, gzip and the
request metrics) is five ASGI layers, each wrapping ``receive`` or ``send`` in a closure of its
own, around every request. For the hot routes that wrapping cost more than the route itself
(issue 37: a fifth of the front's CPU per single-message produce). The front door does the
same five things in one pass, with the same functions the middleware uses, for the requests
the direct path serves (:mod:`app.api.direct_routes`), and hands every other request, and any
request the direct path gives back, to that middleware and FastAPI unchanged.

It sits inside the optional access log and tracing layers, so they see every request, and
inside FastAPI's server-error layer, which turns an unexpected exception into the contract's
500 as for any route.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import time

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.authorize import VISIBLE_KEY, gate_refusal, visible_answer
from app.api.direct_routes import DirectRoute, DirectRoutes
from app.api.errors import error_response
from app.api.middleware import REQUEST_METRICS, may_send_body, read_limited_body, replaying
from half_store.domain.errors import BrokerError

# Starlette's GZipMiddleware compresses answers this large in a worker thread; so does the front door.
GZIP_IN_THREAD_BYTES = 128 * 1024


class FrontDoor:
    """ASGI middleware: answers requests for plain routes itself, hands every other one to ``app``."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_seconds: float, gzip_min_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_seconds = timeout_seconds
        self.gzip_min_bytes = gzip_min_bytes  # 0: answers are never compressed (no GZipMiddleware either)
        self.direct = DirectRoutes()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        matched = self.direct.match(scope)
        if matched is None:
            await self.app(scope, receive, send)
            return
        route, path_params = matched
        started = time.perf_counter()
        status = 500  # a client gone, or a route that failed unexpectedly (FastAPI's error layer answers it)
        counted = True
        try:
            answer = await self._answer(route, path_params, scope, receive)
            if answer is None:
                return  # the client went away
            if not isinstance(answer, Response):  # FastAPI's to answer, through the middleware (which counts it)
                counted = False
                await self.app(scope, answer, send)
                return
            status = answer.status_code
            await answer(scope, receive, send)
        finally:
            if counted:
                REQUEST_METRICS.observe(scope["method"], route.path, status, time.perf_counter() - started)

    async def _answer(
        self, route: DirectRoute, path_params: dict[str, str], scope: Scope, receive: Receive
    ) -> Response | Receive | None:
        """The answer; or, where FastAPI must answer, the ``receive`` that replays the body read here;
        None when the client went away before its body was whole."""
        refused = await gate_refusal(scope)
        if refused is not None:
            return error_response(refused)
        body = b""
        if may_send_body(scope):
            try:
                read = await read_limited_body(scope, receive, self.max_bytes, self.timeout_seconds)
            except BrokerError as error:
                return error_response(error)
            if read is None:
                return None
            body, receive = read, replaying(read, receive)
        served = await self.direct.serve(route, path_params, body, scope, receive)
        return receive if served is None else await self._finished(served, scope)

    async def _finished(self, response: Response, scope: Scope) -> Response:
        """The route's answer as the listing filter and gzip would have sent it."""
        if response.status_code == 200 and scope.get(VISIBLE_KEY) is not None:
            response.body = visible_answer(scope, bytes(response.body))
            response.headers["content-length"] = str(len(response.body))
        if self._gzips(response, scope):
            plain = bytes(response.body)
            compress = functools.partial(gzip.compress, plain, compresslevel=1)  # level 1, as the middleware's
            response.body = await asyncio.to_thread(compress) if len(plain) >= GZIP_IN_THREAD_BYTES else compress()
            response.headers["content-encoding"] = "gzip"
            response.headers["content-length"] = str(len(response.body))
            response.headers.add_vary_header("Accept-Encoding")
        return response

    def _gzips(self, response: Response, scope: Scope) -> bool:
        """Whether GZipMiddleware would compress this answer: long enough, asked for, not encoded already."""
        if not self.gzip_min_bytes or len(response.body) < self.gzip_min_bytes or response.status_code == 206:
            return False
        if "content-encoding" in response.headers:
            return False
        return any(name == b"accept-encoding" and b"gzip" in value for name, value in scope["headers"])
