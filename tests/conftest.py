"""Fixtures shared by every test layer: one parametrised database fixture for SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import PostgresDatabases, SqliteDatabases, postgres_admin_url

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
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, migrated, empty database of each kind."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_databases").new()  # type: ignore[no-any-return]
    return request.getfixturevalue("postgres_databases").new()  # type: ignore[no-any-return]
