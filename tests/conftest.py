"""Fixtures shared by every test layer: one parametrised database fixture for SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.databases import (
    PostgresDatabases,
    SqliteDatabases,
    postgres_admin_url,
)

DATABASES = ["sqlite", "postgresql"]


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


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated, empty database of each kind."""
    if request.param == "sqlite":
        yield request.getfixturevalue("sqlite_databases").new()
        return
    databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
    url = databases.new()
    yield url
    databases.release(url)


@pytest.fixture
def postgres_url(postgres_databases: PostgresDatabases) -> Iterator[str]:
    """A migrated, empty PostgreSQL database (tests that only make sense there)."""
    url = postgres_databases.new()
    yield url
    postgres_databases.release(url)
