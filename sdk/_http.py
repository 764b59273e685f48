"""HTTP transport: the one retry loop, for both the blocking and the asyncio client.

Every broker request is a :class:`Call` (built in :mod:`sdk.calls`): method, path,
body, whether resending it is safe, and how to parse the answer. The decision
"retry or give up, and after how long" lives once, in :func:`retry_delay`; the two
drivers below (:class:`Transport`, :class:`AsyncTransport`) only differ in how
they wait (``time.sleep`` vs ``asyncio.sleep``).

Connection pools are deliberately small (:data:`DEFAULT_MAX_CONNECTIONS`): httpx
throughput collapses with many concurrent requests on one client (measured on this
project: ~950 req/s at 8 concurrent, ~190 req/s at 200). Requests beyond the pool
wait for a free connection instead of piling onto the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar, cast

import httpx

from sdk.errors import BrokerUnavailableError, HalfmqError, error_from_response

T = TypeVar("T")
U = TypeVar("U")

logger = logging.getLogger("halfmq.sdk")

DEFAULT_TIMEOUT = 10.0
"""Seconds for connect/read/write of one request (long-polls add their wait)."""

DEFAULT_MAX_CONNECTIONS = 16
"""Connections per client; beyond ~50 concurrent requests httpx gets much slower."""

DEFAULT_POOL_TIMEOUT = 60.0
"""How long a request may queue for a free pooled connection before it fails."""

# Failures where the request certainly never reached the broker: always safe to resend.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter for connection errors, 5xx and 429.

    ``max_attempts`` counts the first try. With the defaults a request keeps trying
    for about seven seconds, long enough to ride over a broker restart.
    """

    max_attempts: int = 8
    initial_backoff: float = 0.1
    max_backoff: float = 2.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        base = min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))
        return base * (1 + random.uniform(-self.jitter, self.jitter))


NO_RETRY = RetryPolicy(max_attempts=1)
"""A policy that never retries (useful in tests and for callers with their own loop)."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One broker request and how to read its answer.

    ``idempotent`` says whether resending is harmless after the request may have
    reached the broker (reads, sequence-numbered produces, commits). Calls that are
    not are still retried when the connection was never established.
    ``extra_timeout`` is added to the read timeout, for long-polls.
    ``content`` is a body already encoded as JSON (sent instead of ``json``), and
    ``decode`` reads a successful answer's bytes (instead of ``json.loads``): callers that
    move many messages use a faster codec for both. ``whole_answer`` hands ``parse`` the
    successful :class:`httpx.Response` itself, for an answer that is not JSON (an Arrow
    stream) or whose headers matter.
    """

    method: str
    path: str
    parse: Callable[[Any], T]
    json: Any = None
    params: Mapping[str, Any] | None = None
    idempotent: bool = True
    extra_timeout: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)
    content: bytes | None = None
    decode: Callable[[bytes], Any] | None = None
    whole_answer: bool = False

    def answered_by(self, parse: Callable[[Any], U], **changes: Any) -> Call[U]:
        """The same request with another reading of its answer (and ``changes`` to its other fields)."""
        changed: Call[U] = replace(cast(Any, self), parse=parse, **changes)
        return changed

    def returning_json(self) -> Call[Any]:
        """The same request, answered with the broker's JSON as it came (for callers that show
        or forward it rather than read it: the ``halfmq`` CLI's ``--json``)."""
        return self.answered_by(_as_it_came, decode=None, whole_answer=False)

    def request_arguments(self) -> dict[str, Any]:
        """The body and headers of the request, as httpx takes them."""
        if self.content is None:
            return {"json": self.json, "headers": self.headers}
        return {"content": self.content, "headers": {"content-type": "application/json", **self.headers}}


def _as_it_came(body: Any) -> Any:
    return body


Outcome = httpx.Response | httpx.TransportError


def retry_delay(policy: RetryPolicy, call: Call[Any], attempt: int, outcome: Outcome) -> float | None:
    """Seconds to wait before resending ``call`` after ``outcome``, or ``None`` to stop.

    The single place that knows which failures are worth another try.
    """
    if attempt >= policy.max_attempts:
        return None
    if isinstance(outcome, httpx.Response):
        status = outcome.status_code
        if status == 429:  # refused before doing anything
            retryable = True
        elif status >= 500:
            retryable = call.idempotent
        else:
            retryable = False
    else:
        retryable = isinstance(outcome, _NOT_SENT) or call.idempotent
    return policy.backoff(attempt) if retryable else None


