"""Fixtures of the reliability tests: a fresh database of each kind per test, real broker processes.

SQLite is a file in the test's temporary directory. PostgreSQL databases come from the
run's ``postgres_databases`` (tests/conftest.py): created next to the one
``HALFMQ_TEST_POSTGRES_URL`` names and dropped at the end; with the variable unset the
PostgreSQL variant is skipped, with it set a connection failure fails the test.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # plain `pytest` does not put the repo root on sys.path
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.broker_process import BrokerProcess  # noqa: E402
from tests.support.databases import PostgresDatabases  # noqa: E402


@pytest.fixture(params=["sqlite", "postgresql"])
def rel_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of each kind (PostgreSQL: from the run's shared, migrated databases)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/broker.db"
    databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
    return databases.new()


@pytest.fixture()
def start_broker(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """``start_broker(url, **settings)``: a started broker process, stopped at the end of the test."""
    started: list[BrokerProcess] = []

    def start(database_url: str, **settings: object) -> BrokerProcess:
        process = BrokerProcess(database_url, log_path=tmp_path / f"broker-{len(started)}.log", **settings)
        started.append(process)
        return process.start()

    yield start
    for process in started:
        process.stop()
