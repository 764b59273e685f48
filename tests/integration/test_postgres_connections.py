"""PostgreSQL connections: dropped by the server while they sat in the pools, and a group commit's transaction on them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from psycopg.errors import LockNotAvailable
from psycopg.pq import TransactionStatus
from sqlalchemy import Connection, Engine, select, text
from sqlalchemy.exc import OperationalError

from half_store.domain.errors import InvalidRequest, StorageUnavailable
from half_store.storage import database as database_module
from half_store.storage import log_store, producer_store
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


def _in_server_transaction(conn: Connection) -> bool:
    return bool(conn.connection.driver_connection.info.transaction_status == TransactionStatus.INTRANS)  # type: ignore[union-attr]


def _locked_by_another(through: Engine, topic_id: int, partition: int) -> bool:
    """Whether another transaction holds the partition's row: a NOWAIT lock from another pool fails at once."""
    with through.connect() as connection:
        try:
            connection.execute(
                text("SELECT 1 FROM partitions WHERE topic_id = :t AND partition = :p FOR UPDATE NOWAIT"),
                {"t": topic_id, "p": partition},
            )
        except OperationalError as error:
            assert isinstance(error.orig, LockNotAvailable)
            return True
    return False


def test_a_group_commit_is_one_server_transaction_holding_its_declared_partitions_from_its_first_statement(
    store: Store,
) -> None:
    topic = store.writer.run_sync(lambda conn: log_store.create_topic(conn, "t", 2))
    seen: dict[str, object] = {}

    def unit(conn: Connection) -> None:
        seen["in transaction"] = _in_server_transaction(conn)
        seen["partition 0 held"] = _locked_by_another(store.database.reader, topic.topic_id, 0)
        seen["partition 1 held"] = _locked_by_another(store.database.reader, topic.topic_id, 1)
        producer_store.new_producer(conn)
        raise InvalidRequest("changed its mind")

    with pytest.raises(InvalidRequest):
        asyncio.run(store.write(unit, locks=[(topic.topic_id, 0)]))

    assert seen == {"in transaction": True, "partition 0 held": True, "partition 1 held": False}
    with store.database.reader.connect() as connection:
        assert connection.execute(select(producers.c.producer_id)).all() == []  # the failed unit's write is undone
        assert not _locked_by_another(store.database.reader, topic.topic_id, 0)  # and its lock let go


def test_a_group_commit_that_declares_no_rows_is_a_server_transaction_too(store: Store) -> None:
    def unit(conn: Connection) -> bool:
        in_transaction = _in_server_transaction(conn)
        producer_store.new_producer(conn)
        return in_transaction

    assert asyncio.run(store.write(unit)) is True
    with store.database.reader.connect() as connection:
        assert len(connection.execute(select(producers.c.producer_id)).all()) == 1
