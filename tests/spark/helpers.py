"""Test-data helpers for the Spark tests: the broker's HTTP API through httpx (not the SDK)."""

from __future__ import annotations

import itertools
import os
from typing import Any

import httpx

_names = itertools.count()


class BrokerApi:
    """Test-data helpers over the broker's HTTP API (raising on any non-2xx answer)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=30.0)

    def _call(self, method: str, path: str, json: object | None = None) -> dict[str, Any]:
        response = self.http.request(method, path, json=json)
        assert response.status_code < 300, f"{method} {path} -> {response.status_code} {response.text}"
        return dict(response.json())

    def create_topic(self, prefix: str = "t", partitions: int = 1) -> str:
        """A fresh topic with a unique name."""
        name = f"{prefix}-{os.getpid()}-{next(_names)}"
        self._call("POST", "/v1/topics", {"name": name, "partitions": partitions})
        return name

    def produce(self, topic: str, messages: list[dict[str, Any]]) -> list[tuple[int, int]]:
        """Plain (committed) produce; returns ``(partition, offset)`` per message."""
        body = self._call("POST", f"/v1/topics/{topic}/messages", {"messages": messages})
        return [(o["partition"], o["offset"]) for o in body["offsets"]]

    def produce_values(self, topic: str, count: int, *, partitions: int = 1, prefix: str = "m") -> list[str]:
        """``count`` messages with values ``prefix-i``, spread round the partitions."""
        values = [f"{prefix}-{i}" for i in range(count)]
        for chunk in range(0, count, 500):
            batch = enumerate(values[chunk : chunk + 500], chunk)
            self.produce(topic, [{"key": v, "value": v, "partition": i % partitions} for i, v in batch])
        return values

    def begin(self) -> str:
        """A Pulsar-style (producer-less) transaction."""
        return str(self._call("POST", "/v1/transactions", {})["txn_id"])

    def produce_in(self, txn_id: str, topic: str, partition: int, values: list[str]) -> None:
        """Produce ``values`` into ``topic``/``partition`` inside the transaction."""
        self._call(
            "POST",
            f"/v1/topics/{topic}/partitions/{partition}/messages",
            {"messages": [{"key": v, "value": v} for v in values], "txn_id": txn_id},
        )

    def end(self, txn_id: str, *, commit: bool) -> None:
        """Commit or abort a transaction."""
        self._call("POST", f"/v1/transactions/{txn_id}/{'commit' if commit else 'abort'}")

    def half(self, topic: str, value: str, *, partition: int | None = None) -> str:
        """Prepare a RocketMQ-style half message; returns its message id."""
        body: dict[str, Any] = {"topic": topic, "producer_group": "spark-tests", "key": value, "value": value}
        if partition is not None:
            body["partition"] = partition
        return str(self._call("POST", "/v1/half-messages", body)["message_id"])

    def resolve_half(self, message_id: str, *, commit: bool) -> None:
        """Commit or roll back a half message."""
        self._call("POST", f"/v1/half-messages/{message_id}/{'commit' if commit else 'rollback'}")

    def topic(self, topic: str) -> dict[str, Any]:
        """``GET /v1/topics/{topic}``."""
        return self._call("GET", f"/v1/topics/{topic}")

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """A group's committed offsets."""
        body = self._call("GET", f"/v1/groups/{group}/offsets")
        return {(o["topic"], o["partition"]): o["offset"] for o in body["offsets"]}
