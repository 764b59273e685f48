"""Per-run PostgreSQL databases for the reliability tests (``halfmq_rel_<random>``, dropped at the end)."""

from __future__ import annotations

import os
import secrets

import psycopg
from sqlalchemy.engine import make_url

POSTGRES_ENV = "HALFMQ_TEST_POSTGRES_URL"


def postgres_admin_url() -> str | None:
    return os.environ.get(POSTGRES_ENV) or None


class RelPostgres:
    """Creates empty databases beside the admin URL's one and drops them all on close."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = make_url(admin_url)
        self.prefix = f"halfmq_rel_{secrets.token_hex(4)}"
        self.created: list[str] = []
        # Fail now, loudly, if the server is not there.
        with self._admin() as conn:
            conn.execute("SELECT 1")

    def _admin(self) -> psycopg.Connection:
        url = self.admin_url
        return psycopg.connect(
            host=url.host or "127.0.0.1",
            port=url.port or 5432,
            user=url.username,
            password=url.password,
            dbname=url.database,
            autocommit=True,
        )

    def url(self, name: str) -> str:
        return self.admin_url.set(database=name).render_as_string(hide_password=False)

    def new(self) -> str:
        name = f"{self.prefix}_{len(self.created)}"
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return self.url(name)

    def close(self) -> None:
        with self._admin() as conn:
            for name in reversed(self.created):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
