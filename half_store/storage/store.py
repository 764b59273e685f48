"""The storage handle every service shares: engines, the group-commit writer, the topic cache."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from sqlalchemy import Connection, text
from sqlalchemy.exc import DataError, OperationalError

from half_store.domain.constants import SYSTEM_TOPICS
from half_store.domain.errors import StorageUnavailable, TopicExists, TopicNotFound
from half_store.domain.records import Topic
from half_store.storage import log_store
from half_store.storage.checkpointer import Checkpointer
from half_store.storage.database import Database
from half_store.storage.log_store import AppendRequest
from half_store.storage.read_pool import ReadPool
from half_store.storage.writer import GroupCommitWriter, LockKey, MergeKind, unstorable

T = TypeVar("T")
P = TypeVar("P")

# Plain appends lock only their partitions' rows, allocating offsets in sorted order.
APPEND: MergeKind[AppendRequest, dict[int, int]] = MergeKind("append", log_store.append_many, locks_in_order=True)

# How many reads run at once, each on a worker thread of its own. More threads fight over
# the GIL: SQLite hands it back for every row it steps to, so 16 concurrent 100-message
# fetches on 16 threads did 290 requests/s, on 2 threads 450/s and on 1 thread 610–680/s
# (the core's CPU per fetch fell from 3.7 to 1.4 ms). psycopg takes a result whole and waits
# on the network: 4 threads did 474/s, 40 did 369/s and 1 did 250/s.
DEFAULT_READ_THREADS = {"sqlite": 1, "postgresql": 4}

# How long a topic looked up by name is trusted. Topics can be deleted and gain partitions;
# this process forgets its entry at once when it makes the change, and other broker
# processes on the same database see it within this long. (A write to a deleted topic
# fails whatever the cache says: its partition rows are gone.)
TOPIC_CACHE_SECONDS = 5.0


class Store:
    def __init__(self, database: Database, *, read_threads: int | None = None) -> None:
        self.database = database
        self._readers = ReadPool(read_threads or DEFAULT_READ_THREADS[database.dialect])
        # SQLite locks the whole database per write transaction; row locks need ordering only on PostgreSQL.
        begin_locked = None if database.is_sqlite else log_store.begin_locking
        # SQLite: WAL checkpoints on a thread of their own rather than inside the writer's commits.
        self._checkpointer = Checkpointer(database.reader) if database.is_sqlite else None
        self.writer = GroupCommitWriter(
            database.writer,
            begin_locked=begin_locked,
            on_commit=self._checkpointer.committed if self._checkpointer else None,
        )
        # name -> (topic, when it was looked up). Ids are never reused, so the id map needs no expiry.
        self._topics: dict[str, tuple[Topic, float]] = {}
        self._topics_by_id: dict[int, Topic] = {}

    @property
    def orders_locks(self) -> bool:
        """Whether writes must declare the partitions they lock (PostgreSQL; SQLite locks the database)."""
        return not self.database.is_sqlite

    def start(self) -> None:
        self.writer.start()
        if self._checkpointer is not None:
            self._checkpointer.start()

    def close(self) -> None:
        self.writer.close()
        self._readers.close()
        if self._checkpointer is not None:
            self._checkpointer.close()
        self.database.dispose()

    async def write(self, unit: Callable[[Connection], T], *, locks: Sequence[LockKey] = ()) -> T:
        """Run a write unit in the next group commit; ``locks`` are the partitions it appends to."""
        return await self.writer.submit(unit, locks=locks)

    async def write_merged(self, kind: MergeKind[P, T], payload: P, *, locks: Sequence[LockKey] = ()) -> T:
        """Like :meth:`write`, for a unit the writer may run together with the others of ``kind``."""
        return await self.writer.submit_merged(kind, payload, locks=locks)

    async def append(self, request: AppendRequest) -> dict[int, int]:
        """Plain appends, merged with the others of the same group commit; first offset per partition."""
        locks = [(request.topic.topic_id, p) for p in request.records]
        return await self.write_merged(APPEND, request, locks=locks)

    async def read(self, query: Callable[[Connection], T]) -> T:
        return await self._readers.run(functools.partial(self.read_sync, query))

    async def ping(self) -> None:
        """Raise :class:`StorageUnavailable` unless the database answers a query."""
        await self.read(lambda conn: conn.execute(text("SELECT 1")).scalar())

    def read_sync(self, query: Callable[[Connection], T]) -> T:
        try:
            try:
                with self.database.reader.connect() as connection:
                    return query(connection)
            except OperationalError as error:
                if not error.connection_invalidated:
                    raise
                # The server dropped a pooled connection since its last use (a restart, a
                # terminated backend); the pool is invalidated now, and a read is safe to repeat.
                with self.database.reader.connect() as connection:
                    return query(connection)
        except DataError as error:
            raise unstorable(error) from error
        except OperationalError as error:
            raise StorageUnavailable("the database is unavailable, retry later") from error

    # -- topics ---------------------------------------------------------------------

    async def topic(self, name: str) -> Topic:
        cached = self._cached(name)
        if cached is not None:
            return cached
        found = await self.read(lambda conn: log_store.find_topic(conn, name))
        if found is None:
            raise TopicNotFound(f"topic {name!r} does not exist")
        return self._remember(found)

    def topic_sync(self, conn: Connection, name: str) -> Topic:
        """The topic inside a running unit (background jobs)."""
        cached = self._cached(name)
        if cached is not None:
            return cached
        found = log_store.find_topic(conn, name)
        if found is None:
            raise TopicNotFound(f"topic {name!r} does not exist")
        return self._remember(found)

    def topic_by_id_sync(self, conn: Connection, topic_id: int) -> Topic:
        cached = self._topics_by_id.get(topic_id)
        if cached is not None:
            return cached
        found = log_store.find_topic_by_id(conn, topic_id)
        if found is None:
            raise TopicNotFound(f"topic id {topic_id} does not exist")
        return self._remember(found)

    def _cached(self, name: str) -> Topic | None:
        entry = self._topics.get(name)
        if entry is None or time.monotonic() - entry[1] > TOPIC_CACHE_SECONDS:
            return None
        return entry[0]

    def _remember(self, topic: Topic) -> Topic:
        self._topics[topic.name] = (topic, time.monotonic())
        self._topics_by_id[topic.topic_id] = topic
        return topic

    def forget_topic(self, name: str) -> None:
        """Drop a topic from the cache: it was deleted or altered, or a write found it gone."""
        entry = self._topics.pop(name, None)
        if entry is not None:
            self._topics_by_id.pop(entry[0].topic_id, None)

    def ensure_system_topics(self) -> None:
        """Create the hidden system topics if this database does not have them yet."""
        for name in SYSTEM_TOPICS:
            with contextlib.suppress(TopicExists):  # another broker process created it first
                self.writer.run_sync(functools.partial(log_store.create_topic, name=name, partition_count=1))
