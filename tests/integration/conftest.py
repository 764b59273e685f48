"""Integration fixtures: the real app (lifespan, migrations, writer) on a fresh database of each kind."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection

from app.broker import Broker
from app.main import create_app
from half_store.settings import Settings


def make_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "run_checker": False,  # tests drive the jobs themselves
        "core_process": False,  # in this process, so tests can reach the services (test_core_process runs both)
        "transaction_timeout_seconds": 0,
        "check_interval_seconds": 0.2,
        "check_max": 3,
        "kafka_port": 0,  # no listener on the default port; the Kafka tests start brokers with a free one
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def module_client(module_database_url: str) -> Iterator[TestClient]:
    """One app per database kind shared by a module's tests that only read what a fixture wrote,
    or whose requests are all refused: they cannot disturb one another, so need no broker each."""
    with TestClient(create_app(make_settings(module_database_url))) as test_client:
        yield test_client


@pytest.fixture
def broker(client: TestClient) -> Broker:
    return client.app.state.broker  # type: ignore[attr-defined,no-any-return]


def create_topic(client: TestClient, name: str, partitions: int = 1) -> None:
    response = client.post("/v1/topics", json={"name": name, "partitions": partitions})
    assert response.status_code == 201, response.text


def read_all(client: TestClient, topic: str, partition: int = 0, isolation: str = "read_committed") -> list[dict[str, Any]]:
    """Every readable message of a partition, following next_offset like a consumer."""
    messages: list[dict[str, Any]] = []
    offset = 0
    while True:
        body = client.get(
            f"/v1/topics/{topic}/partitions/{partition}/messages", params={"offset": offset, "isolation": isolation}
        ).json()
        messages.extend(body["messages"])
        if body["next_offset"] == offset:
            return messages
        offset = body["next_offset"]


def error_code(response: Any) -> str:
    return response.json()["error"]["code"]  # type: ignore[no-any-return]


@contextlib.contextmanager
def one_group_commit(client: TestClient) -> Iterator[Callable[[int], None]]:
    """Hold the group-commit writer, so the writes sent meanwhile land in one batch when it lets go.

    Yields ``queued(n)``, which waits until ``n`` writes are waiting.
    """
    writer = client.app.state.broker.store.writer  # type: ignore[attr-defined]
    holding, release = threading.Event(), threading.Event()

    def hold(conn: Connection) -> None:
        holding.set()
        release.wait(30)

    client.portal.start_task_soon(writer.submit, hold)  # type: ignore[union-attr]
    assert holding.wait(10), "the writer did not start the holding unit"

    def queued(count: int) -> None:
        deadline = time.monotonic() + 10
        while writer.queued < count:
            assert time.monotonic() < deadline, f"only {writer.queued} of {count} writes reached the writer"
            time.sleep(0.005)

    try:
        yield queued
    finally:
        release.set()
