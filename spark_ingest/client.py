"""HTTP reads from the broker: topic metadata, committed fetches, group offsets.

spark_ingest is a client of the broker's public API like any other (it never
reads the database), so everything it knows about a partition comes through
here. The client is deliberately not picklable state for Spark: create one
inside the function that runs on the driver or the executor and close it there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

try:  # orjson is several times faster on 10k-message pages; plain json keeps executors dependency-light.
    import orjson

    def _loads(raw: bytes) -> Any:
        return orjson.loads(raw)

except ImportError:  # pragma: no cover - depends on the executor's environment

    def _loads(raw: bytes) -> Any:
        return json.loads(raw)


READ_COMMITTED = "read_committed"
MAX_FETCH_MESSAGES = 10_000

# Worth retrying: the broker restarting, a load balancer hiccup, a slow database.
_RETRIABLE_STATUS = frozenset({502, 503, 504})


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


def _error_from(response: httpx.Response, request: str) -> BrokerRequestFailed:
    code, message = "HTTP_ERROR", response.text[:500]
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        pass  # not the contract's error shape (a proxy's HTML page, say): keep the raw text
    if code == "TOPIC_NOT_FOUND":
        return TopicMissing(response.status_code, code, message, request)
    if code == "OFFSET_OUT_OF_RANGE" or response.status_code == 416:
        return OffsetOutOfRange(response.status_code, code, message, request)
    return BrokerRequestFailed(response.status_code, code, message, request)


class BrokerClient:
    """A keep-alive HTTP client for the few endpoints the Spark source needs.

    ``retries`` applies to transport errors and 502/503/504 only: fetches and
    metadata reads are idempotent, and a group-offset commit is last-writer-wins.
    """

    def __init__(self, url: str, *, timeout: float = 30.0, retries: int = 8) -> None:
        self.url = url.rstrip("/")
        self.retries = retries
        self._http = httpx.Client(base_url=self.url, timeout=timeout)

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection pool."""
        self._http.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        request = f"{method} {self.url}{path}"
        delay = 0.2
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                if attempt == self.retries:
                    raise BrokerUnreachable(
                        f"cannot reach the halfmq broker at {self.url} ({type(exc).__name__}: {exc}); "
                        "is it running, and can this machine reach it?"
                    ) from exc
            else:
                if response.status_code not in _RETRIABLE_STATUS or attempt == self.retries:
                    if response.status_code >= 400:
                        raise _error_from(response, request)
                    return response
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
        raise AssertionError("unreachable")  # the loop always returns or raises

    def get(self, path: str, *, params: Mapping[str, Any], headers: Mapping[str, str]) -> httpx.Response:
        """A GET with this client's retries and errors, its body left as it came (Arrow fetches)."""
        return self._request("GET", path, params=params, headers=headers)

    def topic(self, name: str) -> TopicMetadata:
        """``GET /v1/topics/{name}``; raises :class:`TopicMissing` for an unknown topic."""
        body = self._request("GET", f"/v1/topics/{name}").json()
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

    def topics(self, names: list[str]) -> list[TopicMetadata]:
        """Metadata for each named topic, in the given order."""
        return [self.topic(name) for name in names]

    def fetch(self, topic: str, partition: int, offset: int, max_messages: int) -> FetchedPage:
        """One ``read_committed`` page starting at ``offset``.

        The returned messages may have offset gaps (aborted transactions, control
        markers); callers continue from ``next_offset``, never from the last
        message's offset + 1.
        """
        response = self._request(
            "GET",
            f"/v1/topics/{topic}/partitions/{partition}/messages",
            params={
                "offset": offset,
                "max_messages": max(1, min(max_messages, MAX_FETCH_MESSAGES)),
                "isolation": READ_COMMITTED,
            },
        )
        body = _loads(response.content)
        return FetchedPage(
            messages=body["messages"],
            next_offset=int(body["next_offset"]),
            high_watermark=int(body["high_watermark"]),
            last_stable_offset=int(body["last_stable_offset"]),
        )

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
        self._request("POST", f"/v1/groups/{group}/offsets", json=payload)
