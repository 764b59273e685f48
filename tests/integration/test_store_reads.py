"""Database reads run a bounded number at once: more threads only fight over the GIL."""

from __future__ import annotations

import asyncio
import threading
import time

from sqlalchemy import Connection, text

from half_store.storage.database import open_database
from half_store.storage.store import Store


class Overlap:
    """A query that counts how many of its kind run at the same time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0
        self.most = 0

    def __call__(self, conn: Connection) -> int:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.05)
            return int(conn.execute(text("SELECT 1")).scalar_one())
        finally:
            with self._lock:
                self.running -= 1


def _read_concurrently(store: Store, count: int) -> tuple[list[int], int]:
    query = Overlap()

    async def run() -> list[int]:
        return list(await asyncio.gather(*(store.read(query) for _ in range(count))))

    return asyncio.run(run()), query.most


def test_reads_beyond_the_read_threads_wait_their_turn_and_all_complete(database_url: str) -> None:
    store = Store(open_database(database_url), read_threads=2)
    try:
        answers, most = _read_concurrently(store, 8)
    finally:
        store.database.dispose()
    assert answers == [1] * 8
    assert most == 2


def test_by_default_sqlite_reads_one_at_a_time_and_postgresql_a_few(database_url: str) -> None:
    database = open_database(database_url)
    store = Store(database)
    try:
        _, most = _read_concurrently(store, 8)
    finally:
        database.dispose()
    assert most == {"sqlite": 1, "postgresql": 4}[database.dialect]