def _result(call: Call[T], response: httpx.Response) -> T:
    """Parse a final answer: the call's value on 2xx, else raise the typed error."""
    if call.whole_answer and response.is_success:
        return call.parse(response)
    try:
        if not response.content:
            body = None
        elif call.decode is not None and response.is_success:
            body = call.decode(response.content)
        else:
            body = response.json()
    except ValueError:  # JSONDecodeError, UnicodeDecodeError, or the custom decoder's own
        body = None
        if response.is_success:
            raise HalfmqError(
                f"broker answered {call.method} {call.path} with non-JSON", code="INVALID_RESPONSE",
                status=response.status_code,
            ) from None
    if response.is_success:
        return call.parse(body)
    raise error_from_response(response.status_code, body, response.text)


def _unavailable(call: Call[Any], exc: httpx.TransportError, attempts: int) -> BrokerUnavailableError:
    return BrokerUnavailableError(
        f"{call.method} {call.path} failed after {attempts} attempt(s): {type(exc).__name__}: {exc}"
    )


def _timeout(base: float, call: Call[Any], pool: float) -> httpx.Timeout:
    return httpx.Timeout(base, read=base + call.extra_timeout, pool=pool)


def _auth_headers(token: str | None) -> dict[str, str]:
    """The bearer token every request of a client carries (the broker's ``HALFMQ_AUTH=token``)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def tls_verification(verify: bool | str | ssl.SSLContext) -> bool | ssl.SSLContext:
    """``verify=``: True (the system's CAs), False, a CA bundle's path, or an SSL context."""
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    return verify


def _limits(max_connections: int) -> httpx.Limits:
    return httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)


class Transport:
    """Blocking driver: an :class:`httpx.Client` plus the retry loop. Thread-safe.

    ``wire`` replaces httpx's own connection layer (then ``verify`` and ``max_connections``
    are the wire's to honour): :class:`sdk._stdlib_transport.StdlibTransport` for a
    client that reads large answers.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        token: str | None = None,
        verify: bool | str | ssl.SSLContext = True,
        wire: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._timeout = timeout
        self._pool_timeout = pool_timeout
        self._client = httpx.Client(
            base_url=self.url,
            limits=_limits(max_connections),
            headers=_auth_headers(token),
            verify=tls_verification(verify),
            transport=wire,
        )

    def call(self, call: Call[T]) -> T:
        """Send ``call``, resending per :func:`retry_delay`; return its parsed answer."""
        attempt = 0
        while True:
            attempt += 1
            try:
                outcome: Outcome = self._client.request(
                    call.method, call.path, params=call.params, **call.request_arguments(),
                    timeout=_timeout(self._timeout, call, self._pool_timeout),
                )
            except httpx.TransportError as exc:
                outcome = exc
            delay = retry_delay(self.retry, call, attempt, outcome)
            if delay is None:
                if isinstance(outcome, httpx.TransportError):
                    raise _unavailable(call, outcome, attempt) from outcome
                return _result(call, outcome)
            logger.debug("retrying %s %s in %.2fs after %r", call.method, call.path, delay, outcome)
            time.sleep(delay)

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()


class AsyncTransport:
    """Asyncio driver: an :class:`httpx.AsyncClient` plus the same retry decisions."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        token: str | None = None,
        verify: bool | str | ssl.SSLContext = True,
    ) -> None:
        self.url = url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._timeout = timeout
        self._pool_timeout = pool_timeout
        self._client = httpx.AsyncClient(
            base_url=self.url,
            limits=_limits(max_connections),
            headers=_auth_headers(token),
            verify=tls_verification(verify),
        )

    async def call(self, call: Call[T]) -> T:
        """Send ``call``, resending per :func:`retry_delay`; return its parsed answer."""
        attempt = 0
        while True:
            attempt += 1
            try:
                outcome: Outcome = await self._client.request(
                    call.method, call.path, params=call.params, **call.request_arguments(),
                    timeout=_timeout(self._timeout, call, self._pool_timeout),
                )
            except httpx.TransportError as exc:
                outcome = exc
            delay = retry_delay(self.retry, call, attempt, outcome)
            if delay is None:
                if isinstance(outcome, httpx.TransportError):
                    raise _unavailable(call, outcome, attempt) from outcome
                return _result(call, outcome)
            logger.debug("retrying %s %s in %.2fs after %r", call.method, call.path, delay, outcome)
            await asyncio.sleep(delay)

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._client.aclose()
