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
from sqlalchemy.pool import NullPool

from half_store.storage.database import open_database
from half_store.storage.migrate import upgrade

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
    """Databases cloned from a migrated template, reused across tests.

    A test gets a database from the pool (or a new ``CREATE DATABASE … TEMPLATE``),
    and gives it back emptied by TRUNCATE, which is much faster than creating and
    dropping one per test. Everything this run created is dropped on close.
    """

    def __init__(self, admin_url: str) -> None:
        self.admin_url = make_url(admin_url)
        self.prefix = f"halfmq_t{os.getpid()}_{secrets.token_hex(3)}"
        self.admin = create_engine(self.admin_url, isolation_level="AUTOCOMMIT", pool_size=1)
        self.created: list[str] = []
        self.free: list[str] = []
        self.template = self._create(f"{self.prefix}_tmpl")
        migrate(self.url(self.template))
        template_engine = create_engine(self.url(self.template), poolclass=NullPool)
        with template_engine.connect() as conn:
            self.tables = [
                name
                for (name,) in conn.execute(
                    text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'alembic_version'")
                )
            ]
        template_engine.dispose()

    def url(self, name: str) -> str:
        return self.admin_url.set(database=name).render_as_string(hide_password=False)

    def new(self) -> str:
        if self.free:
            return self.url(self.free.pop())
        return self.url(self._create(f"{self.prefix}_{len(self.created)}", template=self.template))

    def release(self, url: str) -> None:
        """Empty a database a test is done with and put it back in the pool."""
        name = make_url(url).database
        assert name is not None
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.begin() as conn:
                conn.execute(text("SET LOCAL lock_timeout = '10s'"))
                conn.execute(text(f"TRUNCATE {', '.join(self.tables)} RESTART IDENTITY"))
        except Exception:  # noqa: BLE001 - a test left sessions behind: leave this one out of the pool
            return
        finally:
            engine.dispose()
        self.free.append(name)

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
