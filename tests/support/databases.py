"""Fresh databases for tests: SQLite files, and PostgreSQL databases cloned from a migrated template.

PostgreSQL is used when ``HALFMQ_TEST_POSTGRES_URL`` is set (then a connection
failure fails the tests instead of skipping them). Every database a run creates
is dropped at its end, since the server outlives the run.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.storage.database import open_database
from app.storage.migrate import upgrade

POSTGRES_ENV = "HALFMQ_TEST_POSTGRES_URL"


def postgres_admin_url() -> str | None:
    return os.environ.get(POSTGRES_ENV) or None


def migrate(url: str) -> None:
    database = open_database(url)
    try:
        upgrade(database.writer)
    finally:
        database.dispose()


class SqliteDatabases:
    """A migrated template file, copied for each test (much faster than migrating each time)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.template = directory / "template.db"
        migrate(f"sqlite:///{self.template}")

    def new(self) -> str:
        path = self.directory / f"t_{secrets.token_hex(6)}.db"
        shutil.copyfile(self.template, path)
        return f"sqlite:///{path}"


class PostgresDatabases:
    """``CREATE DATABASE … TEMPLATE`` from a migrated template; all dropped on close."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = make_url(admin_url)
        self.prefix = f"halfmq_t{os.getpid()}_{secrets.token_hex(3)}"
        self.admin = create_engine(self.admin_url, isolation_level="AUTOCOMMIT", pool_size=1)
        self.created: list[str] = []
        self.template = self._create(f"{self.prefix}_tmpl")
        migrate(self.url(self.template))

    def url(self, name: str) -> str:
        return self.admin_url.set(database=name).render_as_string(hide_password=False)

    def new(self) -> str:
        return self.url(self._create(f"{self.prefix}_{len(self.created)}", template=self.template))

    def _create(self, name: str, template: str | None = None) -> str:
        suffix = f" TEMPLATE {template}" if template else ""
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"{suffix}'))
        self.created.append(name)
        return name

    def close(self) -> None:
        with self.admin.connect() as conn:
            for name in reversed(self.created):
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.admin.dispose()
