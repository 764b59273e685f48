"""Engines for SQLite and PostgreSQL, set up so the same storage code runs on both.

SQLite: WAL (readers never block the writer), a busy timeout, ``BEGIN IMMEDIATE``
for write transactions (a deferred transaction that later needs the write lock can
fail with SQLITE_BUSY without waiting), and ``synchronous=FULL`` by default so an
acknowledged write survives power loss, not just a process crash (see
docs/durability.md). PostgreSQL: psycopg 3, ``READ COMMITTED`` for writes and
autocommit for reads; offsets are allocated under the partition's row lock so
several broker processes can share one database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url

SQLITE_BUSY_TIMEOUT_MS = 30_000
WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024  # what a reset WAL file is cut back to


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


# Reads run on worker threads, a few at once (``Store``'s read threads; the WAL checkpoints
# take one more on SQLite). Connections are kept, so none is closed and reopened (with its
# PRAGMAs and a cold page cache) under load; the overflow serves a larger read-threads setting.
READER_POOL_SIZE = 20
READER_POOL_OVERFLOW = 20


def open_database(url: str, *, sqlite_synchronous: str = "FULL") -> Database:
    """Open engines for ``url``; raises ``ArgumentError`` for a malformed URL."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        writer = _sqlite_engine(
            url, begin="BEGIN IMMEDIATE", synchronous=sqlite_synchronous, pool_size=2, auto_checkpoint=False
        )
        # A small page cache per reader connection (the OS page cache is shared).
        reader = _sqlite_engine(
            url, begin="BEGIN", synchronous=sqlite_synchronous, pool_size=READER_POOL_SIZE, cache_kib=512
        )
        return Database(writer=writer, reader=reader)
    # One writer thread per process (see writer.py) plus start-up work needs few connections.
    writer = create_engine(url, pool_size=2, max_overflow=2, pool_pre_ping=True, isolation_level="READ COMMITTED")
    # Reads are single statements or tolerate READ COMMITTED between statements; autocommit
    # spares a ROLLBACK round trip every time a connection goes back to the pool.
    reader = create_engine(
        url,
        pool_size=READER_POOL_SIZE,
        max_overflow=READER_POOL_OVERFLOW,
        pool_pre_ping=True,
        isolation_level="AUTOCOMMIT",
    )
    return Database(writer=writer, reader=reader)


def _sqlite_engine(
    url: str, *, begin: str, synchronous: str, pool_size: int, cache_kib: int = 2048, auto_checkpoint: bool = True
) -> Engine:
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        pool_size=pool_size,
        max_overflow=READER_POOL_OVERFLOW,
    )

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
        cursor.execute(f"PRAGMA cache_size=-{cache_kib}")
        if not auto_checkpoint:  # the writer's: half_store/storage/checkpointer.py does it instead
            cursor.execute("PRAGMA wal_autocheckpoint=0")
            cursor.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Straight on the driver's connection: through exec_driver_sql this one statement
        # was 12 % of the core's time in a 100-message fetch (docs/benchmarks.md, round 4).
        connection.connection.dbapi_connection.execute(begin)

    return engine
