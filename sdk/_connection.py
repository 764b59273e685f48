"""The keyword arguments every client takes about its connection, with their defaults, written once.

Each client's constructor takes ``**connection: Unpack[ConnectionOptions]``, so
``Producer(url, token=..., timeout=...)`` reads as before and a type checker still checks
the names and types, while the list of options and their defaults live here and nowhere
else (``docs/sdk.md``, "Connections, timeouts and retries", describes them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from sdk._http import DEFAULT_MAX_CONNECTIONS, DEFAULT_TIMEOUT, RetryPolicy
from sdk._metadata import DEFAULT_METADATA_MAX_AGE_MS


class ConnectionOptions(TypedDict, total=False):
    """``timeout`` (seconds per request), ``retry``, ``max_connections`` (pool size), ``token``
    (bearer), ``verify`` (TLS: True, False or a CA bundle's path) and ``metadata_max_age_ms``
    (how long a topic's partition count is trusted; see :mod:`sdk._metadata`)."""

    timeout: float
    retry: RetryPolicy | None
    max_connections: int
    token: str | None
    verify: bool | str
    metadata_max_age_ms: int


class TransportOptions(TypedDict):
    """What a client's transport (:class:`~sdk._http.Transport` or its asyncio twin) is made with."""

    timeout: float
    retry: RetryPolicy | None
    max_connections: int
    token: str | None
    verify: bool | str


@dataclass(frozen=True)
class ConnectionSettings:
    """:class:`ConnectionOptions` with every default filled in."""

    timeout: float = DEFAULT_TIMEOUT
    retry: RetryPolicy | None = None
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    token: str | None = None
    verify: bool | str = True
    metadata_max_age_ms: int = DEFAULT_METADATA_MAX_AGE_MS

    def transport_options(self) -> TransportOptions:
        """The options that go to the transport (the rest are the client's own)."""
        return TransportOptions(
            timeout=self.timeout, retry=self.retry, max_connections=self.max_connections, token=self.token,
            verify=self.verify,
        )
