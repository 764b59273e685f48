"""Engines for SQLite and PostgreSQL, set up so the same storage code runs on both.

SQLite: WAL (readers never block the writer), a busy timeout, ``BEGIN IMMEDIATE``
for write transactions (a deferred transaction that later needs the write lock can
fail with SQLITE_BUSY without waiting), and ``synchronous=FULL`` by default so an
acknowledged write survives power loss, not just a process crash (see
docs/durability.md). PostgreSQL: psycopg 3, a small pool, ``READ COMMITTED``;
offsets are allocated under the partition's row lock so several broker processes
can share one database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url

SQLITE_BUSY_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Database:
    """The engines a broker process uses: one that writes, one that reads."""

    writer: Engine
    reader: Engine

    @property
    def dialect(self) -> str:
        return self.writer.dialect.name

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    def dispose(self) -> None:
        self.writer.dispose()
        if self.reader is not self.writer:
            self.reader.dispose()


def open_database(url: str, *, sqlite_synchronous: str = "FULL", pool_size: int = 8) -> Database:
    """Open engines for ``url``; raises ``ArgumentError`` for a malformed URL."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        writer = _sqlite_engine(url, begin="BEGIN IMMEDIATE", synchronous=sqlite_synchronous)
        reader = _sqlite_engine(url, begin="BEGIN", synchronous=sqlite_synchronous)
        return Database(writer=writer, reader=reader)
    engine = create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        isolation_level="READ COMMITTED",
    )
    return Database(writer=engine, reader=engine)


def _sqlite_engine(url: str, *, begin: str, synchronous: str) -> Engine:
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite's own
        # transaction handling would defer it and break savepoints).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql(begin)

    return engine
