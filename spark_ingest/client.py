"""HTTP reads from the broker: topic metadata, committed fetches, group offsets.

spark_ingest is a client of the broker's public API like any other (it never
reads the database), so everything it knows about a partition comes through
here. The requests are the SDK's (:mod:`sdk.calls` builds them: paths, bodies, what
may be resent) and go through the SDK's transport: its connection pool, its one retry
loop and its error codes; this module only says which requests the source makes and
turns failures into errors a Spark user can act on. The client is deliberately not picklable state for Spark: create one
inside the function that runs on the driver or the executor and close it there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import TracebackType
from typing import Any, TypeVar

import httpx

from sdk import calls
from sdk._http import RetryPolicy, Transport, tls_verification
from sdk._stdlib_transport import StdlibTransport
from sdk.calls import Call
from sdk.errors import BrokerUnavailableError, HalfmqError
from sdk.models import PartitionInfo, RawFetchResult, TopicMetadata

try:  # orjson is much faster on 10k-message pages; plain json keeps executors dependency-light.
    import orjson

    def _loads(raw: bytes) -> Any:
        return orjson.loads(raw)

except ImportError:  # pragma: no cover - depends on the executor's environment

    def _loads(raw: bytes) -> Any:
        return json.loads(raw)


T = TypeVar("T")

READ_COMMITTED = "read_committed"
MAX_FETCH_MESSAGES = 10_000

# Backoff between retries: 0.2 s doubling to 5 s (about 20 s over the default 8 retries).
_FIRST_BACKOFF_SECONDS = 0.2
_MAX_BACKOFF_SECONDS = 5.0


class HalfmqSourceError(Exception):
    """Any failure talking to the broker, with a message a user can act on."""


class BrokerUnreachable(HalfmqSourceError):
    """No HTTP answer from the broker (refused, DNS, timeout) after the retries."""


class BrokerRequestFailed(HalfmqSourceError):
    """The broker answered with an error body ``{"error": {"code", "message"}}``."""

    def __init__(self, status: int, code: str, message: str, request: str) -> None:
        super().__init__(f"{request} failed: HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.broker_message = message


class TopicMissing(BrokerRequestFailed):
    """404 TOPIC_NOT_FOUND for a topic the job was asked to read."""


class OffsetOutOfRange(BrokerRequestFailed):
    """416 OFFSET_OUT_OF_RANGE: the offset is below log start or past the high watermark."""


PartitionState = PartitionInfo
"""Where one partition's log starts and ends, as the broker reports it (the SDK's record)."""

FetchedPage = RawFetchResult
"""One ``read_committed`` fetch: the raw message dicts and where to continue (the SDK's record)."""

__all__ = [
    "MAX_FETCH_MESSAGES",
    "READ_COMMITTED",
    "BrokerClient",
    "BrokerRequestFailed",
    "BrokerUnreachable",
    "FetchedPage",
    "HalfmqSourceError",
    "OffsetOutOfRange",
    "PartitionState",
    "TopicMetadata",
    "TopicMissing",
]


def _source_error(error: HalfmqError, request: str) -> BrokerRequestFailed:
    """The broker's answer as the source's own error (the SDK's code, status and message)."""
    status = error.status or 0
    if error.code == "TOPIC_NOT_FOUND":
        return TopicMissing(status, error.code, error.message, request)
    if error.code == "OFFSET_OUT_OF_RANGE" or status == 416:
        return OffsetOutOfRange(status, error.code, error.message, request)
    return BrokerRequestFailed(status, error.code, error.message, request)


class BrokerClient:
    """A keep-alive HTTP client for the few endpoints the Spark source needs.

    ``retries`` resends after connection errors, 429 and 5xx answers, with backoff
    (the SDK's :class:`~sdk._http.RetryPolicy`): fetches and metadata reads are
    idempotent, and a group-offset commit is last-writer-wins. ``token`` and ``verify``
    go to the transport (a bearer token; TLS verification or a CA bundle).
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        retries: int = 8,
        token: str | None = None,
        verify: bool | str = True,
    ) -> None:
        self.url = url.rstrip("/")
        retry = RetryPolicy(
            max_attempts=max(0, retries) + 1,
            initial_backoff=_FIRST_BACKOFF_SECONDS,
            max_backoff=_MAX_BACKOFF_SECONDS,
        )
        # Arrow pages are megabytes: over http.client a worker reads one in half the CPU httpx's own transport takes.
        wire = StdlibTransport(verify=tls_verification(verify))
        self._transport = Transport(self.url, timeout=timeout, retry=retry, token=token, wire=wire)

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection pool."""
        self._transport.close()

    def _call(self, call: Call[T]) -> T:
        request = f"{call.method} {self.url}{call.path}"
        try:
            return self._transport.call(call)
        except BrokerUnavailableError as exc:
            raise BrokerUnreachable(
                f"cannot reach the halfmq broker at {self.url} ({exc.message}); "
                "is it running, and can this machine reach it?"
            ) from exc
        except HalfmqError as exc:
            raise _source_error(exc, request) from exc

    def fetch_arrow(
        self, topic: str, partition: int, offset: int, max_messages: int, *, accept: str, tag: str | None = None
    ) -> httpx.Response:
        """One ``read_committed`` page as the broker's Arrow answer (or JSON, if ``accept`` allows
        it and the broker is older than the Arrow fetch): the whole response, headers and all."""
        return self._call(
            calls.fetch_arrow(topic, partition, offset, max_messages=_page_size(max_messages), accept=accept, tag=tag)
        )

    def topic(self, name: str) -> TopicMetadata:
        """``GET /v1/topics/{name}``; raises :class:`TopicMissing` for an unknown topic."""
        return self._call(calls.get_topic(name))

    def topics(self, names: list[str]) -> list[TopicMetadata]:
        """Metadata for each named topic, in the given order."""
        return [self.topic(name) for name in names]

    def fetch(self, topic: str, partition: int, offset: int, max_messages: int) -> FetchedPage:
        """One ``read_committed`` page starting at ``offset``.

        The returned messages may have offset gaps (aborted transactions, control
        markers); callers continue from ``next_offset``, never from the last
        message's offset + 1.
        """
        return self._call(calls.fetch_raw(topic, partition, offset, max_messages=_page_size(max_messages), decode=_loads))

    def commit_group_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """``POST /v1/groups/{group}/offsets``: the next offset to read, per partition."""
        if not offsets:
            return
        self._call(calls.commit_group_offsets(group, offsets))


def _page_size(max_messages: int) -> int:
    """Messages per fetch: at least one, at most what the broker serves."""
    return max(1, min(max_messages, MAX_FETCH_MESSAGES))
