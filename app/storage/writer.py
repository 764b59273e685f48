"""Group commit: concurrent writes share one database transaction and one fsync.

RocketMQ's GroupCommitService idea on SQL. Every write in the broker is a *unit*:
a function that takes a connection inside an open transaction and returns a
result. Requests hand units to :meth:`GroupCommitWriter.submit`; writer threads
take every unit that is waiting (up to ``max_batch``), run each one inside its own
savepoint so that one failing unit does not undo its neighbours, and commit once.
A unit's caller is answered only after that commit, so an acknowledged write is a
durable one.

On SQLite there is one writer thread: SQLite has one writer anyway, and queueing
beats fighting for the lock. On PostgreSQL a few threads run batches in parallel;
a unit that loses a deadlock or serialization race is retried on its own.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DataError, DBAPIError, OperationalError

from app.errors import BrokerError, StorageUnavailable, ValidationFailed

T = TypeVar("T")
Unit = Callable[[Connection], T]

log = logging.getLogger(__name__)

# PostgreSQL SQLSTATEs worth retrying a unit for: serialization failure, deadlock.
_RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})
_MAX_RETRIES = 5


@dataclass
class _Pending(Generic[T]):
    unit: Unit[T]
    done: Callable[[T | None, BaseException | None], None]
    attempts: int = 0
    outcome: tuple[Any, BaseException | None] | None = field(default=None)


class GroupCommitWriter:
    """Runs write units in shared transactions on dedicated threads."""

    def __init__(self, engine: Engine, *, threads: int = 1, max_batch: int = 256) -> None:
        self._engine = engine
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[_Pending[Any] | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._run, name=f"halfmq-writer-{i}", daemon=True) for i in range(threads)
        ]
        self._started = False
        self.batches_committed = 0
        self.units_committed = 0

    def start(self) -> None:
        if not self._started:
            self._started = True
            for thread in self._threads:
                thread.start()

    def close(self) -> None:
        if self._started:
            for _ in self._threads:
                self._queue.put(None)
            for thread in self._threads:
                thread.join(timeout=10)
            self._started = False

    async def submit(self, unit: Unit[T]) -> T:
        """Run ``unit`` in the next group commit and return its result once durable."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def done(result: T | None, error: BaseException | None) -> None:
            loop.call_soon_threadsafe(_settle, future, result, error)

        self._queue.put(_Pending(unit, done))
        return await future

    def run_sync(self, unit: Unit[T]) -> T:
        """Run ``unit`` in a transaction of its own on the calling thread (start-up, tools)."""
        with self._engine.begin() as connection:
            return unit(connection)

    # -- writer threads -------------------------------------------------------------

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self._max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # let this thread stop after this batch
                    break
                batch.append(item)
            self._commit_batch(batch)

    def _commit_batch(self, batch: list[_Pending[Any]]) -> None:
        retry: list[_Pending[Any]] = []
        try:
            with self._engine.connect() as connection, connection.begin():
                if len(batch) == 1:
                    # Alone in the transaction: no savepoint needed, a failure rolls it all back.
                    batch[0].outcome = (batch[0].unit(connection), None)
                else:
                    for pending in batch:
                        self._run_in_savepoint(connection, pending, retry)
        except BaseException as error:  # noqa: BLE001 - every caller must hear back
            if len(batch) == 1 and self._retryable(batch[0], error):
                retry.append(batch[0])
            else:
                failure = error if isinstance(error, BrokerError) else _storage_failure(error)
                for pending in batch:
                    if pending not in retry:
                        pending.done(None, failure)
                self._retry_alone(retry)
                return
        else:
            self.batches_committed += 1
            for pending in batch:
                if pending.outcome is not None:
                    self.units_committed += pending.outcome[1] is None
                    pending.done(*pending.outcome)
        self._retry_alone(retry)

    def _run_in_savepoint(self, connection: Connection, pending: _Pending[Any], retry: list[_Pending[Any]]) -> None:
        savepoint = connection.begin_nested()
        try:
            result = pending.unit(connection)
        except BaseException as error:  # noqa: BLE001
            savepoint.rollback()
            if self._retryable(pending, error):
                retry.append(pending)
            else:
                pending.outcome = (None, error if isinstance(error, BrokerError) else _storage_failure(error))
        else:
            savepoint.commit()
            pending.outcome = (result, None)

    def _retry_alone(self, retry: list[_Pending[Any]]) -> None:
        for pending in retry:
            pending.attempts += 1
            pending.outcome = None
            self._commit_batch([pending])

    @staticmethod
    def _retryable(pending: _Pending[Any], error: BaseException) -> bool:
        if pending.attempts >= _MAX_RETRIES or not isinstance(error, DBAPIError):
            return False
        sqlstate = getattr(error.orig, "sqlstate", None)
        return sqlstate in _RETRYABLE_SQLSTATES


def _storage_failure(error: BaseException) -> BaseException:
    """What a unit's caller hears when the database, not the domain, failed."""
    if isinstance(error, OperationalError):
        log.warning("database unavailable: %s", error)
        return StorageUnavailable("the database is unavailable, retry later")
    if isinstance(error, DataError):
        return unstorable(error)
    if isinstance(error, DBAPIError):
        log.error("write failed", exc_info=error)
    return error


def unstorable(error: DataError) -> ValidationFailed:
    """A value the database refuses (a NUL in PostgreSQL text, an out-of-range number)."""
    reason = str(error.orig).splitlines()[0] if error.orig else "invalid value"
    return ValidationFailed(f"a value in the request cannot be stored: {reason}")


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the request was cancelled (client went away); the write stands
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
