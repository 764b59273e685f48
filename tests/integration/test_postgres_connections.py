"""PostgreSQL connections the server dropped while they sat in the broker's pools."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, Engine, select, text

from half_store.domain.errors import StorageUnavailable
from half_store.storage import database as database_module
from half_store.storage import producer_store
from half_store.storage.database import open_database
from half_store.storage.schema import producers
from half_store.storage.store import Store


@pytest.fixture
def store(postgres_url: str) -> Iterator[Store]:
    opened = Store(open_database(postgres_url))
    opened.start()
    yield opened
    opened.close()


def _backend_of(engine: Engine) -> int:
    """The server process behind the connection the pool hands out next."""
    with engine.connect() as connection:
        return _backend_pid(connection)


def _terminate(through: Engine, pid: int) -> None:
    """Have the server end a backend, as a restart or an administrator would (from another pool)."""
    with through.connect() as connection:
        assert connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()


def _backend_pid(conn: Connection) -> int:
    return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def test_a_read_on_a_connection_the_server_dropped_a_moment_ago_is_answered(store: Store) -> None:
    dropped = _backend_of(store.database.reader)
    _terminate(store.database.writer, dropped)

    served_by = asyncio.run(store.read(_backend_pid))

    assert served_by != dropped


def test_a_write_after_the_connection_sat_idle_and_was_dropped_commits(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    dropped = _backend_of(store.database.writer)
    _terminate(store.database.reader, dropped)
    monkeypatch.setattr(database_module, "PING_AFTER_IDLE_SECONDS", 0.0)  # it has sat long enough

    served_by = asyncio.run(store.write(_backend_pid))

    assert served_by != dropped


def test_a_write_on_a_connection_dropped_a_moment_ago_fails_whole_and_the_next_one_commits(store: Store) -> None:
    _terminate(store.database.reader, _backend_of(store.database.writer))

    async def twice() -> tuple[BaseException | tuple[int, int], tuple[int, int]]:
        first = (await asyncio.gather(store.write(producer_store.new_producer), return_exceptions=True))[0]
        return first, await store.write(producer_store.new_producer)

    first, second = asyncio.run(twice())

    assert isinstance(first, StorageUnavailable)
    with store.database.reader.connect() as connection:
        assert connection.execute(select(producers.c.producer_id)).scalars().all() == [second[0]]
