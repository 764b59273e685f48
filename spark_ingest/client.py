"""HTTP reads from the broker: topic metadata, committed fetches, group offsets.

spark_ingest is a client of the broker's public API like any other (it never
reads the database), so everything it knows about a partition comes through
here. The requests go through the SDK's transport (:mod:`sdk._http`): its
connection pool, its one retry loop and its error codes; this module only says
which requests the source makes and turns failures into errors a Spark user can
act on. The client is deliberately not picklable state for Spark: create one
inside the function that runs on the driver or the executor and close it there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from sdk._http import Call, RetryPolicy, Transport, tls_verification
from sdk._stdlib_transport import StdlibTransport
from sdk.errors import BrokerUnavailableError, HalfmqError

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


@dataclass(frozen=True)
class PartitionState:
    """Where one partition's log starts and ends, as the broker reports it."""

    partition: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int


@dataclass(frozen=True)
class TopicMetadata:
    """A topic and the state of each of its partitions."""

    name: str
    partitions: tuple[PartitionState, ...]


@dataclass(frozen=True)
class FetchedPage:
    """One ``read_committed`` fetch: the raw message dicts and where to continue."""

    messages: list[dict[str, Any]]
    next_offset: int
    high_watermark: int
    last_stable_offset: int


def _source_error(error: HalfmqError, request: str) -> BrokerRequestFailed:
    """The broker's answer as the source's own error (the SDK's code, status and message)."""
    status = error.status or 0
    if error.code == "TOPIC_NOT_FOUND":
        return TopicMissing(status, error.code, error.message, request)
    if error.code == "OFFSET_OUT_OF_RANGE" or status == 416:
        return OffsetOutOfRange(status, error.code, error.message, request)
    return BrokerRequestFailed(status, error.code, error.message, request)


def _segment(name: str) -> str:
    # Group names are free text: a "/" or "?" in one must not change the route.
    return quote(name, safe="")


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

    def get(self, path: str, *, params: Mapping[str, Any], headers: Mapping[str, str]) -> httpx.Response:
        """A GET with this client's retries and errors, its body left as it came (Arrow fetches)."""
        return self._call(Call("GET", path, params=params, headers=headers, parse=_as_it_came, whole_answer=True))

    def topic(self, name: str) -> TopicMetadata:
        """``GET /v1/topics/{name}``; raises :class:`TopicMissing` for an unknown topic."""
        return self._call(Call("GET", f"/v1/topics/{_segment(name)}", parse=_topic_metadata))

    def topics(self, names: list[str]) -> list[TopicMetadata]:
        """Metadata for each named topic, in the given order."""
        return [self.topic(name) for name in names]

    def fetch(self, topic: str, partition: int, offset: int, max_messages: int) -> FetchedPage:
        """One ``read_committed`` page starting at ``offset``.

        The returned messages may have offset gaps (aborted transactions, control
        markers); callers continue from ``next_offset``, never from the last
        message's offset + 1.
        """
        params = {
            "offset": offset,
            "max_messages": max(1, min(max_messages, MAX_FETCH_MESSAGES)),
            "isolation": READ_COMMITTED,
        }
        path = f"/v1/topics/{_segment(topic)}/partitions/{partition}/messages"
        return self._call(Call("GET", path, params=params, parse=_fetched_page, decode=_loads))

    def commit_group_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """``POST /v1/groups/{group}/offsets``: the next offset to read, per partition."""
        if not offsets:
            return
        payload = {
            "offsets": [
                {"topic": topic, "partition": partition, "offset": offset}
                for (topic, partition), offset in sorted(offsets.items())
            ]
        }
        self._call(Call("POST", f"/v1/groups/{_segment(group)}/offsets", json=payload, parse=_ignore))


def _as_it_came(response: httpx.Response) -> httpx.Response:
    return response


def _topic_metadata(body: Any) -> TopicMetadata:
    partitions = tuple(
        sorted(
            (
                PartitionState(
                    partition=int(p["partition"]),
                    log_start_offset=int(p["log_start_offset"]),
                    high_watermark=int(p["high_watermark"]),
                    last_stable_offset=int(p["last_stable_offset"]),
                )
                for p in body["partitions"]
            ),
            key=lambda p: p.partition,
        )
    )
    return TopicMetadata(name=str(body["name"]), partitions=partitions)


def _fetched_page(body: Any) -> FetchedPage:
    return FetchedPage(
        messages=body["messages"],
        next_offset=int(body["next_offset"]),
        high_watermark=int(body["high_watermark"]),
        last_stable_offset=int(body["last_stable_offset"]),
    )


def _ignore(_body: Any) -> None:
    """An answer the source has no use for."""
