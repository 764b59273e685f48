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

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DisconnectionError

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
# How long a PostgreSQL connection may sit in the pool before its next use pings it first.
PING_AFTER_IDLE_SECONDS = 1.0
_RETURNED_AT = "halfmq_returned_at"


# PostgreSQL: the isolation level of every write transaction (log_store.begin_locking opens the writer's own).
WRITER_ISOLATION = "READ COMMITTED"


def open_database(url: str, *, sqlite_synchronous: str = "FULL") -> Database:
    """Open engines for ``url``; raises ``ArgumentError`` for a malformed URL."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        _create_private(parsed.database)
        writer = _sqlite_engine(
            url, begin="BEGIN IMMEDIATE", synchronous=sqlite_synchronous, pool_size=2, auto_checkpoint=False
        )
        # A small page cache per reader connection (the OS page cache is shared).
        reader = _sqlite_engine(
            url, begin="BEGIN", synchronous=sqlite_synchronous, pool_size=READER_POOL_SIZE, cache_kib=512
        )
        return Database(writer=writer, reader=reader)
    # One writer thread per process (see writer.py) plus start-up work needs few connections.
    writer = create_engine(url, pool_size=2, max_overflow=2, isolation_level=WRITER_ISOLATION)
    # Reads are single statements or tolerate READ COMMITTED between statements; autocommit
    # spares a ROLLBACK round trip every time a connection goes back to the pool.
    reader = create_engine(
        url, pool_size=READER_POOL_SIZE, max_overflow=READER_POOL_OVERFLOW, isolation_level="AUTOCOMMIT"
    )
    for engine in (writer, reader):
        _ping_after_idle(engine)
    return Database(writer=writer, reader=reader)


def _create_private(path: str | None) -> None:
    """Create a new SQLite file readable by its owner only (0600).

    It holds listener secrets, the receipt key and RocketMQ signing keys in clear; SQLite
    gives its -wal and -shm files the database file's permissions.
    """
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    with contextlib.suppress(OSError):  # there already; or a folder that is not there, which SQLite then reports
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def _ping_after_idle(engine: Engine) -> None:
    """Check a pooled connection with a round trip only if it sat idle for a while.

    ``pool_pre_ping`` pings on every checkout: one extra round trip per group commit and
    per read, about 15 % of the core's time in a mode-2 load on PostgreSQL
    (bench/results/history.md, round 8). A connection back from use a moment ago is taken as
    alive; if the server went away since, the statement fails, SQLAlchemy invalidates
    every connection of the pool, and the caller hears ``StorageUnavailable`` (reads
    retry once on a fresh connection first: see ``Store.read_sync``).
    """

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info[_RETURNED_AT] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        returned_at = record.info.get(_RETURNED_AT)  # none yet: a connection opened just now
        if returned_at is None or time.monotonic() - returned_at < PING_AFTER_IDLE_SECONDS:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as error:
            raise DisconnectionError(f"a pooled connection failed its ping: {error}") from error


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
        # was 12 % of the core's time in a 100-message fetch (bench/results/history.md, round 4).
        connection.connection.dbapi_connection.execute(begin)

    return engine
