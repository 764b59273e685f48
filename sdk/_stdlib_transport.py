"""An httpx transport on the standard library's ``http.client``, for clients that read large answers.

httpx's own blocking transport (httpcore over h11) reads an answer in 64 KiB pieces, each
one copied through h11's receive buffer and joined again at the end. For a 5 MB Arrow
page that is 12–17 ms of CPU in the client. ``http.client`` reads a body whose length it
knows into one buffer: 2–3 ms alone, 6–7 ms with httpx's client above it (measured on
this project, 5,000 messages of 1 KiB per page). The Spark source's Python workers read
nothing else, so they run on this transport; everything above it stays httpx: the SDK's
retry loop, its errors, proxies from the environment, content decoding.

The pool keeps idle keep-alive connections per origin, last in first out, and drops one
the server has closed before it is used again. It has no limit on connections in use: each
thread that asks gets one, and at most ``max_idle`` per origin wait for reuse.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
from collections import defaultdict

import httpx

_Origin = tuple[str, str, int]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _tls_context(verify: bool | ssl.SSLContext) -> ssl.SSLContext:
    if isinstance(verify, ssl.SSLContext):
        return verify
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _closed_by_peer(connection: http.client.HTTPConnection) -> bool:
    """Whether an idle connection has something to read: an EOF (closed) or bytes no request asked for."""
    sock = connection.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):  # a socket closed underneath us
        return True
    return bool(readable)


class StdlibTransport(httpx.BaseTransport):
    """Blocking HTTP/1.1 over ``http.client`` with keep-alive; thread-safe."""

    def __init__(self, *, verify: bool | ssl.SSLContext = True, max_idle: int = 16) -> None:
        self._verify = verify
        self._tls: ssl.SSLContext | None = None
        self._max_idle = max_idle
        self._idle: defaultdict[_Origin, list[http.client.HTTPConnection]] = defaultdict(list)
        self._lock = threading.Lock()
        self._closed = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        url = request.url
        origin = (url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme, 80))
        connection = self._idle_connection(origin) or self._connect(origin, timeouts.get("connect"), request)
        try:
            response, body = self._exchange(connection, request, timeouts)
        except BaseException:
            connection.close()
            raise
        if response.will_close:
            connection.close()
        else:
            self._keep(origin, connection)
        return httpx.Response(
            response.status,
            headers=[(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.getheaders()],
            stream=httpx.ByteStream(body),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": response.reason.encode("latin-1")},
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle = [connection for connections in self._idle.values() for connection in connections]
            self._idle.clear()
        for connection in idle:
            connection.close()

    def _idle_connection(self, origin: _Origin) -> http.client.HTTPConnection | None:
        while True:
            with self._lock:
                connections = self._idle.get(origin)
                if not connections:
                    return None
                connection = connections.pop()
            if not _closed_by_peer(connection):
                return connection
            connection.close()

    def _keep(self, origin: _Origin, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            connections = self._idle[origin]
            if not self._closed and len(connections) < self._max_idle:
                connections.append(connection)
                return
        connection.close()

    def _connect(self, origin: _Origin, timeout: float | None, request: httpx.Request) -> http.client.HTTPConnection:
        scheme, host, port = origin
        connection: http.client.HTTPConnection
        if scheme == "https":
            if self._tls is None:
                self._tls = _tls_context(self._verify)
            connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=self._tls)
        elif scheme == "http":
            connection = http.client.HTTPConnection(host, port, timeout=timeout)
        else:
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}", request=request)
        try:
            connection.connect()
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "timed out connecting", request=request) from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        if connection.sock is not None:
            connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def _exchange(
        self, connection: http.client.HTTPConnection, request: httpx.Request, timeouts: dict[str, float | None]
    ) -> tuple[http.client.HTTPResponse, bytes]:
        sock = connection.sock
        assert sock is not None  # connected by _connect, or checked open by _idle_connection
        try:
            sock.settimeout(timeouts.get("write"))
            # httpx has already set Host, Accept-Encoding and Content-Length; send them as they are.
            connection.putrequest(request.method, request.url.raw_path.decode("ascii"), skip_host=True, skip_accept_encoding=True)
            for name, value in request.headers.raw:
                connection.putheader(name, value)
            connection.endheaders(request.read() or None)
        except TimeoutError as exc:
            raise httpx.WriteTimeout(str(exc) or "timed out sending", request=request) from exc
        except OSError as exc:
            raise httpx.WriteError(str(exc), request=request) from exc
        try:
            sock.settimeout(timeouts.get("read"))
            response = connection.getresponse()
            return response, response.read()
        except TimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "timed out reading", request=request) from exc
        except http.client.HTTPException as exc:  # closed early, a short body, a malformed status line
            raise httpx.RemoteProtocolError(f"{type(exc).__name__}: {exc}", request=request) from exc
        except OSError as exc:
            raise httpx.ReadError(str(exc), request=request) from exc
