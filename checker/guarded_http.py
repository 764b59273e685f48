"""The checker's HTTP client: it connects only to checked addresses and never follows redirects.

httpx resolves and connects inside httpcore's network backend. The backend here
resolves the host itself, asks the :class:`CallbackGuard` about every address, and
then connects to a checked address (not to the name again), so what was checked is
what is connected to. TLS still verifies the certificate against the URL's host name,
which httpcore passes on separately. No proxy from the environment is used (it would
connect on our behalf to anywhere), and redirects are never followed.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from half_store.services.callback_guard import CallbackGuard

SOCKET_OPTION = Any


class GuardedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, guard: CallbackGuard) -> None:
        self._guard = guard
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._guard.resolve(host, port)  # CallbackNotAllowed if any is outside
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[SOCKET_OPTION] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("callbacks do not go to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport, with its connection pool built on :class:`GuardedBackend`."""

    def __init__(self, guard: CallbackGuard, limits: httpx.Limits) -> None:
        super().__init__(verify=_callback_tls(), limits=limits, trust_env=False)
        # httpx builds its pool without a way to pass a network backend; build the same pool with ours.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=_callback_tls(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(guard),
        )


@functools.cache
def _callback_tls() -> ssl.SSLContext:
    """The callbacks' TLS settings (the default CA bundle), made once per process: loading the
    bundle took about 15 ms, twice for every app that started."""
    return httpx.create_ssl_context(trust_env=False)


def guarded_client(guard: CallbackGuard, max_connections: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=max_connections)
    return httpx.AsyncClient(
        transport=GuardedTransport(guard, limits), follow_redirects=False, trust_env=False, limits=limits
    )
