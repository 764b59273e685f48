"""Fixtures shared by every test layer: one parametrised database fixture for SQLite and PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.databases import (
    PostgresDatabases,
    SqliteDatabases,
    postgres_admin_url,
)

DATABASES = ["sqlite", "postgresql"]

# No test's broker listens on the fixed RocketMQ port (8081): a test that wants the gRPC
# listener names an ephemeral port itself (tests/support/broker_process.py does the same).
os.environ.setdefault("HALFMQ_GRPC_PORT", "0")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """With pytest-xdist (``-n 2``): whole modules to a worker, and all Spark tests to one.

    A module's tests often share a module-scoped broker process or app, started once per
    worker that runs any of them, so a module stays on one worker. The Spark tests share
    the run's one SparkSession (a JVM), so the tests/spark modules go together. (xdist's
    own ``loadgroup`` does not see markers under pytest 9.2, hence a scheduler of our own.)
    """
    from xdist.scheduler import LoadScopeScheduling

    class ModulesWithSparkTogether(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "tests/spark" if module.startswith("tests/spark/") else module

    return ModulesWithSparkTogether(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist workers, the Spark tests first: the longest chain of the run, on one worker.

    Started first, they run while the other worker gets through most of the rest;
    started last, they would be a tail of minutes with one worker idle. (Every worker
    collects the same order, as xdist requires; a run without xdist keeps its order.)
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: not item.nodeid.startswith("tests/spark/"))  # stable: otherwise as collected


@pytest.fixture(scope="session")
def sqlite_databases(tmp_path_factory: pytest.TempPathFactory) -> SqliteDatabases:
    return SqliteDatabases(tmp_path_factory.mktemp("sqlite"))


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[PostgresDatabases]:
    admin_url = postgres_admin_url()
    if admin_url is None:
        pytest.skip("HALFMQ_TEST_POSTGRES_URL is not set")
    databases = PostgresDatabases(admin_url)  # a connection failure here fails the test
    yield databases
    databases.close()


def fresh_database(request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated, empty database of the kind ``request.param`` names, released after use."""
    if request.param == "sqlite":
        yield request.getfixturevalue("sqlite_databases").new()
        return
    databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
    url = databases.new()
    yield url
    databases.release(url)


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated, empty database of each kind."""
    yield from fresh_database(request)


@pytest.fixture(scope="module", params=DATABASES)
def module_database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated, empty database of each kind shared by a module's tests.

    For modules whose tests cannot disturb one another (every request they make is
    refused, or each works in names of its own): one app start per module, not per test.
    """
    yield from fresh_database(request)


@pytest.fixture
def postgres_url(postgres_databases: PostgresDatabases) -> Iterator[str]:
    """A migrated, empty PostgreSQL database (tests that only make sense there)."""
    url = postgres_databases.new()
    yield url
    postgres_databases.release(url)
