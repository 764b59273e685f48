"""The access log: off by default; when on, one JSON line per request."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api.middleware import ACCESS_LOG
from app.main import create_app
from tests.integration.conftest import create_topic, make_settings


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(record.getMessage()))


@pytest.fixture
def access_lines() -> Iterator[list[dict[str, Any]]]:
    handler = Lines()
    ACCESS_LOG.addHandler(handler)
    try:
        yield handler.lines
    finally:
        ACCESS_LOG.removeHandler(handler)


def test_on_it_logs_one_line_per_request(database_url: str, access_lines: list[dict[str, Any]]) -> None:
    with TestClient(create_app(make_settings(database_url, access_log=True))) as client:
        create_topic(client, "orders")
        client.get("/v1/topics/orders/partitions/0/messages", params={"offset": 0})
        client.get("/v1/topics/nope")
        client.get("/no/such/path")
    assert [(line["method"], line["path"], line["route"], line["status"]) for line in access_lines] == [
        ("POST", "/v1/topics", "/v1/topics", 201),
        ("GET", "/v1/topics/orders/partitions/0/messages", "/v1/topics/{topic}/partitions/{partition}/messages", 200),
        ("GET", "/v1/topics/nope", "/v1/topics/{topic}", 404),
        ("GET", "/no/such/path", "unmatched", 404),
    ]
    for line in access_lines:
        assert line["duration_ms"] >= 0 and line["time"].endswith("Z")
        assert line["client"] == "testclient:50000"  # Starlette's test client names itself so


def test_off_by_default(database_url: str, access_lines: list[dict[str, Any]]) -> None:
    with TestClient(create_app(make_settings(database_url))) as client:
        create_topic(client, "orders")
        client.get("/v1/topics/orders")
    assert access_lines == []
